// config_validators.cpp — see config_validators.h.
#include "config_validators.h"

#include <charconv>
#include <cstdio>

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

std::optional<RedisUrl> parse_redis_url(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  if (!url.starts_with(kScheme)) return std::nullopt;
  url.remove_prefix(kScheme.size());
  RedisUrl out;
  if (const auto slash = url.find('/'); slash != std::string_view::npos) url = url.substr(0, slash);
  if (const auto at = url.rfind('@'); at != std::string_view::npos) {
    std::string_view credentials = url.substr(0, at);
    const auto colon = credentials.find(':');
    if (colon == std::string_view::npos) {
      out.password = std::string(credentials);
    } else {
      out.username = std::string(credentials.substr(0, colon));
      out.password = std::string(credentials.substr(colon + 1));
    }
    url.remove_prefix(at + 1);
  }
  std::string_view host = url;
  std::string_view port_text;
  bool has_port = false;
  if (url.starts_with('[')) {  // [v6]:port
    const auto close = url.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = url.substr(1, close - 1);
    const std::string_view rest = url.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return std::nullopt;
    if (!rest.empty()) {
      port_text = rest.substr(1);
      has_port = true;
    }
  } else if (const auto colon = url.rfind(':'); colon != std::string_view::npos) {
    host = url.substr(0, colon);
    port_text = url.substr(colon + 1);
    has_port = true;
  }
  if (has_port) {
    unsigned port = 0;
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc{} || end != port_text.data() + port_text.size() || port == 0 || port > 65535)
      return std::nullopt;
    out.port = static_cast<uint16_t>(port);
  }
  if (host.empty()) return std::nullopt;
  out.host = std::string(host);
  return out;
}

void check_redis_url(std::string_view text, const std::string& where) {
  if (!text.empty() && !parse_redis_url(text))
    throw ConfigError(where + ": '" + std::string(text) +
                      "' is not redis://[[user]:password@]host[:port][/db]");
}

std::string redact_redis_url(std::string_view text) {
  const auto url = parse_redis_url(text);
  if (!url || url->password.empty()) return std::string(text);
  const size_t start = std::string_view("redis://").size();
  const size_t at = text.substr(0, text.find('/', start)).rfind('@');
  std::string_view credentials = text.substr(start, at - start);
  const size_t colon = credentials.find(':');
  const std::string user =
      colon == std::string_view::npos ? "" : std::string(credentials.substr(0, colon)) + ":";
  return "redis://" + user + std::string(kRedacted) + std::string(text.substr(at));
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
