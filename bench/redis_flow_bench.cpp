// redis_flow_bench.cpp — the FlowStore against a private local redis-server: pipelined
// new-flow write rate as a ratio to `redis-benchmark -t set -P 16` on the same server in
// the same run, time to restore (SCAN + MGET) 100k flows into a relay-side table, and
// the Redis memory a flow costs. Prints Markdown; see docs/benchmarks-redis.md.
//
//   rtce_redis_flow_bench [--flows N] [--restore-flows N] [--runs R]
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "redis_flow_store.h"
#include "redis_server.h"

namespace {

using namespace std::chrono_literals;
using rtce::EndpointId;
using rtce::FlowEntry;
using rtce::FlowKey;
using SteadyClock = std::chrono::steady_clock;

FlowKey make_flow(int i) {
  const std::string client = "10." + std::to_string(i >> 16 & 255) + "." + std::to_string(i >> 8 & 255) +
                             "." + std::to_string(i & 255) + ":" + std::to_string(1024 + i % 60000);
  return FlowKey{*rtce::SocketAddress::parse(client), *rtce::SocketAddress::parse("203.0.113.1:3478")};
}

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// New flows as a relay writes them: put_many batches, at most `window` outstanding.
double write_rate(uint16_t port, uint8_t cluster, const std::vector<FlowEntry>& flows) {
  boost::asio::io_context io;
  rtce::RedisOptions options;
  options.port = port;
  options.command_timeout = 10'000ms;
  rtce::RedisFlowStore store(io, options, rtce::FlowStoreOptions{.cluster = cluster});
  while (!store.connected()) io.run_one_for(10ms);
  constexpr size_t kBatch = 1000;
  constexpr size_t kWindow = 10'000;
  const uint64_t replies_before = store.counters().replies.get();
  const auto start = SteadyClock::now();
  size_t sent = 0;
  while (store.counters().replies.get() - replies_before < flows.size()) {
    while (sent < flows.size() && store.pending() < kWindow) {
      const size_t n = std::min(kBatch, flows.size() - sent);
      store.put_many(std::span<const FlowEntry>(flows).subspan(sent, n), 600'000ms);
      sent += n;
    }
    io.run_one_for(100ms);
  }
  const double elapsed = seconds_since(start);
  if (store.counters().errors.get() + store.counters().dropped.get() + store.counters().timeouts.get() > 0) {
    std::fprintf(stderr, "write: errors/drops/timeouts during the run\n");
  }
  return static_cast<double>(flows.size()) / elapsed;
}

struct RestoreResult {
  double seconds = 0;
  size_t flows = 0;
  bool ok = false;
};

// A restarted relay reads every flow back into its table.
RestoreResult restore(uint16_t port, uint8_t cluster) {
  boost::asio::io_context io;
  rtce::RedisOptions options;
  options.port = port;
  options.command_timeout = 10'000ms;
  rtce::RedisFlowStore store(io, options, rtce::FlowStoreOptions{.cluster = cluster});
  while (!store.connected()) io.run_one_for(10ms);
  struct KeyHash {
    size_t operator()(const FlowKey& key) const {
      return std::hash<std::string_view>()(
                 std::string_view(reinterpret_cast<const char*>(key.client.sa()), key.client.len())) ^
             key.vip.port();
    }
  };
  std::unordered_map<FlowKey, EndpointId, KeyHash> table;
  RestoreResult result;
  bool finished = false;
  const auto start = SteadyClock::now();
  store.restore(
      [&](std::span<const FlowEntry> batch) {
        for (const auto& entry : batch) table[entry.key] = entry.endpoint_id;
      },
      [&](bool ok) {
        result.ok = ok;
        finished = true;
      });
  while (!finished) io.run_one_for(100ms);
  result.seconds = seconds_since(start);
  result.flows = table.size();
  return result;
}

// `extra` empty: the reference of the target (`-t set`, which overwrites one key without
// a TTL). Otherwise a custom command, for the same-shape comparison.
double redis_benchmark_set_rate(uint16_t port, int requests, const std::string& extra = {}) {
  const std::string command = "redis-benchmark -h 127.0.0.1 -p " + std::to_string(port) + " -P 16 -q -n " +
                              std::to_string(requests) + (extra.empty() ? " -t set" : " " + extra) +
                              " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return 0;
  char line[512];
  double rate = 0;
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    // Progress "SET: rps=..." segments (\r-separated), then "SET: 512820.53 requests per second".
    for (const char* set = std::strstr(line, ": "); set != nullptr; set = std::strstr(set + 2, ": ")) {
      if (set[2] >= '0' && set[2] <= '9' && std::strstr(set, "requests per second") != nullptr) {
        rate = std::strtod(set + 2, nullptr);
      }
    }
  }
  pclose(pipe);
  return rate;
}

long long used_memory(const rtce::test::RedisServer& server) {
  const std::string info = server.command({"INFO", "memory"});
  const auto at = info.find("used_memory:");
  return at == std::string::npos ? 0 : std::atoll(info.c_str() + at + 12);
}

}  // namespace

int main(int argc, char** argv) {
  int flows = 200'000;
  int restore_flows = 100'000;
  int runs = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--flows") == 0) flows = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--restore-flows") == 0) restore_flows = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
  }
  if (!rtce::test::RedisServer::available()) {
    std::fprintf(stderr, "%s is missing\n", rtce::test::kRedisServerPath);
    return 2;
  }
  rtce::test::RedisServer server;
  if (!server.start()) {
    std::fprintf(stderr, "redis-server did not start\n");
    return 2;
  }
  std::vector<FlowEntry> entries;
  entries.reserve(flows);
  for (int i = 0; i < flows; ++i) entries.push_back({make_flow(i), static_cast<EndpointId>(i % 4000 + 1)});

  // Same shape as ours: a new key per request, with PX (what a relay writes).
  const std::string same_shape =
      "-r 1000000 SET 'rtce:{c3}:flow:10.0.__rand_int__|203.0.113.1:3478' 1 PX 600000";
  std::printf(
      "| run | rtcedge put_many (flows/s) | redis-benchmark -t set -P 16 (req/s) | ratio | "
      "redis-benchmark -P 16, same SET shape (req/s) | ratio |\n");
  std::printf("|---|---|---|---|---|---|\n");
  double worst_ratio = 1e9;
  for (int run = 1; run <= runs; ++run) {
    // Alternate who goes first: the machine's other load drifts.
    double ours = 0;
    double theirs = 0;
    double theirs_same_shape = 0;
    for (int turn = 0; turn < 3; ++turn) {
      server.command({"FLUSHALL"});
      switch ((turn + run) % 3) {
        case 0: ours = write_rate(server.port(), 1, entries); break;
        case 1: theirs = redis_benchmark_set_rate(server.port(), 200'000); break;
        default: theirs_same_shape = redis_benchmark_set_rate(server.port(), 200'000, same_shape); break;
      }
    }
    const double ratio = theirs > 0 ? ours / theirs : 0;
    worst_ratio = std::min(worst_ratio, ratio);
    std::printf("| %d | %.0f | %.0f | %.2f | %.0f | %.2f |\n", run, ours, theirs, ratio, theirs_same_shape,
                theirs_same_shape > 0 ? ours / theirs_same_shape : 0);
  }

  server.command({"FLUSHALL"});
  const long long memory_before = used_memory(server);
  write_rate(server.port(), 2, std::vector<FlowEntry>(entries.begin(), entries.begin() + restore_flows));
  const long long memory_after = used_memory(server);
  const rtce::RedisSchema schema(2);
  const std::string sample_v4 = server.command({"MEMORY", "USAGE", schema.flow_key(entries[12345].key)});
  const FlowKey v6{*rtce::SocketAddress::parse("[2001:db8:aaaa:bbbb:cccc:dddd:eeee:1234]:54321"),
                   *rtce::SocketAddress::parse("[2001:db8::1]:3478")};
  server.command({"SET", schema.flow_key(v6), "4000", "PX", "600000"});
  const std::string sample_v6 = server.command({"MEMORY", "USAGE", schema.flow_key(v6)});

  std::printf("\n| run | flows restored | restore time (ms) | ok |\n|---|---|---|---|\n");
  double worst_restore = 0;
  for (int run = 1; run <= runs; ++run) {
    const RestoreResult result = restore(server.port(), 2);
    worst_restore = std::max(worst_restore, result.seconds);
    std::printf("| %d | %zu | %.0f | %s |\n", run, result.flows, result.seconds * 1000,
                result.ok ? "yes" : "NO");
  }
  std::printf(
      "\nMEMORY USAGE of one flow key: IPv4 %s bytes, IPv6 %s bytes; used_memory grew by %lld bytes for "
      "%d flows (%.0f bytes/flow, %.1f MiB per 100k flows)\n",
      sample_v4.c_str(), sample_v6.c_str(), memory_after - memory_before, restore_flows,
      static_cast<double>(memory_after - memory_before) / restore_flows,
      static_cast<double>(memory_after - memory_before) / restore_flows * 100'000 / (1 << 20));
  std::printf("\nworst write ratio %.2f (target >= 0.5), worst restore %.0f ms (target <= 1000)\n",
              worst_ratio, worst_restore * 1000);
  return worst_ratio >= 0.5 && worst_restore <= 1.0 ? 0 : 1;
}
