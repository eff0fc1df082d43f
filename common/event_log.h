// event_log.h — the last few events of one session (connected, path changes, restarts, the
// backend's events, the end), each stamped with its age, for GET of a session and the demo
// page. Time comes in as `now`: the log never reads a clock, so state machines that write
// to it stay testable with a manual one.
#pragma once

#include <cstddef>
#include <deque>
#include <nlohmann/json.hpp>

#include "clock.h"

namespace rtce {

class EventLog {
 public:
  explicit EventLog(Nanos origin, size_t capacity = 20) : origin_(origin), capacity_(capacity) {}

  void add(nlohmann::json event, Nanos now) {
    event["at_ms"] = (now - origin_) / 1'000'000;
    events_.push_back(std::move(event));
    if (events_.size() > capacity_) events_.pop_front();
  }
  nlohmann::json to_json() const {
    auto out = nlohmann::json::array();
    for (const auto& e : events_) out.push_back(e);
    return out;
  }
  const std::deque<nlohmann::json>& events() const { return events_; }
  Nanos origin() const { return origin_; }

 private:
  Nanos origin_;
  size_t capacity_;
  std::deque<nlohmann::json> events_;
};

}  // namespace rtce
