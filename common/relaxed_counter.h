// relaxed_counter.h — a counter written by exactly one thread (a media worker) and read by
// others (the metrics scrape). A relaxed load+store is a plain add on x86: no lock prefix,
// no contention on the packet path, and no data race for the reader.
#pragma once

#include <atomic>
#include <cstdint>

namespace rtce {

class RelaxedCounter {
 public:
  void add(uint64_t n = 1) {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void set(uint64_t n) { value_.store(n, std::memory_order_relaxed); }
  uint64_t get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

}  // namespace rtce
