// backend_protocol.cpp — see backend_protocol.h.
#include "backend_protocol.h"

#include <cctype>
#include <iterator>

namespace rtce {

namespace {

bool is_unreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (is_unreserved(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

BackendUrl url_error(std::string message) {
  BackendUrl url;
  url.error = std::move(message);
  return url;
}

bool valid_port(std::string_view port) {
  if (port.empty() || port.size() > 5) return false;
  unsigned value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return value >= 1 && value <= 65535;
}

}  // namespace

BackendUrl parse_backend_url(std::string_view url, std::string_view session_id) {
  const bool tls = url.starts_with("wss://");
  if (!tls && !url.starts_with("ws://")) return url_error("backend URL must start with ws:// or wss://");
  std::string_view rest = url.substr(tls ? 6 : 5);
  size_t authority_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, authority_end);
  std::string_view target = authority_end == std::string_view::npos ? "" : rest.substr(authority_end);
  if (auto hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
  if (authority.find('@') != std::string_view::npos)
    return url_error("credentials in the URL are not supported");

  BackendUrl out;
  out.tls = tls;
  if (authority.starts_with('[')) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return url_error("unterminated [IPv6] host");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return url_error("garbage after [IPv6] host");
      out.port = std::string(after.substr(1));
    }
  } else {
    size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) out.port = std::string(authority.substr(colon + 1));
  }
  if (out.host.empty()) return url_error("backend URL has no host");
  if (out.port.empty()) out.port = tls ? "443" : "80";
  if (!valid_port(out.port)) return url_error("backend URL has a bad port");

  out.target = target.empty() || target[0] == '?' ? "/" + std::string(target) : std::string(target);
  if (out.target.find('?') == std::string::npos) {
    out.target += '?';
  } else if (!out.target.ends_with('?') && !out.target.ends_with('&')) {
    out.target += '&';
  }
  out.target += "session=" + percent_encode(session_id);
  return out;
}

size_t pcm_frame_bytes(int sample_rate) {
  if (sample_rate < 8000 || sample_rate > 48000 || sample_rate % 50 != 0) return 0;
  return static_cast<size_t>(sample_rate / 50) * 2;
}

size_t pcm_frames_in_message(size_t bytes, size_t frame_bytes) {
  if (frame_bytes == 0 || bytes == 0 || bytes % frame_bytes != 0) return 0;
  return bytes / frame_bytes;
}

nlohmann::json session_started_event(const BackendSessionInfo& info) {
  nlohmann::json metadata = nlohmann::json::object();
  for (const auto& [key, value] : info.metadata) metadata[key] = value;
  nlohmann::json event = {{"type", "session.started"},
                          {"session_id", info.session_id},
                          {"sample_rate", info.sample_rate},
                          {"encoding", info.opus_passthrough ? "opus" : "pcm_s16le"},
                          {"frame_ms", 20},
                          {"client", {{"address", info.client_address}, {"user_agent", info.user_agent}}},
                          {"path", info.path},
                          {"metadata", std::move(metadata)}};
  if (!info.session_config.is_null()) event["session"] = info.session_config;
  return event;
}

namespace {
const char* const kDialectNames[] = {RTCE_BACKEND_DIALECTS(RTCE_VOCAB_MESSAGE_LABEL)};
}  // namespace

std::string_view backend_dialect_name(BackendDialect dialect) { return vocab_name(kDialectNames, dialect); }

std::optional<BackendDialect> backend_dialect_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kDialectNames); ++i)
    if (name == kDialectNames[i]) return static_cast<BackendDialect>(i);
  return std::nullopt;
}

nlohmann::json session_ended_event(std::string_view reason) {
  return {{"type", "session.ended"}, {"reason", std::string(reason)}};
}

BackendText parse_backend_text(std::string_view text) {
  BackendText out;
  // The lexer rejects invalid UTF-8, so whatever parses here can be dumped again safely.
  nlohmann::json event = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object()) return out;
  auto type = event.find("type");
  if (type == event.end() || !type->is_string() || type->get_ref<const std::string&>().empty()) return out;
  const std::string& name = type->get_ref<const std::string&>();
  if (name == "clear") {
    out.kind = BackendTextKind::clear;
  } else if (name == "session.end") {
    out.kind = BackendTextKind::session_end;
    if (auto reason = event.find("reason"); reason != event.end() && reason->is_string()) {
      out.reason = reason->get<std::string>();
    }
  } else {
    out.kind = BackendTextKind::event;
  }
  out.event = std::move(event);
  return out;
}

}  // namespace rtce
