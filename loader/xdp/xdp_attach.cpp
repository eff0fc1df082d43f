// xdp_attach.cpp — see xdp_attach.h.
#include "xdp_attach.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <spdlog/spdlog.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>

#include "rtce_xdp.skel.h"
#include "unique_fd.h"

namespace rtce {
namespace {

constexpr unsigned long kBpfFsMagic = 0xcafe4a11;

int libbpf_to_spdlog(enum libbpf_print_level level, const char* format, va_list args) {
  char line[1024];
  int n = std::vsnprintf(line, sizeof line, format, args);
  std::string text(line);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (level == LIBBPF_WARN)
    spdlog::warn("libbpf: {}", text);
  else
    spdlog::debug("libbpf: {}", text);
  return n;
}

// The maps whose contents must outlive a loader: state, configuration and counters.
// Scratch and per-CPU work maps are private to each program instance.
std::vector<bpf_map*> pinned_maps(rtce_xdp* skel) {
  return {skel->maps.vips,
          skel->maps.vip_ports,
          skel->maps.endpoints,
          skel->maps.flows,
          skel->maps.config,
          skel->maps.hint_keys,
          skel->maps.hint_failures,
          skel->maps.counters,
          skel->maps.events,
          skel->maps.flow_limit_config,
          skel->maps.hint_flow_limits,
          skel->maps.prefix_flow_limits,
          skel->maps.peer_clusters,
          skel->maps.peer_listen,
          skel->maps.peer_trusted,
          skel->maps.owner_via,
          skel->maps.role_counters};
}

// Pinned maps that hold only counters: when this build's layout differs from the pin's
// (a reason was added, so `counters` has more slots), the pin is replaced rather than the
// load refused. The old program keeps its own map until the link update swaps it out;
// the counters restart from zero, which Prometheus reads as a counter reset.
void replace_counter_pins_of_old_layout(rtce_xdp* skel, const std::filesystem::path& maps_dir) {
  for (bpf_map* map : {skel->maps.counters, skel->maps.hint_failures, skel->maps.role_counters}) {
    const std::string path = (maps_dir / bpf_map__name(map)).string();
    const UniqueFd fd(bpf_obj_get(path.c_str()));
    if (!fd) continue;
    bpf_map_info info{};
    uint32_t info_len = sizeof info;
    const bool same =
        bpf_obj_get_info_by_fd(fd.get(), &info, &info_len) == 0 &&
        info.max_entries == bpf_map__max_entries(map) && info.value_size == bpf_map__value_size(map) &&
        info.key_size == bpf_map__key_size(map) && info.type == static_cast<uint32_t>(bpf_map__type(map));
    if (same) continue;
    spdlog::warn("xdp: pinned map {} has an older layout; replacing it (its counters restart from zero)",
                 path);
    if (unlink(path.c_str()) != 0)
      throw XdpError("replacing the pinned map " + path + ": " + xdp_errno_text(errno));
  }
}

void ensure_bpffs_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw XdpError("cannot create pin directory " + dir.string() + ": " + ec.message());
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0 || static_cast<unsigned long>(fs.f_type) != kBpfFsMagic)
    throw XdpError(dir.string() + " is not on a bpf filesystem; mount one (mount -t bpf bpf /sys/fs/bpf)");
}

}  // namespace

void XdpSkeletonDeleter::operator()(rtce_xdp* skel) const { rtce_xdp__destroy(skel); }

XdpAttach::XdpAttach(const RelayConfig& config)
    : root_(config.xdp_pin_path), allow_generic_(config.xdp_allow_generic) {
  libbpf_set_print(libbpf_to_spdlog);
  if (geteuid() != 0) throw XdpError("XDP needs root (CAP_BPF and CAP_NET_ADMIN)");
  if (config.xdp_interfaces.empty())
    throw XdpError("config key 'xdp.interfaces' is empty: name the NICs to attach to");
  for (const auto& name : config.xdp_interfaces) {
    unsigned index = if_nametoindex(name.c_str());
    if (index == 0) throw XdpError("xdp.interfaces: no interface named '" + name + "'");
    interfaces_.emplace_back(name, index);
  }
  std::error_code exists_ec;
  fresh_pins_ = !std::filesystem::exists(root_, exists_ec);
  // Once this constructor returns, the destructor undoes what the attempt made: with
  // fresh pins, these directories too.
  ensure_bpffs_dir(root_ / "maps");
  ensure_bpffs_dir(root_ / "links");
}

XdpAttach::~XdpAttach() {
  if (committed_) return;
  // Undo what this attempt attached: a link pinned here would keep the program on that
  // interface after we give up (and --mode auto would then run "userspace" with XDP
  // still steering packets). Pins we did not create (a previous loader's) stay.
  std::error_code ec;
  for (const auto& link : created_links_) std::filesystem::remove(link, ec);
  if (fresh_pins_) {
    skel_.reset();
    std::filesystem::remove_all(root_, ec);
  }
}

rtce_xdp* XdpAttach::load() {
  skel_.reset(rtce_xdp__open());
  if (!skel_) throw XdpError("opening the XDP object failed: " + xdp_errno_text(errno));
  for (bpf_map* map : pinned_maps(skel_.get())) {
    const std::string path = (root_ / "maps" / bpf_map__name(map)).string();
    if (int err = bpf_map__set_pin_path(map, path.c_str()); err)
      throw XdpError("pin path " + path + ": " + xdp_errno_text(err));
  }
  replace_counter_pins_of_old_layout(skel_.get(), root_ / "maps");
  // libbpf reuses a compatible pinned map (same type, sizes and flags) and pins new ones.
  if (int err = rtce_xdp__load(skel_.get()); err)
    throw XdpError("loading the XDP program failed (" + xdp_errno_text(err) +
                   "); the libbpf log above says why. If a pinned map has an old layout, run "
                   "'rtcedge-relay detach' first");
  return skel_.get();
}

std::vector<std::string> XdpAttach::attach_all() {
  const int prog_fd = bpf_program__fd(skel_->progs.rtce_xdp);
  std::vector<std::string> modes;
  for (const auto& [name, index] : interfaces_)
    modes.push_back(name + "=" + attach_one(prog_fd, name, index));
  return modes;
}

std::string XdpAttach::attach_one(int prog_fd, const std::string& name, unsigned index) {
  const std::string link_path = (root_ / "links" / name).string();
  if (const UniqueFd pinned(bpf_obj_get(link_path.c_str())); pinned) {
    // Atomic replace: the interface never runs without a program.
    const int err = bpf_link_update(pinned.get(), prog_fd, nullptr);
    if (err == 0) {
      spdlog::info("xdp: replaced the program on {} through the pinned link {}", name, link_path);
      return "replaced";
    }
    spdlog::warn("xdp: pinned link {} is stale ({}); attaching afresh", link_path, xdp_errno_text(err));
    unlink(link_path.c_str());
  }
  LIBBPF_OPTS(bpf_link_create_opts, opts);
  opts.flags = XDP_FLAGS_DRV_MODE;
  UniqueFd link(bpf_link_create(prog_fd, static_cast<int>(index), BPF_XDP, &opts));
  const int native_err = link ? 0 : errno;
  std::string mode = "native";
  if (!link) {
    if (!allow_generic_)
      throw XdpError("native XDP attach on " + name + " failed: " + xdp_errno_text(native_err) +
                     (native_err == EBUSY ? " (another XDP program is attached: 'ip link set dev " + name +
                                                " xdp off' or 'rtcedge-relay detach')"
                                          : "") +
                     "; set xdp.allow_generic to accept generic (skb) mode");
    opts.flags = XDP_FLAGS_SKB_MODE;
    link.reset(bpf_link_create(prog_fd, static_cast<int>(index), BPF_XDP, &opts));
    if (!link) {
      const int generic_err = errno;
      throw XdpError("XDP attach on " + name + " failed in native (" + xdp_errno_text(native_err) +
                     ") and generic (" + xdp_errno_text(generic_err) + ") mode");
    }
    mode = "generic";
    spdlog::warn(
        "xdp: {} does not take native XDP ({}); running in generic mode, which is slower than the "
        "userspace relay on some drivers",
        name, xdp_errno_text(native_err));
  }
  if (bpf_obj_pin(link.get(), link_path.c_str()) != 0) {
    const int err = errno;
    throw XdpError("pinning the XDP link at " + link_path + " failed: " + xdp_errno_text(err));
  }
  // Closing `link` is fine: the pin holds it, so the program stays attached without us.
  created_links_.push_back(link_path);
  spdlog::info("xdp: attached to {} in {} mode, link pinned at {}", name, mode, link_path);
  return mode;
}

XdpSkeleton XdpAttach::commit() {
  committed_ = true;
  return std::move(skel_);
}

void XdpAttach::detach(const std::string& pin_path, const std::vector<std::string>& interfaces) {
  namespace fs = std::filesystem;
  const fs::path root(pin_path);
  std::error_code ec;
  if (!fs::exists(root, ec)) throw XdpError("nothing pinned at " + pin_path);
  // Unpinning the last reference to a link detaches its program.
  if (interfaces.empty()) {
    for (const auto& entry : fs::directory_iterator(root / "links", ec)) fs::remove(entry.path(), ec);
  } else {
    for (const auto& name : interfaces) fs::remove(root / "links" / name, ec);
  }
  bool links_left = fs::exists(root / "links", ec) && !fs::is_empty(root / "links", ec);
  if (links_left) {
    spdlog::info("detach: other interfaces still attached; maps kept under {}", pin_path);
    return;
  }
  fs::remove_all(root, ec);
  if (ec) throw XdpError("removing " + pin_path + ": " + ec.message());
}

}  // namespace rtce
