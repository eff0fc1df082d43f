// data_channel_bench.cpp — the cost of data channels per message and per association:
// CPU for a 1 KiB text message round trip between two DataChannelEndpoints in memory (both
// ends' usrsctp work, SACKs included; no DTLS), and heap bytes per association
// (mallinfo2 delta over 100 connected pairs with one open channel). docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <memory>
#include <string>
#include <vector>

#include "data_channel_test_link.h"

namespace {

using rtce::testing::Link;

// Steps the link without sleeping until `done`: the figures are CPU, not waiting.
template <typename F>
bool spin_until(Link& link, F done) {
  for (int i = 0; i < 100000 && !done(); ++i) link.step();
  return done();
}

void BM_TextRoundTrip1KiB(benchmark::State& state) {
  Link link;
  if (!link.connect()) {
    state.SkipWithError("no association");
    return;
  }
  auto s = link.open("oai-events");
  if (!s) {
    state.SkipWithError("no channel");
    return;
  }
  const std::string message(1024, 'x');
  for (auto _ : state) {
    const size_t a0 = link.a.messages.size();
    link.a.ep->send_text(*s, message);
    if (!spin_until(link, [&] { return !link.b.messages.empty(); })) state.SkipWithError("lost");
    link.b.ep->send_text(*s, message);
    link.b.messages.clear();
    if (!spin_until(link, [&] { return link.a.messages.size() > a0; })) state.SkipWithError("lost");
    link.a.messages.clear();
    link.a.captured.clear();
  }
  state.counters["packets_per_round_trip"] = benchmark::Counter(
      double(link.a.ep->stats().packets_out + link.b.ep->stats().packets_out) / double(state.iterations()));
}
BENCHMARK(BM_TextRoundTrip1KiB)->Unit(benchmark::kMicrosecond);

void BM_MemoryPerAssociation(benchmark::State& state) {
  constexpr int kPairs = 100;
  for (auto _ : state) {
    std::vector<std::unique_ptr<Link>> links;
    // One pair first so that usrsctp's one-time globals are not counted per association.
    auto warm = std::make_unique<Link>();
    warm->connect();
    warm->open("warm");
    const size_t before = mallinfo2().uordblks;
    for (int i = 0; i < kPairs; ++i) {
      auto link = std::make_unique<Link>();
      if (!link->connect() || !link->open("oai-events")) state.SkipWithError("no association");
      link->a.captured.clear();
      link->b.captured.clear();
      links.push_back(std::move(link));
    }
    const size_t after = mallinfo2().uordblks;
    state.counters["bytes_per_association"] = double(after - before) / (2.0 * kPairs);
  }
}
BENCHMARK(BM_MemoryPerAssociation)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
