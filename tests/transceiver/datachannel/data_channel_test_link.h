// data_channel_test_link.h — two DataChannelEndpoints joined by in-memory queues: what one
// sends, the test loop hands to the other's handle_packet (never recursion), on the real
// monotonic clock (usrsctp's timers are process-wide, so one clock for every test). Each
// side records what its callbacks saw; run_until waits on a condition with a deadline.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "data_channel_endpoint.h"

namespace rtce::testing {

struct ReceivedMessage {
  uint16_t stream;
  std::vector<uint8_t> bytes;
  bool binary;
  std::string text() const { return std::string(bytes.begin(), bytes.end()); }
};

struct LinkSide {
  std::unique_ptr<DataChannelEndpoint> ep;
  std::deque<std::vector<uint8_t>> outbox;
  std::vector<std::vector<uint8_t>> captured;  // the first packets sent, for corpus/pre-check tests
  size_t largest_packet = 0;
  std::vector<std::tuple<uint16_t, std::string, std::string>> opened;
  std::vector<ReceivedMessage> messages;
  std::vector<uint16_t> closed;
  std::vector<std::string> failures;

  DataChannelEndpoint::Callbacks callbacks() {
    DataChannelEndpoint::Callbacks cb;
    cb.send = [this](std::span<const uint8_t> p) {
      largest_packet = std::max(largest_packet, p.size());
      if (captured.size() < 64) captured.emplace_back(p.begin(), p.end());
      outbox.emplace_back(p.begin(), p.end());
    };
    cb.on_open = [this](uint16_t s, std::string_view l, std::string_view pr) {
      opened.emplace_back(s, std::string(l), std::string(pr));
    };
    cb.on_message = [this](uint16_t s, std::span<const uint8_t> m, bool binary) {
      messages.push_back({s, std::vector<uint8_t>(m.begin(), m.end()), binary});
    };
    cb.on_closed = [this](uint16_t s) { closed.push_back(s); };
    cb.on_failed = [this](std::string_view r) { failures.emplace_back(r); };
    return cb;
  }
};

class Link {
 public:
  using Config = DataChannelEndpoint::Config;
  // Return false to drop a packet; from_a says which side sent it.
  std::function<bool(bool from_a, const std::vector<uint8_t>&)> filter;

  explicit Link(Config a_config = {}, Config b_config = {}) {
    a_config.dtls_client = true;
    b_config.dtls_client = false;
    a.ep = std::make_unique<DataChannelEndpoint>(a_config, a.callbacks());
    b.ep = std::make_unique<DataChannelEndpoint>(b_config, b.callbacks());
  }

  void start() {
    a.ep->start(monotonic_now());
    b.ep->start(monotonic_now());
  }

  // Delivers what is queued both ways and pumps both; true if a packet moved.
  bool step() {
    bool moved = deliver(a, b, true);
    moved |= deliver(b, a, false);
    a.ep->pump(monotonic_now());
    b.ep->pump(monotonic_now());
    return moved || !a.outbox.empty() || !b.outbox.empty();
  }

  bool run_until(const std::function<bool()>& done,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      // Idle: the condition waits on an SCTP timer (a delayed SACK, a retransmission).
      if (!step()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  }

  bool connect() {
    start();
    return run_until([&] {
      return a.ep->state() == DataChannelEndpoint::State::open &&
             b.ep->state() == DataChannelEndpoint::State::open;
    });
  }

  // Opens a channel from a (the DTLS client, as a browser is) and waits for both on_opens.
  std::optional<uint16_t> open(std::string_view label, std::string_view protocol = "") {
    const size_t a0 = a.opened.size(), b0 = b.opened.size();
    auto s = a.ep->open_channel(label, protocol);
    if (!s) return s;
    if (!run_until([&] { return a.opened.size() > a0 && b.opened.size() > b0; })) return std::nullopt;
    return s;
  }

  LinkSide a, b;

 private:
  bool deliver(LinkSide& from, LinkSide& to, bool from_a) {
    if (from.outbox.empty()) return false;
    std::deque<std::vector<uint8_t>> batch;
    batch.swap(from.outbox);
    for (auto& p : batch) {
      if (filter && !filter(from_a, p)) continue;
      to.ep->handle_packet(p, monotonic_now());
    }
    return true;
  }
};

}  // namespace rtce::testing
