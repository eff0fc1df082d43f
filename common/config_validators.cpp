// config_validators.cpp — see config_validators.h.
#include "config_validators.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "error.h"

namespace rtce {

Nanos parse_duration(std::string_view text) {
  double number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || number < 0) return -1;
  std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  double scale = 1e9;
  if (unit.empty() || unit == "s")
    scale = 1e9;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "us")
    scale = 1e3;
  else if (unit == "m")
    scale = 60e9;
  else if (unit == "h")
    scale = 3600e9;
  else
    return -1;
  return static_cast<Nanos>(number * scale);
}

std::string format_duration(Nanos value) {
  if (value == 0) return "0s";
  struct Unit {
    Nanos scale;
    const char* name;
  };
  // Seconds rather than minutes or hours: "120s" reads like the documented defaults.
  for (const Unit u : {Unit{1'000'000'000, "s"}, Unit{1'000'000, "ms"}, Unit{1'000, "us"}})
    if (value % u.scale == 0) return std::to_string(value / u.scale) + u.name;
  // Below a microsecond only a bare number of seconds is exact.
  char text[40];
  std::snprintf(text, sizeof text, "%.9f", static_cast<double>(value) / 1e9);
  return text;
}

SocketAddress check_socket_address(std::string_view text, const std::string& where, AddressRule rule) {
  SocketAddress addr = SocketAddress::parse_or_throw(text, where);
  if (rule.concrete && (addr.is_unspecified() || addr.port() == 0))
    throw ConfigError(where + ": '" + std::string(text) + "' needs a concrete address and port");
  if (rule.need_port && addr.port() == 0)
    throw ConfigError(where + ": '" + std::string(text) + "' needs a port");
  return addr;
}

void check_concrete_ip(std::string_view text, const std::string& where, int family) {
  const std::string ip(text);
  auto parsed = SocketAddress::parse((family == AF_INET6 ? "[" + ip + "]" : ip) + ":1");
  if (!parsed || parsed->family() != family || parsed->is_unspecified())
    throw ConfigError(where + ": '" + ip + "' is not a concrete IPv" + (family == AF_INET ? "4" : "6") +
                      " address");
}

namespace {

// "host[:port]" or "[v6][:port]"; false on a bad port or an empty host.
bool parse_redis_node(std::string_view text, uint16_t default_port, RedisUrl::Node& out) {
  std::string_view host = text;
  std::string_view port_text;
  bool has_port = false;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return false;
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return false;
    if (!rest.empty()) {
      port_text = rest.substr(1);
      has_port = true;
    }
  } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    has_port = true;
  }
  out.port = default_port;
  if (has_port) {
    unsigned port = 0;
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc{} || end != port_text.data() + port_text.size() || port == 0 || port > 65535)
      return false;
    out.port = static_cast<uint16_t>(port);
  }
  // A DNS name or an IP address: nothing a resolver or a log line could misread.
  if (host.empty() || host.size() > 253) return false;
  for (const char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' && c != ':' &&
        c != '%')
      return false;
  }
  out.host = std::string(host);
  return true;
}

// %XX escapes of a URL's user information and query values (a password may hold '@').
std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned value = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16).ptr == text.data() + i + 3) {
      out += static_cast<char>(value);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

constexpr std::string_view kRedisUrlForms =
    "redis[s]://[[user]:password@]host[:port], "
    "redis[s]+sentinel://[[user]:password@]host[:port][,host[:port]…]/"
    "<master name> or redis[s]+cluster://[[user]:password@]host[:port][,host[:port]…]";

}  // namespace

std::optional<RedisUrl> parse_redis_url(std::string_view url, std::string* error) {
  const auto fail = [&](std::string why) -> std::optional<RedisUrl> {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  RedisUrl out;
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos)
    return fail(std::string("not a URL of the forms ") + std::string(kRedisUrlForms));
  const std::string_view scheme = url.substr(0, scheme_end);
  if (scheme == "redis" || scheme == "rediss") {
    out.topology = RedisUrl::Topology::kStandalone;
  } else if (scheme == "redis+sentinel" || scheme == "rediss+sentinel") {
    out.topology = RedisUrl::Topology::kSentinel;
  } else if (scheme == "redis+cluster" || scheme == "rediss+cluster") {
    out.topology = RedisUrl::Topology::kCluster;
  } else {
    return fail("unknown scheme '" + std::string(scheme) + "' (" + std::string(kRedisUrlForms) + ")");
  }
  out.tls = scheme.starts_with("rediss");
  url.remove_prefix(scheme_end + 3);

  std::string_view query;
  if (const auto q = url.find('?'); q != std::string_view::npos) {
    query = url.substr(q + 1);
    url = url.substr(0, q);
  }
  std::string_view path;
  if (const auto slash = url.find('/'); slash != std::string_view::npos) {
    path = url.substr(slash + 1);
    url = url.substr(0, slash);
  }
  if (const auto at = url.rfind('@'); at != std::string_view::npos) {
    const std::string_view credentials = url.substr(0, at);
    const auto colon = credentials.find(':');
    if (colon == std::string_view::npos) {
      out.password = percent_decode(credentials);
    } else {
      out.username = percent_decode(credentials.substr(0, colon));
      out.password = percent_decode(credentials.substr(colon + 1));
    }
    url.remove_prefix(at + 1);
  }
  const uint16_t default_port = out.topology == RedisUrl::Topology::kSentinel ? 26379 : 6379;
  while (true) {
    const auto comma = url.find(',');
    RedisUrl::Node node;
    if (!parse_redis_node(url.substr(0, comma), default_port, node))
      return fail("bad host:port '" + std::string(url.substr(0, comma)) + "'");
    out.nodes.push_back(std::move(node));
    if (out.nodes.size() > 64) return fail("more than 64 hosts");
    if (comma == std::string_view::npos) break;
    url.remove_prefix(comma + 1);
  }
  if (out.topology == RedisUrl::Topology::kStandalone && out.nodes.size() > 1)
    return fail("one host only (several are redis+sentinel:// sentinels or redis+cluster:// seeds)");
  if (out.topology == RedisUrl::Topology::kSentinel) {
    out.master_name = percent_decode(path.substr(0, path.find('/')));
    if (out.master_name.empty())
      return fail("a sentinel URL names its master: redis+sentinel://host:port/<master name>");
  }
  out.host = out.nodes.front().host;
  out.port = out.nodes.front().port;

  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    const auto eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    const std::string value =
        eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1));
    if (value.empty()) return fail("parameter '" + std::string(name) + "' has no value");
    std::string* slot = nullptr;
    bool tls_only = false;
    if (name == "tls_ca_file")
      slot = &out.tls_ca_file, tls_only = true;
    else if (name == "tls_cert_file")
      slot = &out.tls_cert_file, tls_only = true;
    else if (name == "tls_key_file")
      slot = &out.tls_key_file, tls_only = true;
    else if (name == "tls_server_name")
      slot = &out.tls_server_name, tls_only = true;
    else if (name == "password_file")
      slot = &out.password_file;
    else if (name == "sentinel_username" || name == "sentinel_password" || name == "sentinel_password_file") {
      if (out.topology != RedisUrl::Topology::kSentinel)
        return fail("'" + std::string(name) + "' is for redis+sentinel:// URLs");
      slot = name == "sentinel_username"   ? &out.sentinel_username
             : name == "sentinel_password" ? &out.sentinel_password
                                           : &out.sentinel_password_file;
    } else {
      return fail("unknown parameter '" + std::string(name) +
                  "' (tls_ca_file, tls_cert_file, tls_key_file, tls_server_name, password_file, "
                  "sentinel_username, sentinel_password, sentinel_password_file)");
    }
    if (tls_only && !out.tls) return fail("'" + std::string(name) + "' needs a rediss:// scheme (TLS)");
    *slot = value;
  }
  if (out.tls_cert_file.empty() != out.tls_key_file.empty())
    return fail("tls_cert_file and tls_key_file go together (a client certificate and its key)");
  return out;
}

void check_redis_url(std::string_view text, const std::string& where) {
  if (text.empty()) return;
  std::string why;
  const auto url = parse_redis_url(text, &why);
  if (!url) throw ConfigError(where + ": '" + redact_redis_url(text) + "': " + why);
  for (const std::string* file : {&url->tls_ca_file, &url->tls_cert_file, &url->tls_key_file,
                                  &url->password_file, &url->sentinel_password_file}) {
    if (!file->empty() && access(file->c_str(), R_OK) != 0)
      throw ConfigError(where + ": cannot read '" + *file + "': " + std::strerror(errno));
  }
}

std::string redact_redis_url(std::string_view text) {
  // Replaces the user information's password and sentinel_password's value, whatever else
  // the text holds (it may not parse: it is printed in the error that says so).
  std::string out(text);
  const auto scheme_end = out.find("://");
  if (scheme_end != std::string::npos) {
    const size_t start = scheme_end + 3;
    const size_t authority_end = std::min(out.find('/', start), out.find('?', start));
    const size_t at = out.substr(0, authority_end).rfind('@');
    if (at != std::string::npos && at >= start) {
      const size_t colon = out.find(':', start);
      const size_t secret = colon != std::string::npos && colon < at ? colon + 1 : start;
      out.replace(secret, at - secret, kRedacted);
    }
  }
  // In the query only, and only a parameter named so (a master's name may contain the words).
  constexpr std::string_view kParam = "sentinel_password=";
  const size_t query = out.find('?');
  for (size_t p = query; p != std::string::npos && p < out.size(); p = out.find('&', p + 1)) {
    if (out.compare(p + 1, kParam.size(), kParam) != 0) continue;
    const size_t value = p + 1 + kParam.size();
    out.replace(value, std::min(out.find('&', value), out.size()) - value, kRedacted);
  }
  return out;
}

void check_one_of(std::string_view text, const std::string& where, const std::vector<std::string>& choices) {
  std::string list;
  for (const auto& choice : choices) {
    if (choice == text) return;
    if (!list.empty()) list += ", ";
    list += choice;
  }
  throw ConfigError(where + ": '" + std::string(text) + "' is not one of " + list);
}

std::string yaml_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\x%02x", u);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string yaml_string_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const auto& item : items) {
    if (out.size() > 1) out += ", ";
    out += yaml_quote(item);
  }
  return out + "]";
}

}  // namespace rtce
