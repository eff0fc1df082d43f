// transceiver_config.cpp — see transceiver_config.h.
#include "transceiver_config.h"

#include <unistd.h>

#include <set>
#include <thread>

#include "error.h"
#include "redis_connection.h"

namespace rtce {

void declare_transceiver_config(ConfigLayers& c) {
  using K = ConfigLayers::Kind;
  c.declare("http.listen", K::scalar, "signaling API, demo page and metrics (default 127.0.0.1:8080)");
  c.declare("http.api_keys", K::list, "bearer API keys accepted by /v1/sessions (none = open, warned)");
  c.declare("http.allow_public_without_keys", K::scalar,
            "allow a non-loopback http.listen without API keys (default false)");
  c.declare("http.cors_origins", K::list, "origins allowed by CORS (default *)");
  c.declare("http.max_body_bytes", K::scalar,
            "largest SDP offer accepted, the one size limit of an offer (default 65536)");
  declare_http_server_keys(c);
  c.declare("workers", K::scalar, "media worker threads, one endpoint each (0 = one per CPU)");
  c.declare("pin_cpus", K::scalar, "pin worker i to CPU i (default false)");
  c.declare("media.listen", K::scalar, "IP the worker sockets bind (default 127.0.0.1)");
  c.declare("media.base_port", K::scalar, "worker i binds base_port+i; 0 = ephemeral (default 40000)");
  c.declare("media.advertise_address", K::scalar,
            "IP put in the direct-mode candidate (default: media.listen when concrete)");
  c.declare("direct.enabled", K::scalar,
            "accept unframed datagrams straight from clients (default: true without relay.vips)");
  c.declare("relay.vips", K::list, "relay VIPs (address:port) offered as candidates; set = relay mode");
  c.declare("relay.sources", K::list,
            "address ranges framed datagrams are accepted from (default 127.0.0.0/8, ::1/128)");
  c.declare("hint.key_file", K::scalar,
            "routing-hint key file shared with the relays (required with relays)");
  c.declare("hint.cluster_id", K::scalar, "cluster id in the hints (default 0)");
  c.declare("hint.endpoint_base_id", K::scalar, "endpoint id of worker 0; worker i is base+i (default 1)");
  c.declare("sessions.max_per_worker", K::scalar, "live sessions per worker (default 1000)");
  c.declare("sessions.setup_rate", K::scalar, "new sessions per second, token bucket (default 100)");
  c.declare("sessions.setup_burst", K::scalar, "token bucket depth (default 100)");
  c.declare("sessions.connect_timeout", K::scalar, "ICE and DTLS must complete within (default 10s)");
  c.declare("sessions.consent_timeout", K::scalar,
            "no authenticated packet (valid STUN check, SRTP/SRTCP that verifies) for this long ends a "
            "session (default 30s)");
  c.declare("sessions.stun_error_replies_per_second", K::scalar,
            "STUN error replies (400/401) per session per second; 0 = silent (default 5)");
  c.declare("sessions.drain_timeout", K::scalar,
            "on SIGTERM, live sessions may continue this long (default 30s)");
  c.declare("dtls.certificate", K::scalar, "PEM certificate (ECDSA P-256); default: generated at start");
  c.declare("dtls.private_key", K::scalar, "PEM private key for dtls.certificate");
  c.declare("audio.sample_rate", K::scalar, "PCM rate to and from the backend: 16000 | 24000 | 48000");
  c.declare("audio.opus_complexity", K::scalar, "Opus encoder complexity 0..10 (default 5)");
  c.declare("audio.opus_bitrate", K::scalar, "Opus encoder bitrate in bit/s (default 32000)");
  c.declare("audio.jitter_delay", K::scalar, "jitter buffer target delay (default 40ms)");
  c.declare("audio.opus_passthrough", K::scalar,
            "send and take Opus packets to/from the backend (default false)");
  c.declare("backend.url", K::scalar, "backend WebSocket URL (ws://host:port/path); empty = embedded echo");
  c.declare("backend.echo_mode", K::scalar, "embedded echo: loopback | parrot (default loopback)");
  c.declare("backend.echo_delay", K::scalar, "loopback echo delay (default 500ms)");
  c.declare("backend.connect_timeout", K::scalar, "backend connect and handshake timeout (default 3s)");
  c.declare("backend.headers", K::list, "extra handshake headers, 'Name: value'");
  c.declare("registry.redis_url", K::scalar,
            "redis://[[user]:password@]host[:port] of the shared registry; empty = none (default)");
  c.declare("registry.pod_identity", K::scalar,
            "this pod's stable name; the same name gets the same endpoint ids back (default: hostname)");
  c.declare("registry.ttl", K::scalar,
            "an endpoint not heartbeated for this long leaves the registry (default 3s)");
  declare_logging_keys(c);
}

namespace {

bool is_loopback(const SocketAddress& a) {
  const auto plain = a.unmapped();
  if (plain.is_v4()) return plain.ip_string().rfind("127.", 0) == 0;
  return plain.ip_string() == "::1";
}

}  // namespace

TransceiverConfig resolve_transceiver_config(const ConfigLayers& c) {
  constexpr Nanos ms = 1'000'000, s = 1'000'000'000;
  TransceiverConfig cfg;
  cfg.http_listen =
      SocketAddress::parse_or_throw(c.get_string("http.listen", "127.0.0.1:8080"), c.where("http.listen"));
  cfg.api_keys = c.get_list("http.api_keys", {});
  for (const auto& key : cfg.api_keys)
    if (key.size() < 16)
      throw ConfigError(c.where("http.api_keys") + ": an API key must be at least 16 characters");
  cfg.allow_public_without_keys = c.get_bool("http.allow_public_without_keys", false);
  if (cfg.api_keys.empty() && !is_loopback(cfg.http_listen) && !cfg.allow_public_without_keys)
    throw ConfigError(c.where("http.listen") + ": " + cfg.http_listen.to_string() +
                      " is reachable from other hosts and no http.api_keys are set; add keys or set "
                      "http.allow_public_without_keys=true");
  cfg.cors_origins = c.get_list("http.cors_origins", {"*"});
  cfg.max_body_bytes = c.get_uint("http.max_body_bytes", 64 * 1024, 1024, 1 << 20);

  cfg.workers = static_cast<uint32_t>(c.get_uint("workers", 0, 0, 64));
  if (cfg.workers == 0) cfg.workers = std::max(1u, std::thread::hardware_concurrency());
  cfg.pin_cpus = c.get_bool("pin_cpus", false);
  auto media_ip = c.get_string("media.listen", "127.0.0.1");
  auto media = SocketAddress::parse(media_ip.find(':') != std::string::npos ? "[" + media_ip + "]:0"
                                                                            : media_ip + ":0");
  if (!media) throw ConfigError(c.where("media.listen") + ": '" + media_ip + "' is not an IP address");
  cfg.media_listen = *media;
  cfg.media_base_port = static_cast<uint16_t>(c.get_uint("media.base_port", 40000, 0, 65535));
  if (cfg.media_base_port != 0 && cfg.media_base_port + cfg.workers - 1 > 65535)
    throw ConfigError(c.where("media.base_port") + ": base_port + workers exceeds 65535");
  cfg.advertise_address = c.get_string("media.advertise_address", "");
  if (cfg.advertise_address.empty()) {
    if (cfg.media_listen.is_unspecified() && !c.has("relay.vips"))
      throw ConfigError(c.where("media.advertise_address") +
                        ": required when media.listen is a wildcard address (clients need a concrete IP)");
    cfg.advertise_address = cfg.media_listen.ip_string();
  }
  for (const auto& text : c.get_list("relay.vips", {})) {
    auto vip = SocketAddress::parse_or_throw(text, c.where("relay.vips"));
    if (vip.is_unspecified() || vip.port() == 0)
      throw ConfigError(c.where("relay.vips") + ": '" + text + "' needs a concrete address and port");
    cfg.relay_vips.push_back(vip);
  }
  cfg.direct_enabled = c.get_bool("direct.enabled", cfg.relay_vips.empty());
  for (const auto& text : c.get_list("relay.sources", {"127.0.0.0/8", "::1/128"}))
    cfg.relay_sources.push_back(IpPrefix::parse_or_throw(text, c.where("relay.sources")));

  cfg.hint_key_file = c.get_string("hint.key_file", "");
  if (cfg.relay_mode() && cfg.hint_key_file.empty())
    throw ConfigError(c.where("hint.key_file") +
                      ": required with relay.vips (the relays must verify the hints this transceiver mints)");
  cfg.cluster_id = static_cast<uint8_t>(c.get_uint("hint.cluster_id", 0, 0, 255));
  cfg.endpoint_base_id = static_cast<uint16_t>(c.get_uint("hint.endpoint_base_id", 1, 0, 65535));
  if (cfg.endpoint_base_id + cfg.workers - 1 > 65535)
    throw ConfigError(c.where("hint.endpoint_base_id") + ": base + workers exceeds 65535");

  cfg.max_sessions_per_worker = static_cast<uint32_t>(c.get_uint("sessions.max_per_worker", 1000, 1, 100000));
  cfg.setup_rate = static_cast<double>(c.get_uint("sessions.setup_rate", 100, 1, 1000000));
  cfg.setup_burst = static_cast<uint32_t>(c.get_uint("sessions.setup_burst", 100, 1, 1000000));
  cfg.connect_timeout = c.get_duration("sessions.connect_timeout", 10 * s, 100 * ms, 300 * s);
  cfg.consent_timeout = c.get_duration("sessions.consent_timeout", 30 * s, 1 * s, 3600 * s);
  cfg.stun_error_replies_per_second =
      static_cast<uint32_t>(c.get_uint("sessions.stun_error_replies_per_second", 5, 0, 1000));
  cfg.drain_timeout = c.get_duration("sessions.drain_timeout", 30 * s, 0, 86400 * s);

  cfg.dtls_certificate = c.get_string("dtls.certificate", "");
  cfg.dtls_private_key = c.get_string("dtls.private_key", "");
  if (cfg.dtls_certificate.empty() != cfg.dtls_private_key.empty())
    throw ConfigError(c.where(cfg.dtls_certificate.empty() ? "dtls.certificate" : "dtls.private_key") +
                      ": dtls.certificate and dtls.private_key go together");

  cfg.sample_rate = static_cast<int>(c.get_uint("audio.sample_rate", 16000, 8000, 48000));
  if (cfg.sample_rate != 16000 && cfg.sample_rate != 24000 && cfg.sample_rate != 48000)
    throw ConfigError(c.where("audio.sample_rate") + ": must be 16000, 24000 or 48000");
  cfg.opus_complexity = static_cast<int>(c.get_uint("audio.opus_complexity", 5, 0, 10));
  cfg.opus_bitrate = static_cast<int>(c.get_uint("audio.opus_bitrate", 32000, 6000, 510000));
  cfg.jitter_delay = c.get_duration("audio.jitter_delay", 40 * ms, 0, 500 * ms);
  cfg.opus_passthrough = c.get_bool("audio.opus_passthrough", false);

  cfg.backend_url = c.get_string("backend.url", "");
  if (!cfg.backend_url.empty() && cfg.backend_url.rfind("ws://", 0) != 0)
    throw ConfigError(c.where("backend.url") + ": '" + cfg.backend_url +
                      "' must start with ws:// (wss:// is not supported yet; terminate TLS in a sidecar)");
  cfg.echo_mode = c.get_string("backend.echo_mode", "loopback");
  if (cfg.echo_mode != "loopback" && cfg.echo_mode != "parrot")
    throw ConfigError(c.where("backend.echo_mode") + ": '" + cfg.echo_mode + "' is not loopback or parrot");
  cfg.echo_delay = c.get_duration("backend.echo_delay", 500 * ms, 0, 10 * s);
  cfg.backend_connect_timeout = c.get_duration("backend.connect_timeout", 3 * s, 100 * ms, 60 * s);
  cfg.backend_headers = c.get_list("backend.headers", {});
  for (const auto& h : cfg.backend_headers)
    if (h.find(':') == std::string::npos || h.find_first_of("\r\n") != std::string::npos)
      throw ConfigError(c.where("backend.headers") + ": '" + h + "' is not 'Name: value'");

  cfg.registry_redis_url = c.get_string("registry.redis_url", "");
  if (!cfg.registry_redis_url.empty()) {
    if (!RedisOptions::from_url(cfg.registry_redis_url))
      throw ConfigError(c.where("registry.redis_url") + ": '" + cfg.registry_redis_url +
                        "' is not redis://[[user]:password@]host[:port][/db]");
    if (cfg.media_listen.is_unspecified() && !c.has("media.advertise_address"))
      throw ConfigError(c.where("media.advertise_address") +
                        ": required with registry.redis_url when media.listen is a wildcard (relays need a "
                        "concrete address)");
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  cfg.pod_identity = c.get_string("registry.pod_identity", host);
  if (cfg.pod_identity.empty() || cfg.pod_identity.size() > 253)
    throw ConfigError(c.where("registry.pod_identity") + ": must be 1..253 characters");
  cfg.registry_ttl = c.get_duration("registry.ttl", 3 * s, 300 * ms, 300 * s);

  resolve_logging_keys(c, cfg.log_format, cfg.log_level);
  return cfg;
}

}  // namespace rtce
