// transceiver_config.h — every setting of rtcedge-transceiver: the resolved struct, and the
// operations its key table (transceiver_config_keys.cpp) derives: declaration (YAML,
// RTCEDGE_TRANSCEIVER_* environment, --flags), resolution, the --check-config YAML and the
// reference of docs/configuration.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clock.h"
#include "config_keys.h"
#include "config_layers.h"
#include "ingress_selector.h"
#include "net_address.h"

namespace rtce {

struct TransceiverConfig {
  // HTTP: signaling API, demo page, /metrics, /healthz, /readyz.
  SocketAddress http_listen;
  std::vector<std::string> api_keys;
  bool allow_public_without_keys = false;
  std::vector<std::string> cors_origins = {"*"};
  size_t max_body_bytes = 64 * 1024;
  uint64_t http_max_connections = kDefaultHttpMaxConnections;  // applied by configure_http_servers

  // Media workers: worker i binds media_listen:(media_base_port + i).
  uint32_t workers = 0;  // resolved: >= 1
  bool pin_cpus = false;
  SocketAddress media_listen;        // IP only (port ignored)
  uint16_t media_base_port = 40000;  // 0 = ephemeral per worker
  std::string advertise_address;     // the direct-mode candidate IP
  bool direct_enabled = true;
  std::vector<SocketAddress> relay_vips;  // non-empty = relay mode: these are the candidates
  uint16_t relay_tcp_port = 0;            // ICE-TCP passive candidates at the VIPs; 0 = none
  std::vector<IpPrefix> relay_sources;
  // Global relay: which ingress VIPs the answer names (ingress_selector.h).
  std::string relay_ingress_header;  // lowercase header name; "" = no header
  std::vector<IngressRegion> relay_ingress_regions;

  // Routing hints: worker i is endpoint endpoint_base_id + i.
  std::string hint_key_file;  // empty = a random key (direct mode only)
  uint8_t cluster_id = 0;
  uint16_t endpoint_base_id = 1;

  // Sessions.
  uint32_t max_sessions_per_worker = 1000;
  double setup_rate = 100;  // sessions/s, token bucket
  uint32_t setup_burst = 100;
  Nanos connect_timeout = 10'000'000'000;  // ICE + DTLS must complete within
  Nanos consent_timeout = 30'000'000'000;
  uint32_t stun_error_replies_per_second = 5;
  Nanos drain_timeout = 30'000'000'000;
  uint32_t ended_sessions_kept = 256;
  bool allow_text_only = false;  // offers with a data channel and no audio

  // Realtime-style signaling (/v1/realtime/...): the ephemeral-key secrets, "id:secret" each,
  // from the list and then the file; the first signs, all verify. None: one made at start.
  std::vector<std::string> realtime_key_secrets;
  std::string realtime_key_file;
  Nanos realtime_key_lifetime = 60'000'000'000;
  // The app server's sideband WebSockets on a Realtime call (/v1/realtime?call_id=).
  uint32_t sideband_max_per_call = 4;
  Nanos sideband_tool_timeout = 15'000'000'000;
  Nanos sideband_idle_timeout = 60'000'000'000;
  // Phone calls through Twilio Media Streams (telephony.md): on when the token file is set.
  std::string twilio_auth_token_file;
  std::string telephony_public_url;
  std::string telnyx_public_key;  // base64 Ed25519 key; set: the Telnyx endpoints are on
  Nanos telnyx_max_call = 14400'000'000'000;

  std::string dtls_certificate, dtls_private_key;

  // Audio.
  int sample_rate = 16000;
  int opus_complexity = 5;
  int opus_bitrate = 32000;
  Nanos jitter_delay = 40'000'000;
  bool opus_passthrough = false;

  // Backend.
  std::string backend_url;  // empty = the embedded echo backend
  std::string echo_mode = "loopback";
  Nanos echo_delay = 500'000'000;
  Nanos backend_connect_timeout = 3'000'000'000;
  std::vector<std::string> backend_headers;  // "Name: value"
  std::string backend_dialect = "rtcedge";   // "rtcedge" | "realtime" (backend_dialect_from_name)
  std::string backend_ca_file;               // wss:// trust anchors; empty = the system store

  // Shared registry (redis-sync); empty URL = none (endpoint ids from hint.endpoint_base_id).
  std::string registry_redis_url;
  std::string pod_identity;  // stable across restarts of the same pod (StatefulSet name)
  Nanos registry_ttl = 3'000'000'000;

  std::string log_format = "text", log_level = "info";

  bool relay_mode() const { return !relay_vips.empty(); }
};

// Every key: name, default, range, help, reference text.
const ConfigTable<TransceiverConfig>& transceiver_config_keys();
void declare_transceiver_config(ConfigLayers& layers);
// Throws ConfigError naming the key, where its value came from, and what is wrong.
TransceiverConfig resolve_transceiver_config(const ConfigLayers& layers);
// --check-config: the resolved configuration as YAML, secrets redacted.
std::string transceiver_config_yaml(const TransceiverConfig& config);
// --print-config-reference: the Markdown key table of docs/configuration.md.
std::string transceiver_config_reference();

}  // namespace rtce
