// redis_flow_bench.cpp — the FlowStore against private local Redis deployments, in one
// process and one run: pipelined new-flow writes (put_many) and restores (SCAN + MGET) per
// second against one standalone redis-server, a Redis Cluster of one master (the cluster
// client's own cost), a Redis Cluster of three masters and the standalone server over TLS,
// as ratios to the standalone server measured in the same run; how the flow keys (no hash
// tag) spread over the three masters, written and restored — the bench exits 1 when a
// master's share is off even by more than 10 % with >= 3000 keys. The standalone write rate
// is also a ratio to `redis-benchmark -P 16` (`-t set`, and the same SET shape) on the same
// server; 100k flows are restored into the relay's own tables — the userspace
// rtce::FlowTable and a BPF LRU hash laid out as the XDP program's `flows` map; and the
// Redis memory a flow costs. Prints Markdown; see docs/benchmarks-redis.md.
//
//   rtce_redis_flow_bench [--flows N] [--restore-flows N] [--runs R] [--no-tls] [--smoke]
//
// --smoke (the CTest twin): the exit status asserts only the distribution over the three
// masters and that every restore was complete and verified, no rate or time.
#include <bpf/bpf.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "clock.h"
#include "flow_table.h"
#include "redis_client.h"
#include "redis_flow_store.h"
#include "redis_server.h"
#include "redis_topology.h"
#include "relay_core.h"
#include "rtce_flow.h"
#include "rtce_xdp.h"
#include "schema.h"

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

// A flow store on one of the bench's deployments, connected (a cluster client: its slot map
// known); throws when it does not connect in 10 s.
std::unique_ptr<rtce::RedisFlowStore> connected_store(boost::asio::io_context& io, rtce::RedisOptions options,
                                                      uint8_t cluster) {
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
double write_rate(const rtce::RedisOptions& redis, uint8_t cluster, const std::vector<FlowEntry>& flows) {
  boost::asio::io_context io;
  auto store_ptr = connected_store(io, redis, cluster);
  rtce::RedisFlowStore& store = *store_ptr;
  constexpr size_t kBatch = 1000;
  constexpr size_t kWindow = 10'000;
  const uint64_t replies_before = store.counters().replies.get();
  const auto start = SteadyClock::now();
  const auto deadline = start + 120s;
  size_t sent = 0;
  while (store.counters().replies.get() - replies_before < flows.size()) {
    if (SteadyClock::now() > deadline)
      throw std::runtime_error("redis flow store: writes not answered in 120 s");
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
RestoreResult timed_restore(const rtce::RedisOptions& redis, uint8_t cluster, InsertBatch&& insert) {
  boost::asio::io_context io;
  auto store_ptr = connected_store(io, redis, cluster);
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

// Restored flows per primary of a cluster: on a cluster each MGET, hence each batch, reads
// one slot, so a batch's first key names the master it came from.
struct PrimaryTally {
  const std::vector<uint8_t>* slot_owner = nullptr;  // master index per slot
  const rtce::RedisSchema* schema = nullptr;
  std::vector<size_t> keys;  // per master
  size_t batches = 0;
};

// A restarted userspace relay reads every flow back into its FlowTable.
RestoreResult restore_into_table(const rtce::RedisOptions& redis, uint8_t cluster, const Endpoints& endpoints,
                                 size_t expected, const std::vector<FlowEntry>& samples,
                                 PrimaryTally* tally = nullptr) {
  // Sized for the restore: the relay's default (65536 over all workers) would refuse flows.
  rtce::FlowTable table(rtce::FlowTable::Options{
      .capacity = static_cast<uint32_t>(std::max<size_t>(65536, expected + expected / 4))});
  const auto& routes = endpoints.routing;
  size_t refused = 0;
  std::string scratch;
  RestoreResult result = timed_restore(redis, cluster, [&](std::span<const FlowEntry> batch) {
    if (tally != nullptr) {
      tally->schema->format_flow_key(batch.front().key, scratch);
      tally->keys.at((*tally->slot_owner)[rtce::redis_key_slot(scratch)]) += batch.size();
      ++tally->batches;
    }
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
MapRestoreResult restore_into_bpf_map(const rtce::RedisOptions& redis, uint8_t cluster,
                                      const Endpoints& endpoints, size_t expected,
                                      const std::vector<FlowEntry>& samples) {
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
  result = timed_restore(redis, cluster, [&](std::span<const FlowEntry> batch) {
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

// "nproc 2, AMD EPYC ..., Linux 6.18.0 x86_64" and the load average now.
std::string machine_description() {
  // The first CPU's "model name", "cpu family" and "model" (a VM may say only "AMD EPYC").
  std::string model = "unknown CPU";
  std::string family;
  std::string number;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line) && !line.empty();) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon + 2 > line.size()) continue;
    const std::string value = line.substr(colon + 2);
    if (line.rfind("model name", 0) == 0) model = value;
    if (line.rfind("cpu family", 0) == 0) family = value;
    if (line.rfind("model\t", 0) == 0) number = value;
  }
  if (!family.empty()) model += " (family " + family + ", model " + number + ")";
  utsname uts{};
  const std::string kernel =
      uname(&uts) == 0 ? std::string(uts.sysname) + " " + uts.release + " " + uts.machine : "unknown kernel";
  return "nproc " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + ", " + model + ", " + kernel;
}

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  file >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::string info_field(const std::string& info, const std::string& name) {
  const auto at = info.find(name + ":");
  if (at == std::string::npos) return {};
  const auto begin = at + name.size() + 1;
  return info.substr(begin, info.find_first_of("\r\n", begin) - begin);
}

// A Redis Cluster of one master (redis-cli --cluster create wants three): a cluster-enabled
// redis-server that takes every slot itself.
struct SingleMasterCluster {
  rtce::test::RedisServer server{
      rtce::test::RedisServerOptions{.port = rtce::test::RedisServer::free_cluster_port(),
                                     .extra_args = {"--cluster-enabled", "yes", "--cluster-node-timeout",
                                                    "1000", "--cluster-config-file", "nodes.conf"}}};

  bool start() {
    if (!server.start() || server.command({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}) != "OK") return false;
    const auto deadline = SteadyClock::now() + 10s;
    while (SteadyClock::now() < deadline) {
      if (info_field(server.command({"CLUSTER", "INFO"}), "cluster_state") == "ok") return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  std::string url() const { return "redis+cluster://127.0.0.1:" + std::to_string(server.port()); }
};

// The master (by index into `masters`) of every slot, from CLUSTER NODES; empty when a slot
// has no known master.
std::vector<uint8_t> slot_owners(const std::vector<rtce::test::RedisServer*>& masters) {
  std::vector<uint8_t> owner(16384, 255);
  std::istringstream nodes(masters.front()->command({"CLUSTER", "NODES"}));
  for (std::string line; std::getline(nodes, line);) {
    std::istringstream fields(line);
    std::string id, address, flags, master, ping, pong, epoch, link;
    fields >> id >> address >> flags >> master >> ping >> pong >> epoch >> link;
    if (flags.find("master") == std::string::npos) continue;
    const auto colon = address.rfind(':', address.find('@'));
    const int port = std::atoi(address.c_str() + colon + 1);
    size_t index = masters.size();
    for (size_t i = 0; i < masters.size(); ++i) {
      if (masters[i]->port() == port) index = i;
    }
    if (index == masters.size()) continue;
    for (std::string range; fields >> range;) {
      if (range.front() == '[') continue;  // a slot being migrated
      const auto dash = range.find('-');
      const int first = std::atoi(range.c_str());
      const int last = dash == std::string::npos ? first : std::atoi(range.c_str() + dash + 1);
      for (int slot = first; slot <= last && slot < 16384; ++slot) owner[slot] = static_cast<uint8_t>(index);
    }
  }
  if (std::find(owner.begin(), owner.end(), 255) != owner.end()) return {};
  return owner;
}

// One deployment the flow store writes to and restores from.
struct Deployment {
  std::string name;
  std::string url;
  rtce::RedisOptions options;
  std::vector<rtce::test::RedisServer*> masters;  // FLUSHALL and DBSIZE go to each
  std::vector<uint8_t> slot_owner;                // cluster: master index per slot
  // Writes only: the standalone client on a cluster-enabled node, whose restore MGETs would
  // cross slots (CROSSSLOT).
  bool writes_only = false;

  void flush() const {
    for (auto* master : masters) master->command({"FLUSHALL"});
  }
};

struct DeploymentFigures {
  std::vector<double> writes;    // flows/s per run
  std::vector<double> restores;  // flows/s per run
  std::vector<double> write_ratios;
  std::vector<double> restore_ratios;  // to the standalone server in the same run
  bool verified = true;
};

// How evenly `keys` (per master) spread: shares, max/min, chi-square against even.
struct Spread {
  size_t total = 0;
  double max_min = 0;
  double chi_square = 0;
  double worst_deviation = 0;  // largest |share / even - 1|
  bool even_enough = true;     // every share within +-10 % of even, or fewer than 3000 keys
};

constexpr size_t kMinKeysForSpreadCheck = 3000;
constexpr double kMaxShareDeviation = 0.10;

Spread spread_of(const std::vector<size_t>& keys) {
  Spread s;
  for (const size_t k : keys) s.total += k;
  if (keys.empty() || s.total == 0) return s;
  const double even = static_cast<double>(s.total) / static_cast<double>(keys.size());
  const auto [low, high] = std::minmax_element(keys.begin(), keys.end());
  s.max_min = *low > 0 ? static_cast<double>(*high) / static_cast<double>(*low) : INFINITY;
  for (const size_t k : keys) {
    const double diff = static_cast<double>(k) - even;
    s.chi_square += diff * diff / even;
    s.worst_deviation = std::max(s.worst_deviation, std::abs(diff) / even);
  }
  s.even_enough = s.total < kMinKeysForSpreadCheck || s.worst_deviation <= kMaxShareDeviation;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int flows = 200'000;
  int restore_flows = 100'000;
  int runs = 3;
  bool tls = true;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--flows") == 0 && has_value) {
      flows = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--restore-flows") == 0 && has_value) {
      restore_flows = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--runs") == 0 && has_value) {
      runs = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--no-tls") == 0) {
      tls = false;
    } else if (std::strcmp(argv[i], "--smoke") == 0) {
      smoke = true;
    } else {
      std::fprintf(stderr, "usage: %s [--flows N] [--restore-flows N] [--runs R] [--no-tls] [--smoke]\n",
                   argv[0]);
      return 2;
    }
  }
  if (flows < 1 || restore_flows < 1 || restore_flows > flows || runs < 1) {
    std::fprintf(stderr, "need 1 <= --restore-flows <= --flows and --runs >= 1\n");
    return 2;
  }
  if (!rtce::test::RedisServer::available()) {
    std::fprintf(stderr, "%s is missing\n", rtce::test::kRedisServerPath);
    return 2;
  }
  const auto bench_start = SteadyClock::now();
  const std::string load_before = load_average();

  // The deployments, all on 127.0.0.1, all started before the first measurement.
  rtce::test::RedisServer server;
  SingleMasterCluster cluster1;
  rtce::test::RedisClusterNodes cluster3(rtce::test::RedisClusterOptions{.masters = 3});
  if (!server.start() || !cluster1.start() || !cluster3.start()) {
    std::fprintf(stderr, "redis-server, the 1-master cluster or the 3-master cluster did not start\n");
    return 2;
  }
  std::unique_ptr<rtce::test::TestCertificates> certificates;
  std::unique_ptr<rtce::test::RedisServer> tls_server;
  std::string tls_skipped;
  if (tls) {
    certificates = std::make_unique<rtce::test::TestCertificates>();
    if (!certificates->ok()) {
      tls_skipped = "test certificates: " + certificates->error();
    } else {
      tls_server = std::make_unique<rtce::test::RedisServer>(
          rtce::test::RedisServerOptions{.tls = certificates.get()});
      if (!tls_server->start()) tls_skipped = "the TLS redis-server did not start";
    }
    if (!tls_skipped.empty()) tls_server.reset();
  }

  std::vector<Deployment> deployments;
  auto add = [&](std::string name, std::string url, std::vector<rtce::test::RedisServer*> masters,
                 bool writes_only = false) {
    auto options = rtce::RedisOptions::from_url(url);
    if (!options) throw std::runtime_error("bad URL " + url);
    deployments.push_back(Deployment{std::move(name), url, *options, std::move(masters), {}, writes_only});
  };
  add("standalone redis-server", server.url(), {&server});
  add("Redis Cluster, 1 master", cluster1.url(), {&cluster1.server});
  add("Redis Cluster, 3 masters", cluster3.url(), {&cluster3.node(0), &cluster3.node(1), &cluster3.node(2)});
  if (tls_server) {
    add("standalone redis-server, TLS", tls_server->url() + "?tls_ca_file=" + certificates->ca_cert(),
        {tls_server.get()});
  }
  // The 1-master cluster's node through the standalone client: the server's cluster mode
  // without the cluster client (no slot routing), to split the 1-master row's cost.
  add("1-master cluster node, standalone client (writes only)",
      "redis://127.0.0.1:" + std::to_string(cluster1.server.port()), {&cluster1.server}, true);
  constexpr size_t kStandalone = 0;
  constexpr size_t kThreeMasters = 2;
  for (size_t d = 1; d <= kThreeMasters; ++d) {
    deployments[d].slot_owner = slot_owners(deployments[d].masters);
    if (deployments[d].slot_owner.empty()) {
      std::fprintf(stderr, "%s: CLUSTER NODES does not cover every slot\n", deployments[d].name.c_str());
      return 2;
    }
  }

  std::vector<FlowEntry> entries;
  entries.reserve(flows);
  for (int i = 0; i < flows; ++i) entries.push_back({make_flow(i), static_cast<EndpointId>(i % 4000 + 1)});
  const Endpoints endpoints = make_endpoints(4000);

  const std::string machine = machine_description();
  const unsigned cores = static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("Machine: %s; load average %s at the start.\n\n", machine.c_str(), load_before.c_str());

  // Each run: every writer once, in an order that rotates between runs (the machine's other
  // load drifts). A put_many writer is followed by a restore of what it wrote, into a
  // FlowTable (verified).
  const int bench_requests = smoke ? flows : 200'000;
  // Same shape as ours: a new key per request, with PX (what a relay writes).
  const std::string same_shape =
      "-r 1000000 SET 'rtce:c3:flow:10.0.__rand_int__|203.0.113.1:3478' 1 PX 600000";
  const std::vector<FlowEntry> topology_samples = {entries[0], entries[flows / 2], entries[flows - 1]};
  const rtce::RedisSchema schema1(1);
  std::vector<DeploymentFigures> figures(deployments.size());
  std::vector<double> theirs_runs;
  std::vector<double> theirs_same_shape_runs;
  std::vector<double> ours_runs;
  std::vector<size_t> dbsize_three;  // keys per master after the last 3-master write
  PrimaryTally restore_tally;        // keys per master of the last 3-master restore
  bool spread_ok = true;
  std::string per_run_topology;
  const size_t jobs = deployments.size() + 2;  // the deployments, then the two redis-benchmark runs
  for (int run = 1; run <= runs; ++run) {
    std::vector<double> write(deployments.size(), 0);
    std::vector<double> restore(deployments.size(), 0);
    double theirs = 0;
    double theirs_same_shape = 0;
    for (size_t turn = 0; turn < jobs; ++turn) {
      const size_t job = (turn + static_cast<size_t>(run)) % jobs;
      if (job >= deployments.size()) {
        server.command({"FLUSHALL"});
        if (job == deployments.size()) {
          theirs = redis_benchmark_set_rate(server.port(), bench_requests);
        } else {
          theirs_same_shape = redis_benchmark_set_rate(server.port(), bench_requests, same_shape);
        }
        continue;
      }
      const Deployment& deployment = deployments[job];
      deployment.flush();
      write[job] = write_rate(deployment.options, 1, entries);
      if (deployment.writes_only) {
        char row[256];
        std::snprintf(row, sizeof row, "| %d | %s | %.0f | – | – | – |\n", run, deployment.name.c_str(),
                      write[job]);
        per_run_topology += row;
        continue;
      }
      PrimaryTally tally{.slot_owner = &deployment.slot_owner,
                         .schema = &schema1,
                         .keys = std::vector<size_t>(deployment.masters.size(), 0)};
      if (job == kThreeMasters) {
        dbsize_three.clear();
        for (auto* master : deployment.masters)
          dbsize_three.push_back(std::strtoull(master->command({"DBSIZE"}).c_str(), nullptr, 10));
        spread_ok = spread_of(dbsize_three).even_enough && spread_ok;
      }
      const RestoreResult result =
          restore_into_table(deployment.options, 1, endpoints, entries.size(), topology_samples,
                             deployment.slot_owner.empty() ? nullptr : &tally);
      restore[job] = result.ok && result.seconds > 0 ? static_cast<double>(result.flows) / result.seconds : 0;
      figures[job].verified = figures[job].verified && result.ok;
      if (job == kThreeMasters) {
        restore_tally = tally;
        spread_ok = spread_of(tally.keys).even_enough && spread_ok;
      }
      char row[256];
      std::snprintf(row, sizeof row, "| %d | %s | %.0f | %.0f | %.0f | %s |\n", run, deployment.name.c_str(),
                    write[job], restore[job], result.seconds * 1000, result.ok ? "yes" : "NO");
      per_run_topology += row;
    }
    for (size_t d = 0; d < deployments.size(); ++d) {
      figures[d].writes.push_back(write[d]);
      figures[d].restores.push_back(restore[d]);
      figures[d].write_ratios.push_back(write[kStandalone] > 0 ? write[d] / write[kStandalone] : 0);
      figures[d].restore_ratios.push_back(restore[kStandalone] > 0 ? restore[d] / restore[kStandalone] : 0);
    }
    ours_runs.push_back(write[kStandalone]);
    theirs_runs.push_back(theirs);
    theirs_same_shape_runs.push_back(theirs_same_shape);
  }

  // The standalone writes against redis-benchmark, per run (as before this bench had clusters).
  std::printf(
      "| run | rtcedge put_many (flows/s) | redis-benchmark -t set -P 16 (req/s) | ratio | "
      "redis-benchmark -P 16, same SET shape (req/s) | ratio |\n");
  std::printf("|---|---|---|---|---|---|\n");
  double worst_ratio = 1e9;
  for (int run = 0; run < runs; ++run) {
    const double ours = ours_runs[run];
    const double theirs = theirs_runs[run];
    const double same = theirs_same_shape_runs[run];
    const double ratio = theirs > 0 ? ours / theirs : 0;
    worst_ratio = std::min(worst_ratio, ratio);
    std::printf("| %d | %.0f | %.0f | %.2f | %.0f | %.2f |\n", run + 1, ours, theirs, ratio, same,
                same > 0 ? ours / same : 0);
  }

  std::printf(
      "\nPer run, each deployment (%d flows written with put_many, then restored into a FlowTable):\n\n",
      flows);
  std::printf("| run | deployment | writes (flows/s) | restores (flows/s) | restore (ms) | verified |\n");
  std::printf("|---|---|---|---|---|---|\n%s", per_run_topology.c_str());

  auto range = [](const std::vector<double>& v) {
    char text[64];
    std::snprintf(text, sizeof text, "%.0f–%.0f", *std::min_element(v.begin(), v.end()),
                  *std::max_element(v.begin(), v.end()));
    return std::string(text);
  };
  std::printf(
      "\nMedians of %d runs (ratios: per run, to the standalone server in the same run, then the median). "
      "Machine: %s.\n\n",
      runs, machine.c_str());
  std::printf(
      "| deployment | writes/s, median (range) | × standalone | restores/s, median (range) | × standalone | "
      "verified |\n|---|---|---|---|---|---|\n");
  bool topology_ok = true;
  for (size_t d = 0; d < deployments.size(); ++d) {
    const auto& f = figures[d];
    topology_ok = topology_ok && f.verified;
    if (deployments[d].writes_only) {
      std::printf("| %s | %.0f (%s) | %.2f | – | – | – |\n", deployments[d].name.c_str(), median(f.writes),
                  range(f.writes).c_str(), median(f.write_ratios));
      continue;
    }
    std::printf("| %s | %.0f (%s) | %.2f | %.0f (%s) | %.2f | %s |\n", deployments[d].name.c_str(),
                median(f.writes), range(f.writes).c_str(), median(f.write_ratios), median(f.restores),
                range(f.restores).c_str(), median(f.restore_ratios), f.verified ? "yes" : "NO");
  }
  {
    std::vector<double> ratios;
    std::vector<double> same_ratios;
    for (int run = 0; run < runs; ++run) {
      ratios.push_back(ours_runs[run] > 0 ? theirs_runs[run] / ours_runs[run] : 0);
      same_ratios.push_back(ours_runs[run] > 0 ? theirs_same_shape_runs[run] / ours_runs[run] : 0);
    }
    std::printf("| redis-benchmark -t set -P 16 (standalone) | %.0f (%s) | %.2f | – | – | – |\n",
                median(theirs_runs), range(theirs_runs).c_str(), median(ratios));
    std::printf("| redis-benchmark -P 16, same SET shape (standalone) | %.0f (%s) | %.2f | – | – | – |\n",
                median(theirs_same_shape_runs), range(theirs_same_shape_runs).c_str(), median(same_ratios));
  }
  if (!tls_skipped.empty()) std::printf("\nSKIPPED the TLS deployment: %s\n", tls_skipped.c_str());
  if (cores < 4) {
    std::printf(
        "\nnproc is %u: the three masters, the client and redis-benchmark share %u cores, so the 3-master "
        "figures show what the cluster client and the per-slot MGETs cost, not throughput scaling. The claim "
        "of the 3-master case is the distribution below.\n",
        cores, cores);
  }

  // The distribution: every flow key hashes over all 16384 slots (no hash tag).
  {
    const Spread written = spread_of(dbsize_three);
    const Spread restored = spread_of(restore_tally.keys);
    std::vector<size_t> slots(3, 0);
    for (const uint8_t owner : deployments[kThreeMasters].slot_owner) ++slots.at(owner);
    std::printf(
        "\nDistribution over the 3 masters (%d flow keys; even = 1/3 each; a share outside ±%.0f %% of even "
        "with >= %zu keys fails the bench):\n\n",
        flows, kMaxShareDeviation * 100, kMinKeysForSpreadCheck);
    std::printf(
        "| master | slots | keys after the write (DBSIZE) | share | vs even | keys restored from it | share "
        "|\n"
        "|---|---|---|---|---|---|---|\n");
    for (size_t m = 0; m < dbsize_three.size(); ++m) {
      const double share =
          written.total > 0 ? static_cast<double>(dbsize_three[m]) / static_cast<double>(written.total) : 0;
      const size_t from = m < restore_tally.keys.size() ? restore_tally.keys[m] : 0;
      std::printf(
          "| %zu (:%u) | %zu | %zu | %.2f %% | %+.2f %% | %zu | %.2f %% |\n", m,
          deployments[kThreeMasters].masters[m]->port(), slots[m], dbsize_three[m], share * 100,
          (share * 3 - 1) * 100, from,
          restored.total > 0 ? static_cast<double>(from) / static_cast<double>(restored.total) * 100 : 0);
    }
    std::printf(
        "\nwritten: %zu keys, max/min %.3f, chi-square vs even %.2f (2 degrees of freedom; 5.99 is the 95th "
        "percentile), worst share %.2f %% off even — %s\n",
        written.total, written.max_min, written.chi_square, written.worst_deviation * 100,
        written.even_enough ? "ok" : "FAILED");
    std::printf(
        "restored: %zu keys in %zu MGETs (%.2f keys each: one slot per MGET), max/min %.3f, chi-square %.2f, "
        "worst %.2f %% off even — %s\n",
        restored.total, restore_tally.batches,
        restore_tally.batches > 0 ? static_cast<double>(restored.total) / restore_tally.batches : 0,
        restored.max_min, restored.chi_square, restored.worst_deviation * 100,
        restored.even_enough ? "ok" : "FAILED");
  }

  // Restores of 100k flows into the relay's tables, from the standalone server.
  const rtce::RedisOptions& standalone = deployments[kStandalone].options;
  server.command({"FLUSHALL"});
  const long long memory_before = used_memory(server);
  write_rate(standalone, 2, std::vector<FlowEntry>(entries.begin(), entries.begin() + restore_flows));
  const long long memory_after = used_memory(server);
  const rtce::RedisSchema schema(2);
  const std::string sample_v4 =
      server.command({"MEMORY", "USAGE", schema.flow_key(entries[12345 % restore_flows].key)});
  const rtce_flow_key v6 =
      make_flow_key(*rtce::SocketAddress::parse("[2001:db8:aaaa:bbbb:cccc:dddd:eeee:1234]:54321"),
                    *rtce::SocketAddress::parse("[2001:db8::1]:3478"));
  server.command({"SET", schema.flow_key(v6), "4000", "PX", "600000"});
  const std::string sample_v6 = server.command({"MEMORY", "USAGE", schema.flow_key(v6)});

  const size_t expected = static_cast<size_t>(restore_flows) + 1;  // + the IPv6 flow
  const std::vector<FlowEntry> samples = {
      entries[0], entries[12345 % restore_flows], entries[restore_flows - 1], {v6, 4000}};
  std::printf(
      "\nRestore from the standalone server into the relay's tables:\n\n"
      "| run | flows | into FlowTable (ms) | into BPF map (ms) | map method | verified |\n"
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
        table = restore_into_table(standalone, 2, endpoints, expected, samples);
      } else {
        map = restore_into_bpf_map(standalone, 2, endpoints, expected, samples);
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
  std::printf("distribution over 3 masters: %s; every deployment's restores verified: %s\n",
              spread_ok ? "ok" : "FAILED", topology_ok ? "yes" : "NO");
  std::printf("load average %s at the end; %.0f s in all\n", load_average().c_str(),
              seconds_since(bench_start));
  if (!all_ok)
    std::printf("a restore was incomplete or a checked flow was wrong (see the verified column)\n");
  const bool correct = spread_ok && topology_ok && all_ok && !map_failed;
  if (smoke) return correct ? 0 : 1;
  return correct && worst_ratio >= 0.5 && worst_table <= 1.0 && worst_map <= 1.0 ? 0 : 1;
}
