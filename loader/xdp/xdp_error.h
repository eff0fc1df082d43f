// xdp_error.h — the one exception the XDP data path throws: its message says what failed
// and what the operator can do about it (not root, no such interface, verifier, pins).
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>

namespace rtce {

class XdpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// libbpf returns -errno, the bpf() wrappers set errno: either reads as its text.
inline std::string xdp_errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

}  // namespace rtce
