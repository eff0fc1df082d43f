// xdp_attach.h — the attach step of the XDP data path, in Cilium's shape: load the object
// with its maps pinned (reusing a previous loader's), then per interface replace the
// program through the pinned link, or else create a link and pin it; then commit. An
// attempt that fails before commit undoes what it pinned, so a half-attached interface
// never outlives a failed start. Also `detach`, which undoes it all on purpose.
//
// Pins (under xdp.pin_path, default /sys/fs/bpf/rtcedge):
//   maps/<name>     flows, endpoints, vips, config, hint_keys, counters, hint_failures, events
//   links/<ifname>  the XDP link of each interface
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "relay_config.h"
#include "xdp_error.h"

struct rtce_xdp;

namespace rtce {

struct XdpSkeletonDeleter {
  void operator()(rtce_xdp* skel) const;
};
using XdpSkeleton = std::unique_ptr<rtce_xdp, XdpSkeletonDeleter>;

class XdpAttach {
 public:
  // Checks what can be checked before loading (root, xdp.interfaces name existing NICs,
  // the pin directories are on a bpf filesystem); throws XdpError saying which failed.
  explicit XdpAttach(const RelayConfig& config);
  // Without commit(): removes the links this attempt pinned, and the whole pin directory
  // if this attempt created it.
  ~XdpAttach();
  XdpAttach(const XdpAttach&) = delete;
  XdpAttach& operator=(const XdpAttach&) = delete;

  // Opens and loads the program; its maps are pinned under maps/ (libbpf reuses a
  // compatible pin, and counter pins of an older layout are replaced). The attempt owns
  // the skeleton until commit().
  rtce_xdp* load();
  // Attaches the loaded program to every interface; returns "<ifname>=<mode>" for each,
  // mode being replaced, native or generic.
  std::vector<std::string> attach_all();
  // The attempt succeeded: its pins stay, and the caller owns the skeleton.
  XdpSkeleton commit();

  // Removes the links of `interfaces` (all when empty) and, when no link is left, every
  // pin under pin_path (the `detach` command).
  static void detach(const std::string& pin_path, const std::vector<std::string>& interfaces);

 private:
  std::string attach_one(int prog_fd, const std::string& name, unsigned index);

  std::filesystem::path root_;
  bool allow_generic_;
  std::vector<std::pair<std::string, unsigned>> interfaces_;
  bool fresh_pins_ = false;
  XdpSkeleton skel_;
  std::vector<std::string> created_links_;  // link pins this attempt made (undone on failure)
  bool committed_ = false;
};

}  // namespace rtce
