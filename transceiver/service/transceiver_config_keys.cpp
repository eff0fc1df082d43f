// transceiver_config_keys.cpp — the table of rtcedge-transceiver's configuration keys: each
// key's name, default, range, help and reference text, written once. The flags, env vars,
// YAML keys, validation, --check-config output and the key table of docs/configuration.md
// all come from here (config_keys.h).
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "error.h"
#include "telnyx_webhook.h"
#include "transceiver_config.h"

namespace rtce {
namespace {

using namespace keys;
using C = TransceiverConfig;
constexpr Nanos ms = 1'000'000, s = 1'000'000'000;

std::string hostname() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

ConfigTable<C> build() {
  ConfigTable<C> t;
  t.push_back(address_key<C>(
      "http.listen", &C::http_listen, "127.0.0.1:8080", {},
      {.help = "signaling API, demo page and metrics",
       .doc = "signaling API, demo page (`/`), `/metrics`, `/healthz`, `/readyz`. A non-loopback address "
              "requires `http.api_keys` or `http.allow_public_without_keys`."}));
  t.push_back(
      string_list_key<C>("http.api_keys", &C::api_keys, {},
                         {.help = "bearer API keys accepted by /v1/sessions (none = open, warned)",
                          .doc = "bearer keys for `/v1/sessions` (`Authorization: Bearer <key>`), each ≥ 16 "
                                 "characters. Empty: no authentication (a warning at start).",
                          .secret = true},
                         [](const std::string& key, const std::string& where) {
                           if (key.size() < 16)
                             throw ConfigError(where + ": an API key must be at least 16 characters");
                         }));
  t.push_back(bool_key<C>("http.allow_public_without_keys", &C::allow_public_without_keys, false,
                          {.help = "allow a non-loopback http.listen without API keys",
                           .doc = "allow a non-loopback `http.listen` without keys."}));
  t.push_back(string_list_key<C>(
      "http.cors_origins", &C::cors_origins, {"*"},
      {.help = "origins allowed by CORS", .doc = "origins that get CORS headers; `*` = any."}));
  t.push_back(uint_key<C>("http.max_body_bytes", &C::max_body_bytes, 64 * 1024, 1024, 1 << 20,
                          {.help = "largest SDP offer accepted, the one size limit of an offer",
                           .doc = "largest request body (SDP offer); larger → 413. 1024..1048576. The one "
                                  "size limit of an offer: the SDP parser takes whatever this lets through "
                                  "(its line-count and line-length caps still apply)."}));
  t.push_back(http_max_connections_key<C>(
      &C::http_max_connections,
      "open HTTP connections, 1..1000000 (the relay's admin server has the same key). At the cap a new "
      "connection closes the idlest idle one, so `/healthz` always gets through."));
  {
    auto workers = uint_key<C>(
        "workers", &C::workers, 0, 0, 64,
        {.help = "media worker threads, one endpoint each (0 = one per CPU)",
         .doc = "media worker threads, one socket and one endpoint id each; 0 = one per CPU. 0..64."});
    workers.read = [](const ConfigLayers& c, C& cfg) {
      cfg.workers = static_cast<uint32_t>(c.get_uint("workers", 0, 0, 64));
      if (cfg.workers == 0) cfg.workers = std::max(1u, std::thread::hardware_concurrency());
    };
    t.push_back(std::move(workers));
  }
  t.push_back(bool_key<C>("pin_cpus", &C::pin_cpus, false,
                          {.help = "pin worker i to the i-th allowed CPU",
                           .doc = "pin worker *i* to the *i*-th allowed CPU (wrapping)."}));
  t.push_back(custom_key<C>(
      "media.listen", ConfigLayers::Kind::scalar,
      {.help = "IP the worker sockets bind",
       .doc = "IP (no port) the worker sockets bind; `::` is dual-stack.",
       .default_text = "127.0.0.1"},
      [](const ConfigLayers& c, C& cfg) {
        const auto ip = c.get_string("media.listen", "127.0.0.1");
        auto media = SocketAddress::parse(ip.find(':') != std::string::npos ? "[" + ip + "]:0" : ip + ":0");
        if (!media) throw ConfigError(c.where("media.listen") + ": '" + ip + "' is not an IP address");
        cfg.media_listen = *media;
      },
      [](const C& cfg) { return yaml_quote(cfg.media_listen.ip_string()); }));
  {
    auto base_port = uint_key<C>(
        "media.base_port", &C::media_base_port, 40000, 0, 65535,
        {.help = "worker i binds base_port+i; 0 = ephemeral",
         .doc = "worker *i* binds `base_port + i`; 0 = an ephemeral port per worker (direct mode only: "
                "relays need fixed endpoint addresses). `base_port + workers - 1` ≤ 65535."});
    base_port.read = [read = base_port.read](const ConfigLayers& c, C& cfg) {
      read(c, cfg);
      if (cfg.media_base_port != 0 && cfg.media_base_port + cfg.workers - 1 > 65535)
        throw ConfigError(c.where("media.base_port") + ": base_port + workers exceeds 65535");
    };
    t.push_back(std::move(base_port));
  }
  {
    auto advertise = string_key<C>(
        "media.advertise_address", &C::advertise_address, "",
        {.help = "IP put in the direct-mode candidate (default: media.listen when concrete)",
         .doc = "IP put in the direct-mode candidate (e.g. the public address in front of a 1:1 NAT). "
                "Required when `media.listen` is a wildcard and `relay.vips` is unset.",
         .default_text = "`media.listen`"});
    advertise.read = [](const ConfigLayers& c, C& cfg) {
      cfg.advertise_address = c.get_string("media.advertise_address", "");
      if (!cfg.advertise_address.empty()) return;
      if (cfg.media_listen.is_unspecified() && !c.has("relay.vips"))
        throw ConfigError(c.where("media.advertise_address") +
                          ": required when media.listen is a wildcard address (clients need a concrete IP)");
      cfg.advertise_address = cfg.media_listen.ip_string();
    };
    t.push_back(std::move(advertise));
  }
  {
    auto direct = bool_key<C>(
        "direct.enabled", &C::direct_enabled, true,
        {.help = "accept unframed datagrams straight from clients (default: true without relay.vips)",
         .doc = "accept unframed datagrams straight from clients; when off they are dropped "
                "(`direct_disabled`).",
         .default_text = "`true` without `relay.vips`, else `false`"});
    // Its default follows relay.vips, which parses to one VIP per item (or fails).
    direct.read = [](const ConfigLayers& c, C& cfg) {
      cfg.direct_enabled = c.get_bool("direct.enabled", c.get_list("relay.vips", {}).empty());
    };
    t.push_back(std::move(direct));
  }
  t.push_back(parsed_list_key<C>(
      "relay.vips", &C::relay_vips, {},
      {.help = "relay VIPs (address:port) offered as candidates; set = relay mode",
       .doc = "relay VIPs (`ip:port`, concrete address and port) offered as candidates, in this order. Set = "
              "relay mode."},
      [](const std::string& text, const std::string& where) {
        return check_socket_address(text, where, {.concrete = true});
      }));
  t.push_back(uint_key<C>(
      "relay.tcp_port", &C::relay_tcp_port, 0, 0, 65535,
      {.help = "the relays' ICE-TCP port: the answer adds a passive TCP candidate per VIP (0 = none; the "
               "chart: 443)",
       .doc =
           "0..65535; the relays' `ice_tcp.port`: the answer (`/v1/sessions`, `/v1/realtime/calls`, ICE "
           "restarts) names, after the UDP candidates, one `tcp ... typ host tcptype passive` candidate per "
           "VIP at this port, ranked below every UDP one, for callers whose network drops UDP. 0 = none "
           "(the switch that turns ICE-TCP off). Relay mode only."}));
  t.push_back(custom_key<C>(
      "relay.ingress_header", ConfigLayers::Kind::scalar,
      {.help = "request header naming the client's region (set by a geo-aware front door); default none",
       .doc =
           "global relay ([global-relay.md](global-relay.md#signaling)): the request header a geo-aware "
           "front "
           "door sets to the client's region (e.g. `X-Rtcedge-Region` from a Cloudflare Worker or a GSLB). A "
           "value naming one of `relay.ingress_regions` makes the answer name that region's VIPs first.",
       .default_text = "—"},
      [](const ConfigLayers& c, C& cfg) {
        std::string name = c.get_string("relay.ingress_header", "");
        for (char& ch : name) {
          const auto u = static_cast<unsigned char>(ch);
          if (!std::isalnum(u) && ch != '-' && ch != '_')
            throw ConfigError(c.where("relay.ingress_header") + ": '" + name +
                              "' is not an HTTP header name");
          ch = static_cast<char>(std::tolower(u));
        }
        cfg.relay_ingress_header = name;
      },
      [](const C& cfg) { return yaml_quote(cfg.relay_ingress_header); }));
  t.push_back(custom_key<C>(
      "relay.ingress_regions", ConfigLayers::Kind::list,
      {.help = "ingress relay VIPs by region, region=vip:port (global relay)",
       .doc =
           "global relay: the ingress relays the answer may name instead of this cluster's own. File: a list "
           "of `{region: eu, vips: \"203.0.113.10:3478 [2001:db8::10]:3478\", sources: \"198.51.100.0/24\"}` "
           "(space-separated; `sources` optional: client addresses served from that region); flags/env: "
           "`eu=203.0.113.10:3478,...`. A region chosen by `relay.ingress_header`, else by the client's "
           "address, "
           "puts its VIPs first in the answer and `relay.vips` after them as fallbacks; no match: "
           "`relay.vips` "
           "only. Needs `relay.vips`.",
       .default_text = "[]"},
      [](const ConfigLayers& c, C& cfg) {
        cfg.relay_ingress_regions =
            parse_ingress_regions(c.get_list("relay.ingress_regions", {}), c.where("relay.ingress_regions"));
      },
      [](const C& cfg) {
        std::string out = "[";
        for (const auto& r : cfg.relay_ingress_regions) {
          std::string vips, sources;
          for (const auto& v : r.vips) vips += (vips.empty() ? "" : " ") + v.to_string();
          for (const auto& p : r.sources) sources += (sources.empty() ? "" : " ") + p.to_string();
          out += (out.size() > 1 ? ", " : "") + std::string("{region: ") + yaml_quote(r.name) +
                 ", vips: " + yaml_quote(vips) + ", sources: " + yaml_quote(sources) + "}";
        }
        return out + "]";
      }));
  t.push_back(parsed_list_key<C>(
      "relay.sources", &C::relay_sources, {"127.0.0.0/8", "::1/128"},
      {.help = "address ranges framed datagrams are accepted from",
       .doc = "address ranges (`10.0.2.0/24`, `fd00::/8`, or one address) framed datagrams are accepted "
              "from: the relays' addresses towards this transceiver. Framed datagrams from elsewhere are "
              "dropped (`untrusted_relay`)."},
      &IpPrefix::parse_or_throw));
  {
    auto key_file = string_key<C>(
        "hint.key_file", &C::hint_key_file, "",
        {.help = "routing-hint key file shared with the relays (required with relays)",
         .doc =
             "the routing-hint key file shared with the relays "
             "([wire-format.md](wire-format.md#key-file-and-rotation)). Required with `relay.vips`; without "
             "it a random key is generated at each start (direct mode needs no relay to verify hints)."});
    key_file.read = [read = key_file.read](const ConfigLayers& c, C& cfg) {
      read(c, cfg);
      if (cfg.relay_mode() && cfg.hint_key_file.empty())
        throw ConfigError(
            c.where("hint.key_file") +
            ": required with relay.vips (the relays must verify the hints this transceiver mints)");
    };
    t.push_back(std::move(key_file));
  }
  t.push_back(
      uint_key<C>("hint.cluster_id", &C::cluster_id, 0, 0, 255,
                  {.help = "cluster id in the hints",
                   .doc = "cluster id written into hints; must equal the relays' `cluster_id`. 0..255."}));
  {
    auto base_id = uint_key<C>(
        "hint.endpoint_base_id", &C::endpoint_base_id, 1, 0, 65535,
        {.help = "endpoint id of worker 0; worker i is base+i",
         .doc = "endpoint id of worker 0; worker *i* is base + *i*. `base + workers - 1` ≤ 65535."});
    base_id.read = [read = base_id.read](const ConfigLayers& c, C& cfg) {
      read(c, cfg);
      if (cfg.endpoint_base_id + cfg.workers - 1 > 65535)
        throw ConfigError(c.where("hint.endpoint_base_id") + ": base + workers exceeds 65535");
    };
    t.push_back(std::move(base_id));
  }
  t.push_back(uint_key<C>("sessions.max_per_worker", &C::max_sessions_per_worker, 1000, 1, 100000,
                          {.help = "live sessions per worker",
                           .doc = "live sessions per worker (placed, connecting or connected); a full "
                                  "transceiver answers 503. 1..100000."}));
  t.push_back(
      uint_key<C>("sessions.setup_rate", &C::setup_rate, 100, 1, 1000000,
                  {.help = "new sessions per second, token bucket",
                   .doc = "new sessions per second (token bucket, integer); over it → 429. 1..1000000."}));
  t.push_back(
      uint_key<C>("sessions.setup_burst", &C::setup_burst, 100, 1, 1000000,
                  {.help = "token bucket depth", .doc = "token bucket depth (starts full). 1..1000000."}));
  t.push_back(duration_key<C>("sessions.connect_timeout", &C::connect_timeout, 10 * s, 100 * ms, 300 * s,
                              {.help = "ICE and DTLS must complete within",
                               .doc = "ICE and DTLS must complete within this time of the offer, or the "
                                      "session ends (`connect_timeout`). 100ms..300s."}));
  t.push_back(
      duration_key<C>("sessions.consent_timeout", &C::consent_timeout, 30 * s, 1 * s, 3600 * s,
                      {.help = "no authenticated packet (valid STUN check, SRTP/SRTCP that verifies) for "
                               "this long ends a session",
                       .doc = "no authenticated packet of the session (a valid STUN check, or SRTP/SRTCP "
                              "that verifies) for this long ends it (`consent_expired`, RFC 7675). Clients "
                              "that send no checks while media flows stay up. 1s..3600s."}));
  t.push_back(uint_key<C>(
      "sessions.stun_error_replies_per_second", &C::stun_error_replies_per_second, 5, 0, 1000,
      {.help = "STUN error replies (400/401) per session per second; 0 = silent",
       .doc = "error replies (400/401) to checks that fail authentication, per session per second (a burst "
              "of as many); the rest are counted and left unanswered. 0 = never answer them. 0..1000."}));
  t.push_back(duration_key<C>("sessions.drain_timeout", &C::drain_timeout, 30 * s, 0, 86400 * s,
                              {.help = "on SIGTERM, live sessions may continue this long",
                               .doc = "on SIGTERM/SIGINT, live sessions may continue this long "
                                      "([operations.md](operations.md#draining)). 0..86400s."}));
  t.push_back(bool_key<C>("sessions.allow_text_only", &C::allow_text_only, false,
                          {.help = "accept offers with a data channel and no audio",
                           .doc = "accept an offer with a data channel (`m=application`) and no audio "
                                  "section: a text-only session. Off: such an offer gets 400 naming the "
                                  "reason."}));
  t.push_back(string_list_key<C>(
      "realtime.key_secrets", &C::realtime_key_secrets, {},
      {.help = "ephemeral-key (ek_) HMAC secrets, 'id:secret' each, >= 32 bytes; the first signs",
       .doc =
           "HMAC-SHA256 secrets of the ephemeral client keys (`ek_...`) that `/v1/realtime/client_secrets` "
           "mints, `id:secret` each (id `[A-Za-z0-9_-]`, secret ≥ 32 bytes). The first signs, every one "
           "verifies: give every pod the same list so any pod accepts a key, and rotate by putting a new "
           "secret first. Unset (and no `realtime.key_file`): a random secret is made at start and keys "
           "verify only on this pod (a warning).",
       .secret = true},
      [](const std::string& item, const std::string& where) {
        const size_t colon = item.find(':');
        if (colon == std::string::npos || colon == 0)
          throw ConfigError(where + ": each realtime.key_secrets item must be 'id:secret'");
      }));
  t.push_back(
      string_key<C>("realtime.key_file", &C::realtime_key_file, "",
                    {.help = "file of ephemeral-key secrets, one 'id:secret' a line (after key_secrets)",
                     .doc = "a file of more ephemeral-key secrets, one `id:secret` a line (`#` "
                            "comments and blank lines skipped), taken after `realtime.key_secrets`. "
                            "Read and checked at start and by `--check-config`."}));
  t.push_back(duration_key<C>("realtime.key_lifetime", &C::realtime_key_lifetime, 60 * s, 10 * s, 7200 * s,
                              {.help = "lifetime of an ephemeral key when the request names none",
                               .doc = "lifetime of an ephemeral key when the `client_secrets` request has no "
                                      "`expires_after.seconds`. 10s..7200s."}));
  t.push_back(uint_key<C>("realtime.sideband.max_per_call", &C::sideband_max_per_call, 4, 1, 16,
                          {.help = "sideband WebSockets one Realtime call may have at once",
                           .doc = "sideband WebSockets (`GET /v1/realtime?call_id=`) one Realtime call may "
                                  "have attached at once; one more gets 409 `too_many_sidebands`. 1..16."}));
  t.push_back(duration_key<C>(
      "realtime.sideband.tool_timeout", &C::sideband_tool_timeout, 15 * s, 1 * s, 600 * s,
      {.help = "how long a tool call waits for a sideband that went away",
       .doc = "how long a function call the backend asked for waits, after the call's last sideband went "
              "away, for a sideband to come back and answer it; then the edge answers it with a "
              "`tool_call_timed_out` error output and a `response.create`, so the caller is not left in "
              "silence. Calls that never had a sideband are not timed (the browser answers). 1s..600s."}));
  t.push_back(duration_key<C>(
      "realtime.sideband.idle_timeout", &C::sideband_idle_timeout, 60 * s, 5 * s, 3600 * s,
      {.help = "a sideband that answers no ping for this long is closed",
       .doc = "a sideband WebSocket is pinged at half of this and closed (its call goes on) when the app "
              "server has been silent, pongs included, for this long. 5s..3600s."}));
  t.push_back(string_key<C>(
      "telephony.twilio.auth_token_file", &C::twilio_auth_token_file, "",
      {.help = "file holding the Twilio auth token; set: the Twilio webhook and stream endpoints are on",
       .doc = "file holding the Twilio account's auth token, which signs the voice webhook's requests "
              "(`X-Twilio-Signature`); one token a line, every one verifies (to rotate: add the new "
              "token as a second line, restart the pods one by one, then remove the old). Set: `POST "
              "/v1/telephony/twilio` answers calls with a "
              "media stream to this service ([telephony.md](telephony.md)); unset: both endpoints are off. "
              "Read at start."},
      [](const std::string& path, const std::string& where) {
        if (access(path.c_str(), R_OK) != 0) throw ConfigError(where + ": cannot read '" + path + "'");
      }));
  t.push_back(string_key<C>(
      "telephony.telnyx.public_key", &C::telnyx_public_key, "",
      {.help =
           "the Telnyx account's public key (base64); set: the Telnyx webhook and stream endpoints are on",
       .doc = "the Telnyx account's Ed25519 public key, base64 as the portal shows it (Keys & Credentials → "
              "Public Key), which verifies the TeXML webhook's `telnyx-signature-ed25519`. Set: "
              "`POST /v1/telephony/telnyx` answers calls with a media stream to this service "
              "([telephony.md](telephony.md)); unset: both endpoints are off. Not a secret."},
      [](const std::string& key, const std::string& where) {
        if (!telnyx_public_key_from_base64(key))
          throw ConfigError(where + ": not a base64 Ed25519 public key (32 bytes)");
      }));
  t.push_back(duration_key<C>(
      "telephony.telnyx.max_call", &C::telnyx_max_call, 14400 * s, 60 * s, 86400 * s,
      {.help = "how long a Telnyx call may last (the TeXML's <Pause> beside its stream)",
       .doc = "how long a Telnyx call may last: the TeXML answer starts the stream beside a `<Pause>` of "
              "this length, which is what keeps the call up. 60s..86400s."}));
  t.push_back(string_key<C>(
      "telephony.public_url", &C::telephony_public_url, "",
      {.help = "the base URL phone providers reach this service at (https://voice.example.com)",
       .doc =
           "the scheme, host and optional port phone providers reach this service at, as configured on the "
           "phone number (`https://voice.example.com`): behind an Ingress the URL the pod sees differs "
           "from the one the provider signs. The stream URL is built from it too (`wss://` for `https://`). "
           "Unset: `http://` and the request's Host header."},
      [](const std::string& url, const std::string& where) {
        const bool scheme = url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
        if (!scheme || url.find_first_of("?# \r\n") != std::string::npos || url.back() == '/')
          throw ConfigError(
              where + ": '" + url +
              "' must be http:// or https:// and a host, without a path ending in '/', query or fragment");
      }));
  t.push_back(string_key<C>(
      "dtls.certificate", &C::dtls_certificate, "",
      {.help = "PEM certificate (ECDSA P-256); default: generated at start",
       .doc = "PEM certificate file (ECDSA P-256). Unset: a self-signed one is generated at each start (the "
              "fingerprint is logged). Set together with `dtls.private_key`."}));
  t.push_back(string_key<C>("dtls.private_key", &C::dtls_private_key, "",
                            {.help = "PEM private key for dtls.certificate",
                             .doc = "PEM private key file for `dtls.certificate`."}));
  {
    auto rate =
        uint_key<C>("audio.sample_rate", &C::sample_rate, 16000, 8000, 48000,
                    {.help = "PCM rate to and from the backend: 16000 | 24000 | 48000 (24000 for the "
                             "realtime dialect)",
                     .doc = "PCM rate of the call, to and from the backend: `16000`, `24000` or `48000`. "
                            "Opus decodes and encodes natively at it. Unset with `backend.dialect: "
                            "realtime`: `24000`, the Realtime protocol's own rate, so nothing is "
                            "resampled and the caller's 8-12 kHz band reaches the backend."});
    rate.read = [read = rate.read](const ConfigLayers& c, C& cfg) {
      read(c, cfg);
      if (cfg.sample_rate != 16000 && cfg.sample_rate != 24000 && cfg.sample_rate != 48000)
        throw ConfigError(c.where("audio.sample_rate") + ": must be 16000, 24000 or 48000");
    };
    t.push_back(std::move(rate));
  }
  t.push_back(uint_key<C>("audio.opus_complexity", &C::opus_complexity, 5, 0, 10,
                          {.help = "Opus encoder complexity", .doc = "Opus encoder complexity, 0..10."}));
  t.push_back(uint_key<C>(
      "audio.opus_bitrate", &C::opus_bitrate, 32000, 6000, 510000,
      {.help = "Opus encoder bitrate in bit/s", .doc = "Opus encoder bitrate, bit/s, 6000..510000."}));
  t.push_back(duration_key<C>(
      "audio.jitter_delay", &C::jitter_delay, 40 * ms, 0, 500 * ms,
      {.help = "jitter buffer target delay", .doc = "jitter buffer target delay, 0..500ms."}));
  t.push_back(bool_key<C>("audio.opus_passthrough", &C::opus_passthrough, false,
                          {.help = "send and take Opus packets to/from the backend",
                           .doc = "exchange Opus packets with the backend instead of PCM (no transcoding; "
                                  "[backend-protocol.md](backend-protocol.md))."}));
  t.push_back(string_key<C>(
      "backend.url", &C::backend_url, "",
      {.help = "backend WebSocket URL (ws:// or wss://host:port/path); empty = embedded echo",
       .doc = "backend WebSocket URL, `ws://` or `wss://` (TLS, verified against the system CA store or "
              "`backend.ca_file`). Unset: the embedded echo backend."},
      [](const std::string& url, const std::string& where) {
        if (url.rfind("ws://", 0) != 0 && url.rfind("wss://", 0) != 0)
          throw ConfigError(where + ": '" + url + "' must start with ws:// or wss://");
      }));
  {
    auto dialect = enum_key<C>(
        "backend.dialect", &C::backend_dialect, "rtcedge", {"rtcedge", "realtime"},
        {.help = "protocol spoken to the backend",
         .doc = "what the transceiver speaks to the backend: `rtcedge` (binary PCM frames at "
                "`audio.sample_rate`) or `realtime` (the Realtime WebSocket protocol, base64 PCM16 24 kHz; "
                "[backend-protocol.md](backend-protocol.md#dialects)). `realtime` excludes "
                "`audio.opus_passthrough`."});
    dialect.read = [read = dialect.read](const ConfigLayers& c, C& cfg) {
      read(c, cfg);
      // The call runs at its backend's rate unless the operator chose one: a Realtime
      // backend hears and speaks 24 kHz, and resampling to 16 kHz would cut it at 8 kHz.
      if (cfg.backend_dialect == "realtime" && !c.has("audio.sample_rate")) cfg.sample_rate = 24000;
      if (cfg.backend_dialect == "realtime" && cfg.opus_passthrough)
        throw ConfigError(c.where("backend.dialect") +
                          ": realtime carries PCM16 in JSON; it cannot be used with audio.opus_passthrough");
    };
    t.push_back(std::move(dialect));
  }
  t.push_back(string_key<C>(
      "backend.ca_file", &C::backend_ca_file, "",
      {.help = "PEM CA bundle that wss:// backends are verified against; default: the system store",
       .doc = "PEM file of the CA certificates a `wss://` backend's certificate must chain to, instead of "
              "the system store. Unset: the system store."},
      [](const std::string& path, const std::string& where) {
        if (access(path.c_str(), R_OK) != 0) throw ConfigError(where + ": cannot read '" + path + "'");
      }));
  t.push_back(enum_key<C>("backend.echo_mode", &C::echo_mode, "loopback", {"loopback", "parrot"},
                          {.help = "embedded echo", .doc = "embedded echo: `loopback` or `parrot`."}));
  t.push_back(duration_key<C>("backend.echo_delay", &C::echo_delay, 500 * ms, 0, 10 * s,
                              {.help = "loopback echo delay", .doc = "loopback echo delay, 0..10s."}));
  t.push_back(duration_key<C>("backend.connect_timeout", &C::backend_connect_timeout, 3 * s, 100 * ms, 60 * s,
                              {.help = "backend connect and handshake timeout",
                               .doc = "backend resolve + connect + upgrade, 100ms..60s; on expiry the "
                                      "session ends (`backend_failed`)."}));
  {
    auto headers = string_list_key<C>(
        "backend.headers", &C::backend_headers, {},
        {.help = "extra handshake headers, 'Name: value'",
         .doc = "extra upgrade headers, each `Name: value` (no CR/LF)."},
        [](const std::string& h, const std::string& where) {
          if (h.find(':') == std::string::npos || h.find_first_of("\r\n") != std::string::npos)
            throw ConfigError(where + ": '" + h + "' is not 'Name: value'");
        });
    // Header values are often credentials (Authorization); the names are not.
    headers.show_redacted = [](const C& cfg) {
      std::vector<std::string> items;
      for (const auto& h : cfg.backend_headers)
        items.push_back(h.substr(0, h.find(':')) + ": " + std::string(kRedacted));
      return yaml_string_list(items);
    };
    t.push_back(std::move(headers));
  }
  {
    auto url = redis_url_key<C>(
        "registry.redis_url", &C::registry_redis_url,
        {.help = "Redis URL of the shared registry (redis[s]://, redis[s]+sentinel://, redis[s]+cluster://); "
                 "empty = none",
         .doc = "a Redis URL: one server, a Sentinel group or a Redis Cluster, with or without TLS "
                "([redis.md](redis.md#deployments)); the transceiver takes its endpoint ids from "
                "the registry and registers one record per worker ([redis.md](redis.md)). With a wildcard "
                "`media.listen`, `media.advertise_address` is required. Redis down at start: ids from "
                "`hint.endpoint_base_id`, registered when Redis returns."});
    url.read = [read = url.read](const ConfigLayers& c, C& cfg) {
      read(c, cfg);
      if (!cfg.registry_redis_url.empty() && cfg.media_listen.is_unspecified() &&
          !c.has("media.advertise_address"))
        throw ConfigError(c.where("media.advertise_address") +
                          ": required with registry.redis_url when media.listen is a wildcard (relays need a "
                          "concrete address)");
    };
    t.push_back(std::move(url));
  }
  {
    auto identity =
        string_key<C>("registry.pod_identity", &C::pod_identity, "",
                      {.help = "this pod's stable name; the same name gets the same endpoint ids back "
                               "(default: hostname)",
                       .doc = "1..253 characters; the same identity gets the same endpoint ids back after a "
                              "restart (use the StatefulSet pod name).",
                       .default_text = "hostname"});
    identity.read = [](const ConfigLayers& c, C& cfg) {
      cfg.pod_identity = c.get_string("registry.pod_identity", hostname());
      if (cfg.pod_identity.empty() || cfg.pod_identity.size() > 253)
        throw ConfigError(c.where("registry.pod_identity") + ": must be 1..253 characters");
    };
    t.push_back(std::move(identity));
  }
  t.push_back(duration_key<C>("registry.ttl", &C::registry_ttl, 3 * s, 300 * ms, 300 * s,
                              {.help = "an endpoint not heartbeated for this long leaves the registry",
                               .doc = "300ms..300s; heartbeats every third of it, a record not refreshed for "
                                      "this long leaves the registry."}));
  for (auto& k : logging_keys<C>(&C::log_format, &C::log_level)) t.push_back(std::move(k));
  return t;
}

}  // namespace

const ConfigTable<TransceiverConfig>& transceiver_config_keys() {
  static const ConfigTable<TransceiverConfig> table = build();
  return table;
}

}  // namespace rtce
