// redis_flow_bench.cpp — the FlowStore against a private local redis-server: pipelined
// new-flow write rate as a ratio to `redis-benchmark -t set -P 16` on the same server in
// the same run; time to restore (SCAN + MGET) 100k flows into the relay's own tables —
// the userspace rtce::FlowTable and a BPF LRU hash laid out as the XDP program's `flows`
// map; and the Redis memory a flow costs. Prints Markdown; see docs/benchmarks-redis.md.
//
//   rtce_redis_flow_bench [--flows N] [--restore-flows N] [--runs R]
#include <bpf/bpf.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "clock.h"
#include "flow_table.h"
#include "redis_flow_store.h"
#include "redis_server.h"
#include "relay_core.h"
#include "rtce_flow.h"
#include "rtce_xdp.h"

namespace {

using namespace std::chrono_literals;
using rtce::EndpointId;
using rtce::FlowEntry;
using rtce::make_flow_key;
using SteadyClock = std::chrono::steady_clock;

rtce_flow_key make_flow(int i) {
  const std::string client = "10." + std::to_string(i >> 16 & 255) + "." + std::to_string(i >> 8 & 255) +
                             "." + std::to_string(i & 255) + ":" + std::to_string(1024 + i % 60000);
  return make_flow_key(*rtce::SocketAddress::parse(client), *rtce::SocketAddress::parse("203.0.113.1:3478"));
}

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// A flow store on the bench's Redis, connected; throws when it does not connect in 10 s.
std::unique_ptr<rtce::RedisFlowStore> connected_store(boost::asio::io_context& io, uint16_t port,
                                                      uint8_t cluster) {
  rtce::RedisOptions options;
  options.port = port;
  options.command_timeout = 10'000ms;
  auto store =
      std::make_unique<rtce::RedisFlowStore>(io, options, rtce::FlowStoreOptions{.cluster = cluster});
  const auto deadline = SteadyClock::now() + 10s;
  while (!store->connected()) {
    if (SteadyClock::now() > deadline) throw std::runtime_error("redis flow store: no connection in 10 s");
    io.run_one_for(10ms);
  }
  return store;
}

// New flows as a relay writes them: put_many batches, at most `window` outstanding.
double write_rate(uint16_t port, uint8_t cluster, const std::vector<FlowEntry>& flows) {
  boost::asio::io_context io;
  auto store_ptr = connected_store(io, port, cluster);
  rtce::RedisFlowStore& store = *store_ptr;
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
  double seconds = 0;  // restore start to the last insert
  size_t flows = 0;    // entries the table / map holds afterwards
  bool ok = false;     // restore completed, every flow inserted, count and samples right
};

// The endpoints a relay knows, in the two forms it keeps them: id -> sockaddr_in6 (v4-mapped,
// as RoutingTable::endpoints) for the userspace table, and the `endpoints` map value the
// loader embeds in XDP flows.
struct Endpoints {
  std::unordered_map<uint16_t, sockaddr_in6> routing;
  std::unordered_map<uint16_t, rtce_xdp_endpoint> xdp;
};

Endpoints make_endpoints(uint16_t count) {
  Endpoints e;
  for (uint16_t id = 1; id <= count; ++id) {
    const auto addr =
        *rtce::SocketAddress::parse("198.18." + std::to_string(id >> 8) + "." + std::to_string(id & 255) +
                                    ":" + std::to_string(40000 + id % 16));
    e.routing[id] = addr.to_v6_mapped();
    rtce_xdp_endpoint ep{};
    ep.family = addr.to_bytes(ep.addr);
    ep.port_be = htons(addr.port());
    e.xdp[id] = ep;
  }
  return e;
}

// One restore pass from a fresh connection: `insert` takes each batch as it arrives; the
// clock stops after the last batch has been inserted.
template <typename InsertBatch>
RestoreResult timed_restore(uint16_t port, uint8_t cluster, InsertBatch&& insert) {
  boost::asio::io_context io;
  auto store_ptr = connected_store(io, port, cluster);
  rtce::RedisFlowStore& store = *store_ptr;
  RestoreResult result;
  bool finished = false;
  const auto start = SteadyClock::now();
  auto last_insert = start;
  store.restore(
      [&](std::span<const FlowEntry> batch) {
        insert(batch);
        last_insert = SteadyClock::now();
      },
      [&](bool ok) {
        result.ok = ok;
        finished = true;
      });
  while (!finished) io.run_one_for(100ms);
  result.seconds = std::chrono::duration<double>(last_insert - start).count();
  return result;
}

// A restarted userspace relay reads every flow back into its FlowTable.
RestoreResult restore_into_table(uint16_t port, uint8_t cluster, const Endpoints& endpoints, size_t expected,
                                 const std::vector<FlowEntry>& samples) {
  // Sized for the restore: the relay's default (65536 over all workers) would refuse flows.
  rtce::FlowTable table(rtce::FlowTable::Options{
      .capacity = static_cast<uint32_t>(std::max<size_t>(65536, expected + expected / 4))});
  const auto& routes = endpoints.routing;
  size_t refused = 0;
  RestoreResult result = timed_restore(port, cluster, [&](std::span<const FlowEntry> batch) {
    const rtce::Nanos now = rtce::monotonic_now();
    for (const auto& entry : batch) {
      const auto endpoint = routes.find(entry.record.id);
      if (endpoint == routes.end()) {
        ++refused;  // the relay drops flows of endpoints it does not know
        continue;
      }
      const rtce::FlowValue value{.endpoint = endpoint->second, .endpoint_id = entry.record.id};
      if (table.insert(entry.key, value, now).flow == nullptr) {
        ++refused;
      }
    }
  });
  result.flows = table.size();
  bool samples_ok = true;
  for (const auto& sample : samples) {
    const rtce::Flow* flow = table.find(sample.key);
    samples_ok = samples_ok && flow != nullptr && flow->value.endpoint_id == sample.record.id &&
                 std::memcmp(&flow->value.endpoint, &routes.at(sample.record.id), sizeof(sockaddr_in6)) == 0;
  }
  result.ok = result.ok && refused == 0 && result.flows == expected && samples_ok;
  return result;
}

class MapFd {
 public:
  explicit MapFd(int fd) : fd_(fd) {}
  ~MapFd() {
    if (fd_ >= 0) close(fd_);
  }
  MapFd(const MapFd&) = delete;
  MapFd& operator=(const MapFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

struct MapRestoreResult {
  RestoreResult restore;
  std::string method;  // how the map was filled
  enum class Status { done, skipped, failed } status = Status::done;
  std::string reason;  // why skipped or failed
};

// Entries in the map, by batch lookups (a get_next_key walk when the kernel refuses those).
size_t count_map_entries(int fd) {
  constexpr uint32_t kChunk = 4096;
  std::vector<rtce_flow_key> keys(kChunk);
  std::vector<rtce_xdp_flow> values(kChunk);
  size_t total = 0;
  uint32_t cursor = 0;
  bool have_cursor = false;
  for (;;) {
    uint32_t count = kChunk;
    uint32_t next = 0;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    const int rc = bpf_map_lookup_batch(fd, have_cursor ? &cursor : nullptr, &next, keys.data(),
                                        values.data(), &count, &opts);
    const int err = rc != 0 ? errno : 0;
    if (err != 0 && err != ENOENT) break;
    total += count;
    if (err == ENOENT) return total;
    cursor = next;
    have_cursor = true;
  }
  total = 0;
  rtce_flow_key key{};
  rtce_flow_key next{};
  for (const rtce_flow_key* prev = nullptr; bpf_map_get_next_key(fd, prev, &next) == 0; prev = &key) {
    key = next;
    ++total;
  }
  return total;
}

// A restarted XDP relay refills the program's `flows` map: same type, key, value and size.
// The map exists before the clock starts, as the pinned map of a running relay does.
MapRestoreResult restore_into_bpf_map(uint16_t port, uint8_t cluster, const Endpoints& endpoints,
                                      size_t expected, const std::vector<FlowEntry>& samples) {
  MapRestoreResult out;
  LIBBPF_OPTS(bpf_map_create_opts, create_opts);
  const MapFd map(bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "bench_flows", sizeof(rtce_flow_key),
                                 sizeof(rtce_xdp_flow), RTCE_XDP_MAX_FLOWS, &create_opts));
  if (map.get() < 0) {
    const int err = errno;
    out.status =
        err == EPERM || err == EACCES ? MapRestoreResult::Status::skipped : MapRestoreResult::Status::failed;
    out.reason = std::string("bpf_map_create(LRU_HASH): ") + std::strerror(err) +
                 (out.status == MapRestoreResult::Status::skipped ? " (needs root or CAP_BPF)" : "");
    return out;
  }
  const auto& xdp_endpoints = endpoints.xdp;
  std::vector<rtce_flow_key> keys;
  std::vector<rtce_xdp_flow> values;
  size_t refused = 0;
  size_t batched = 0;
  int batch_error = 0;  // errno of the update_batch call that was refused, if one was
  RestoreResult& result = out.restore;
  result = timed_restore(port, cluster, [&](std::span<const FlowEntry> batch) {
    keys.clear();
    values.clear();
    const rtce::Nanos now = rtce::monotonic_now();  // CLOCK_MONOTONIC, as bpf_ktime_get_ns
    for (const auto& entry : batch) {
      const auto endpoint = xdp_endpoints.find(entry.record.id);
      if (endpoint == xdp_endpoints.end()) {
        ++refused;
        continue;
      }
      keys.push_back(entry.key);
      rtce_xdp_flow value{};
      value.endpoint = endpoint->second;
      value.endpoint_id = entry.record.id;
      value.last_seen_ns = static_cast<uint64_t>(now);
      value.created_ns = static_cast<uint64_t>(now);
      values.push_back(value);
    }
    uint32_t done = 0;
    if (batch_error == 0 && !keys.empty()) {
      uint32_t count = static_cast<uint32_t>(keys.size());
      LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
      if (bpf_map_update_batch(map.get(), keys.data(), values.data(), &count, &opts) == 0) {
        done = static_cast<uint32_t>(keys.size());
        batched += done;
      } else {
        // From here on one element at a time, this whole batch included: a refused call
        // may leave `count` untouched, and writing an element twice is harmless.
        batch_error = errno;
      }
    }
    for (size_t i = done; i < keys.size(); ++i) {
      if (bpf_map_update_elem(map.get(), &keys[i], &values[i], BPF_ANY) != 0) ++refused;
    }
  });
  if (batch_error == 0) {
    out.method = "bpf_map_update_batch";
  } else {
    out.method = std::string("bpf_map_update_elem (update_batch refused: ") + std::strerror(batch_error) +
                 (batched > 0 ? ", after " + std::to_string(batched) + " batched" : "") + ")";
  }
  result.flows = count_map_entries(map.get());
  bool samples_ok = true;
  for (const auto& sample : samples) {
    const rtce_flow_key key = sample.key;
    rtce_xdp_flow value{};
    const rtce_xdp_endpoint& want = xdp_endpoints.at(sample.record.id);
    samples_ok = samples_ok && bpf_map_lookup_elem(map.get(), &key, &value) == 0 &&
                 value.endpoint_id == sample.record.id && value.created_ns != 0 &&
                 std::memcmp(&value.endpoint, &want, sizeof want) == 0;
  }
  result.ok = result.ok && refused == 0 && result.flows == expected && samples_ok;
  return out;
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
  if (flows < 1 || restore_flows < 1 || restore_flows > flows) {
    std::fprintf(stderr, "need 1 <= --restore-flows <= --flows\n");
    return 2;
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
      "-r 1000000 SET 'rtce:c3:flow:10.0.__rand_int__|203.0.113.1:3478' 1 PX 600000";
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
  const std::string sample_v4 =
      server.command({"MEMORY", "USAGE", schema.flow_key(entries[12345 % restore_flows].key)});
  const rtce_flow_key v6 =
      make_flow_key(*rtce::SocketAddress::parse("[2001:db8:aaaa:bbbb:cccc:dddd:eeee:1234]:54321"),
                    *rtce::SocketAddress::parse("[2001:db8::1]:3478"));
  server.command({"SET", schema.flow_key(v6), "4000", "PX", "600000"});
  const std::string sample_v6 = server.command({"MEMORY", "USAGE", schema.flow_key(v6)});

  const Endpoints endpoints = make_endpoints(4000);
  const size_t expected = static_cast<size_t>(restore_flows) + 1;  // + the IPv6 flow
  const std::vector<FlowEntry> samples = {
      entries[0], entries[12345 % restore_flows], entries[restore_flows - 1], {v6, 4000}};
  std::printf(
      "\n| run | flows | into FlowTable (ms) | into BPF map (ms) | map method | verified |\n"
      "|---|---|---|---|---|---|\n");
  double worst_table = 0;
  double worst_map = 0;
  bool all_ok = true;
  bool map_skipped = false;
  bool map_failed = false;
  std::string map_reason;
  for (int run = 1; run <= runs; ++run) {
    // Alternate which table goes first: the machine's other load drifts.
    RestoreResult table;
    MapRestoreResult map;
    for (int turn = 0; turn < 2; ++turn) {
      if ((turn + run) % 2 == 1) {
        table = restore_into_table(server.port(), 2, endpoints, expected, samples);
      } else {
        map = restore_into_bpf_map(server.port(), 2, endpoints, expected, samples);
      }
    }
    worst_table = std::max(worst_table, table.seconds);
    all_ok = all_ok && table.ok;
    char map_ms[32] = "skipped";
    const char* map_ok = "";
    if (map.status == MapRestoreResult::Status::done) {
      worst_map = std::max(worst_map, map.restore.seconds);
      all_ok = all_ok && map.restore.ok;
      std::snprintf(map_ms, sizeof map_ms, "%.0f", map.restore.seconds * 1000);
      map_ok = map.restore.ok ? ", map yes" : ", map NO";
    } else {
      map_skipped = map.status == MapRestoreResult::Status::skipped;
      map_failed = map_failed || map.status == MapRestoreResult::Status::failed;
      map.method = "-";
      if (map_reason.empty()) map_reason = map.reason;
    }
    const std::string flows = map.status == MapRestoreResult::Status::done
                                  ? std::to_string(table.flows) + " / " + std::to_string(map.restore.flows)
                                  : std::to_string(table.flows);
    std::printf("| %d | %s | %.0f | %s | %s | table %s%s |\n", run, flows.c_str(), table.seconds * 1000,
                map_ms, map.method.c_str(), table.ok ? "yes" : "NO", map_ok);
  }
  if (!map_reason.empty()) {
    std::printf("\n%s bpf map restore: %s\n", map_skipped ? "SKIPPED" : "FAILED", map_reason.c_str());
  }
  std::printf(
      "\nMEMORY USAGE of one flow key: IPv4 %s bytes, IPv6 %s bytes; used_memory grew by %lld bytes for "
      "%d flows (%.0f bytes/flow, %.1f MiB per 100k flows)\n",
      sample_v4.c_str(), sample_v6.c_str(), memory_after - memory_before, restore_flows,
      static_cast<double>(memory_after - memory_before) / restore_flows,
      static_cast<double>(memory_after - memory_before) / restore_flows * 100'000 / (1 << 20));
  if (map_skipped || map_failed) {
    std::printf(
        "\nworst write ratio %.2f (target >= 0.5), worst restore into FlowTable %.0f ms (target <= 1000), "
        "BPF map %s\n",
        worst_ratio, worst_table * 1000, map_skipped ? "skipped" : "FAILED");
  } else {
    std::printf(
        "\nworst write ratio %.2f (target >= 0.5), worst restore into FlowTable %.0f ms, "
        "into BPF map %.0f ms (target <= 1000 each)\n",
        worst_ratio, worst_table * 1000, worst_map * 1000);
  }
  if (!all_ok)
    std::printf("a restore was incomplete or a checked flow was wrong (see the verified column)\n");
  return worst_ratio >= 0.5 && worst_table <= 1.0 && worst_map <= 1.0 && all_ok && !map_failed ? 0 : 1;
}
