// data_channel_threads_test.cpp — the threading design under load: associations on two
// threads at once, each thread pumping only its own (and so firing the shared timers), with
// every message arriving at its own association and nowhere else; and the shared timer
// clock advancing once per millisecond step however many threads tick; an idle pump taking
// no lock; the registry dropping callbacks for destroyed associations.
#include <gtest/gtest.h>
#include <usrsctp.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <thread>

#include "data_channel_test_link.h"
#include "sctp_stack.h"

namespace rtce {
namespace {

struct ThreadResult {
  bool connected = false;
  size_t received_a = 0, received_b = 0;
  size_t foreign = 0;  // messages tagged for another link
  uint64_t drops = 0;
};

void run_link(int tag, int count, ThreadResult& result) {
  testing::Link link;
  if (!link.connect()) return;
  auto s = link.open("oai-events");
  if (!s) return;
  result.connected = true;
  const std::string prefix = "link" + std::to_string(tag) + ":";
  for (int i = 0; i < count; ++i) {
    const std::string m = prefix + std::to_string(i);
    // A full send buffer is a refusal, not a queue: step the link and retry.
    while (!link.a.ep->send_text(*s, m)) link.step();
    while (!link.b.ep->send_text(*s, m)) link.step();
    link.step();
  }
  link.run_until(
      [&] { return link.a.messages.size() >= size_t(count) && link.b.messages.size() >= size_t(count); });
  for (const auto* side : {&link.a, &link.b}) {
    for (size_t i = 0; i < side->messages.size(); ++i) {
      if (side->messages[i].text() != prefix + std::to_string(i)) result.foreign++;
    }
    for (auto d : side->ep->stats().drops) result.drops += d;
  }
  result.received_a = link.a.messages.size();
  result.received_b = link.b.messages.size();
}

TEST(DataChannelThreads, TwoAssociationsOnTwoThreadsStayApart) {
  constexpr int kMessages = 300;
  ThreadResult r1, r2;
  std::thread t1(run_link, 1, kMessages, std::ref(r1));
  std::thread t2(run_link, 2, kMessages, std::ref(r2));
  t1.join();
  t2.join();
  for (const ThreadResult* r : {&r1, &r2}) {
    EXPECT_TRUE(r->connected);
    EXPECT_EQ(r->received_a, size_t(kMessages));
    EXPECT_EQ(r->received_b, size_t(kMessages));
    EXPECT_EQ(r->foreign, 0u) << "in order, and only this link's messages";
    EXPECT_EQ(r->drops, 0u);
  }
}

TEST(DataChannelThreads, OneTimerRunPerMillisecondStepWhateverTheThreadCount) {
  testing::Link link;  // an association exists, so tick() does run
  SctpStack& stack = SctpStack::instance();
  stack.tick(monotonic_now());  // sets the base if this is the first tick
  const Nanos step = monotonic_now() + 2'000'000;
  const uint64_t before = stack.timer_runs();
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < 1000; ++i) stack.tick(step);
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(stack.timer_runs(), before + 1);
}

TEST(DataChannelThreads, PumpingAnIdleAssociationTakesNoLock) {
  testing::Link link;
  ASSERT_TRUE(link.connect());
  ASSERT_TRUE(link.open("oai-events"));
  while (link.step()) {
  }
  link.a.ep->pump(monotonic_now());  // anything a timer queued meanwhile is out now
  SctpStack& stack = SctpStack::instance();
  const Nanos now = monotonic_now();
  stack.tick(now);  // a later tick at the same millisecond has nothing to advance
  std::unique_lock hold(stack.mutex());
  auto pumped = std::async(std::launch::async, [&] {
    for (int i = 0; i < 100; ++i) link.a.ep->pump(now);
  });
  EXPECT_EQ(pumped.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "pump() waited for the stack mutex with nothing queued";
  hold.unlock();
  pumped.wait();
}

// A usrsctp callback for an association already destroyed (a timer usrsctp still held) must
// find nothing in the registry: dropped, counted, its buffer freed (LeakSanitizer checks).
TEST(DataChannelThreads, CallbacksForADestroyedAssociationAreCountedOrphans) {
  struct NullSink final : SctpSink {
    void on_sctp_output(const uint8_t*, size_t) override { ADD_FAILURE() << "reached a removed sink"; }
    void on_sctp_receive(const uint8_t*, size_t, const sctp_rcvinfo&, int) override {
      ADD_FAILURE() << "reached a removed sink";
    }
    void on_sctp_socket_closed() override { ADD_FAILURE() << "reached a removed sink"; }
  } sink;
  SctpStack& stack = SctpStack::instance();
  std::unique_lock lock(stack.mutex());
  const uint64_t id = stack.add(&sink);
  EXPECT_EQ(stack.find(id), &sink);
  stack.remove(id);
  EXPECT_EQ(stack.find(id), nullptr);
  const uint64_t before = stack.orphan_callbacks();
  void* data = malloc(16);  // usrsctp hands over a malloc'd buffer
  sctp_rcvinfo info{};
  sctp_sockstore address{};
  EXPECT_EQ(rtce_sctp_receive(nullptr, address, data, 16, info, 0, sctp_handle(id)), 1);
  EXPECT_EQ(stack.orphan_callbacks(), before + 1);
}

}  // namespace
}  // namespace rtce
