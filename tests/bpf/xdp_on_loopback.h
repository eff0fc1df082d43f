// xdp_on_loopback.h — the fixture of the loader tests that attach the real program: root, a
// network namespace of the test's own (unshare), the program in generic mode on its
// loopback, pinned under a per-process directory that TearDown detaches and removes even
// when the test failed. Skips only without root or namespaces (a missing privilege or
// kernel feature); start() says why XDP could not attach.
#pragma once

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "relay_config.h"
#include "xdp_data_path.h"

namespace rtce::testing {

class XdpOnLoopback : public ::testing::Test {
 protected:
  explicit XdpOnLoopback(std::string pin_name) : pin_name_(std::move(pin_name)) {}

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_BPF/CAP_NET_ADMIN)";
    if (unshare(CLONE_NEWNET) != 0) GTEST_SKIP() << "unshare(CLONE_NEWNET): " << std::strerror(errno);
    config_.mode = "xdp";
    config_.xdp_interfaces = {"lo"};
    config_.xdp_allow_generic = true;
    config_.xdp_pin_path = "/sys/fs/bpf/rtce-" + pin_name_ + "-" + std::to_string(getpid());
  }
  void TearDown() override {
    xdp_.reset();
    std::error_code ec;
    if (std::filesystem::exists(config_.xdp_pin_path, ec))
      rtce::XdpDataPath::detach(config_.xdp_pin_path, {});
    std::filesystem::remove_all(config_.xdp_pin_path, ec);
  }
  // Starts the loader with config_; false (skip_reason_ says why) when XDP cannot run here.
  bool start() {
    try {
      xdp_ = std::make_unique<rtce::XdpDataPath>(config_);
    } catch (const rtce::XdpError& e) {
      skip_reason_ = e.what();
      return false;
    }
    return true;
  }

  rtce::RelayConfig config_;
  std::unique_ptr<rtce::XdpDataPath> xdp_;
  std::string skip_reason_;

 private:
  std::string pin_name_;
};

}  // namespace rtce::testing
