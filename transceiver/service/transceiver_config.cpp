// transceiver_config.cpp — see transceiver_config.h.
#include "transceiver_config.h"

#include "error.h"
#include "realtime_signaling.h"

namespace rtce {

void declare_transceiver_config(ConfigLayers& c) { declare_keys(c, transceiver_config_keys()); }

namespace {

bool is_loopback(const SocketAddress& a) {
  const auto plain = a.unmapped();
  if (plain.is_v4()) return plain.ip_string().rfind("127.", 0) == 0;
  return plain.ip_string() == "::1";
}

}  // namespace

TransceiverConfig resolve_transceiver_config(const ConfigLayers& c) {
  TransceiverConfig cfg;
  read_keys(c, transceiver_config_keys(), cfg);
  // The checks that involve more than one key.
  if (cfg.api_keys.empty() && !is_loopback(cfg.http_listen) && !cfg.allow_public_without_keys)
    throw ConfigError(c.where("http.listen") + ": " + cfg.http_listen.to_string() +
                      " is reachable from other hosts and no http.api_keys are set; add keys or set "
                      "http.allow_public_without_keys=true");
  if (cfg.dtls_certificate.empty() != cfg.dtls_private_key.empty())
    throw ConfigError(c.where(cfg.dtls_certificate.empty() ? "dtls.certificate" : "dtls.private_key") +
                      ": dtls.certificate and dtls.private_key go together");
  if (!cfg.relay_ingress_regions.empty() && !cfg.relay_mode())
    throw ConfigError(
        c.where("relay.ingress_regions") +
        ": needs relay.vips (ingress relays forward to this cluster's relays, which must exist)");
  // The secrets are read and checked now, so --check-config finds a bad file or a short secret.
  if (auto secrets = realtime_key_secrets(cfg); !secrets.empty()) {
    try {
      EphemeralKeyring check(std::move(secrets));
    } catch (const ConfigError& e) {
      throw ConfigError(
          c.where(cfg.realtime_key_secrets.empty() ? "realtime.key_file" : "realtime.key_secrets") + ": " +
          e.what());
    }
  }
  return cfg;
}

std::string transceiver_config_yaml(const TransceiverConfig& config) {
  return config_yaml(transceiver_config_keys(), config);
}

std::string transceiver_config_reference() {
  ConfigLayers layers("RTCEDGE_TRANSCEIVER_");
  return config_reference(transceiver_config_keys(), layers, false);
}

}  // namespace rtce
