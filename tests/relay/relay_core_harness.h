// relay_core_harness.h — what the RelayCore tests share: small flow-table options on the
// test's clock, and a datagram buffer with the framing headroom RelayCore writes PROXY v2
// into, loaded with a payload or a Binding request (USERNAME "<ufrag>:cl").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "flow_table.h"
#include "relay_core.h"
#include "stun_payloads.h"

namespace rtce::testing {

inline FlowTable::Options small_flow_options(size_t capacity) {
  constexpr Nanos kSec = 1'000'000'000;
  FlowTable::Options o;
  o.capacity = capacity;
  o.idle_timeout = 30 * kSec;
  o.evict_idle_after = 5 * kSec;
  o.eviction_sample = 4;
  return o;
}

class FramedBuffer {
 public:
  uint8_t* load(const std::vector<uint8_t>& bytes) {
    std::memcpy(buffer_ + kFramingHeadroom, bytes.data(), bytes.size());
    len_ = bytes.size();
    return buffer_ + kFramingHeadroom;
  }
  uint8_t* binding_request(const std::string& ufrag) {
    return load(xdp_packets::stun(0x0001, {{0x0006, ufrag + ":cl"}}));
  }

 protected:
  alignas(8) uint8_t buffer_[2048] = {};
  size_t len_ = 0;
};

}  // namespace rtce::testing
