// main.cpp — rtcedge-transceiver: with no arguments, signaling on http://127.0.0.1:8080 in
// direct mode with the embedded echo backend. SIGTERM/SIGINT drain (see
// TransceiverService::drain), a second signal stops at once. `--check-config` validates and
// prints the configuration without starting.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "config_file.h"
#include "error.h"
#include "hint_keys.h"
#include "http_server.h"
#include "logging.h"
#include "process_signals.h"
#include "transceiver_config.h"
#include "transceiver_service.h"

extern char** environ;

int main(int argc, char** argv) {
  CLI::App app{"rtcedge-transceiver: terminates WebRTC audio sessions and bridges them to AI backends"};
  rtce::ConfigLayers layers("RTCEDGE_TRANSCEIVER_");
  rtce::declare_transceiver_config(layers);
  rtce::ConfigCommands commands;
  commands.add_flags(app, layers);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "rtcedge-transceiver: " << e.what() << "\nRun with --help for usage.\n";
    return 2;
  }
  if (commands.print_reference) {
    std::cout << rtce::transceiver_config_reference();
    return 0;
  }
  rtce::TransceiverConfig config;
  try {
    commands.load(layers, environ);
    config = rtce::resolve_transceiver_config(layers);
    if (!commands.check) rtce::configure_http_servers(layers);
  } catch (const rtce::ConfigError& e) {
    std::cerr << "rtcedge-transceiver: configuration error: " << e.what() << "\n";
    return 2;
  }
  if (!commands.check) rtce::setup_logging(config.log_format, config.log_level);
  // The secret and certificate files are checked here, with SIGTERM still acting: regular
  // files of bounded size (a FIFO or /dev/zero must not hang start-up), secrets private.
  std::vector<std::string> warnings;
  try {
    if (!config.hint_key_file.empty()) rtce::HintKeys::load_file(config.hint_key_file, &warnings);
    if (!config.dtls_certificate.empty())
      rtce::read_config_file(config.dtls_certificate, "DTLS certificate file", rtce::kMaxConfigFileBytes);
    // A secret: readable, and warned about when others may read it too.
    auto check_secret = [&](const std::string& path, const char* what, const char* mode_what) {
      if (path.empty()) return;
      const auto file = rtce::read_config_file(path, what, rtce::kMaxConfigFileBytes);
      if (auto warning = rtce::secret_file_mode_warning(path, mode_what, file.mode))
        warnings.push_back(*warning);
    };
    check_secret(config.dtls_private_key, "DTLS private key file", "DTLS private key file");
    // Read when the first wss:// session connects; a FIFO there would block that thread.
    if (!config.backend_ca_file.empty())
      rtce::read_config_file(config.backend_ca_file, "backend CA file", rtce::kMaxConfigFileBytes);
    check_secret(config.realtime_key_file, "realtime.key_file", "realtime key file");
  } catch (const rtce::ConfigError& e) {
    std::cerr << "rtcedge-transceiver: configuration error: " << e.what() << "\n";
    return 2;
  }
  if (commands.check) {
    // Warnings go to stderr so that stdout stays YAML.
    for (const auto& warning : warnings) std::cerr << "rtcedge-transceiver: warning: " << warning << "\n";
    std::cout << rtce::transceiver_config_yaml(config);
    return 0;
  }
  for (const auto& warning : warnings) spdlog::warn("{}", warning);

  // Signals are taken synchronously by this thread; workers never see them.
  const sigset_t signals = rtce::block_control_signals();

  std::unique_ptr<rtce::TransceiverService> service;
  try {
    service = std::make_unique<rtce::TransceiverService>(config);
    service->start();
  } catch (const rtce::ConfigError& e) {
    std::cerr << "rtcedge-transceiver: configuration error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    spdlog::error("cannot start: {}", e.what());
    return 1;
  }
  int sig = 0;
  // SIGHUP reloads the relay; the transceiver has nothing to reload live, and an operator's
  // habit must not kill every call.
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP)
    spdlog::warn("SIGHUP ignored: rtcedge-transceiver has no live reload; restart it (SIGTERM drains)");
  spdlog::info("signal {}: draining", sig);
  // A second signal during the drain stops at once.
  std::thread watcher([&signals] {
    int again = 0;
    sigwait(&signals, &again);
    spdlog::warn("second signal: stopping now");
    std::_Exit(1);
  });
  watcher.detach();
  service->drain();
  service->stop();
  spdlog::info("stopped");
  return 0;
}
