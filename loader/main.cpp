// main.cpp — rtcedge-relay: the relay process (`--mode=userspace|xdp|auto`) and its
// operator tools (`hint ...`, `detach`, `--check-config`). Signals: SIGHUP reloads the
// configuration, SIGTERM/SIGINT stop cleanly.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "error.h"
#include "hint_tool.h"
#include "logging.h"
#include "process_signals.h"
#include "relay_config.h"
#include "relay_service.h"
#include "xdp_data_path.h"

extern char** environ;

namespace {

constexpr int kExitUsage = 2;

// The configuration as the command line, file and environment say now (SIGHUP re-reads).
rtce::RelayConfig resolve(rtce::ConfigLayers& layers, const rtce::ConfigCommands& commands) {
  commands.load(layers, environ);
  return rtce::resolve_relay_config(layers);
}

void log_key_file_warnings(const std::vector<std::string>& warnings) {
  for (const auto& warning : warnings) spdlog::warn("{}", warning);
}

// Reads the key file as a start does: its warnings, or nullopt after the error on stderr.
std::optional<std::vector<std::string>> read_hint_key_file(const rtce::RelayConfig& config) {
  std::vector<std::string> warnings;
  try {
    rtce::HintKeys::load_file(config.hint_key_file, &warnings);
  } catch (const rtce::ConfigError& e) {
    std::cerr << "rtcedge-relay: configuration error: " << e.what() << "\n";
    return std::nullopt;
  }
  return warnings;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rtcedge-relay: steers WebRTC flows to the transceiver named in the ICE ufrag"};
  app.set_help_all_flag("--help-all", "show help for every subcommand");
  rtce::ConfigLayers layers("RTCEDGE_RELAY_");
  rtce::declare_relay_config(layers);
  rtce::ConfigCommands commands;
  commands.add_flags(app, layers);
  rtce::HintTool hint_tool(app);
  auto* detach = app.add_subcommand("detach", "remove the XDP program: unpin its links and maps");
  std::string detach_pin_path = "/sys/fs/bpf/rtcedge";
  std::vector<std::string> detach_interfaces;
  detach->add_option("--pin-path", detach_pin_path, "bpffs directory the relay pinned under");
  detach->add_option("--interface", detach_interfaces, "only these interfaces (default: all)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "rtcedge-relay: " << e.what() << "\nRun with --help for usage.\n";
    return kExitUsage;
  }
  if (commands.print_reference) {
    std::cout << rtce::relay_config_reference();
    return 0;
  }
  if (int code = hint_tool.run_selected(); code >= 0) return code;
  if (detach->parsed()) {
    try {
      rtce::XdpDataPath::detach(detach_pin_path, detach_interfaces);
      std::cerr << "rtcedge-relay detach: done\n";
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "rtcedge-relay detach: " << e.what() << "\n";
      return 1;
    }
  }

  rtce::RelayConfig config;
  try {
    config = resolve(layers, commands);
    if (!commands.check) rtce::configure_http_servers(layers);  // http.max_connections, RLIMIT_NOFILE
  } catch (const rtce::ConfigError& e) {
    std::cerr << "rtcedge-relay: configuration error: " << e.what() << "\n";
    return kExitUsage;
  }
  if (commands.check) {
    // The key file as a start reads it; its warnings go to stderr, stdout stays YAML.
    const auto warnings = read_hint_key_file(config);
    if (!warnings) return kExitUsage;
    for (const auto& warning : *warnings) std::cerr << "rtcedge-relay: warning: " << warning << "\n";
    std::cout << rtce::relay_config_yaml(config);
    return 0;
  }
  rtce::setup_logging(config.log_format, config.log_level);
  // The key file is read here, with SIGTERM still acting, so that a bad one is a
  // configuration error (exit 2) like every other bad setting, and its mode is checked.
  if (const auto warnings = read_hint_key_file(config)) {
    log_key_file_warnings(*warnings);
  } else {
    return kExitUsage;
  }

  // Before any thread starts, so that only sigwait below sees them.
  const sigset_t signals = rtce::block_control_signals();

  std::unique_ptr<rtce::RelayService> service;
  try {
    service = std::make_unique<rtce::RelayService>(config);
  } catch (const rtce::ConfigError& e) {
    std::cerr << "rtcedge-relay: configuration error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    spdlog::error("cannot start: {}", e.what());
    return 1;
  }

  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      try {
        rtce::RelayConfig next = resolve(layers, commands);
        std::vector<std::string> key_file_warnings;
        rtce::HintKeys::load_file(next.hint_key_file, &key_file_warnings);  // throws before anything changes
        log_key_file_warnings(key_file_warnings);
        for (const auto& warning : service->reconfigure(next)) spdlog::warn("reload: {}", warning);
        service->count_reload(true);
        spdlog::info("reload: routing updated ({} endpoints, cluster {}); flows kept",
                     service->endpoint_count(), next.cluster_id);
      } catch (const std::exception& e) {
        service->count_reload(false);
        spdlog::error("reload failed, keeping the running configuration: {}", e.what());
      }
      continue;
    }
    spdlog::info("signal {}: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    service->stop();
    spdlog::info("stopped");
    return 0;
  }
}
