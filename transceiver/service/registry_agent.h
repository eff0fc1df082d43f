// registry_agent.h — the transceiver's side of the shared registry (redis-sync): it takes
// stable endpoint ids for this pod (atomic in Redis), registers one endpoint per media
// worker, heartbeats their load and draining state before the TTL lapses, and deregisters
// them on a clean stop. It also watches the registry for every transceiver endpoint's
// signaling address, so that a request for a call another pod owns can be forwarded there
// without a lookup per request. Runs on its own thread; Redis being down never blocks
// signaling or media (heartbeats fail, are counted, and resume on reconnect; the last known
// addresses stay).
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net_address.h"
#include "redis_registry.h"

namespace rtce {

class RegistryAgent {
 public:
  struct Endpoint {
    uint16_t id;
    SocketAddress address;
    uint32_t capacity;
    std::string signaling;  // this pod's signaling API, "host:port"
  };
  // load(i) returns worker i's live sessions; called on the agent's thread.
  RegistryAgent(RedisOptions redis, RegistryOptions options, std::function<uint32_t(size_t)> load);
  ~RegistryAgent();

  // Blocks up to `timeout` for the pod's base id (startup only). nullopt: Redis unreachable.
  std::optional<uint16_t> allocate_ids(const std::string& pod_identity, uint16_t count, Nanos timeout);
  void start(std::vector<Endpoint> endpoints);
  void set_draining();
  // The signaling address ("host:port") of the pod that registered endpoint `id`, as last seen;
  // nullopt when unknown. Any thread.
  std::optional<SocketAddress> signaling_of(uint16_t id) const;
  // RedisRegistry::take_key_call and give_back_key_call from any thread; done runs on the
  // agent's thread.
  void take_key_call(std::string principal, uint32_t max_calls, int64_t expires_at,
                     std::function<void(std::optional<bool>)> done);
  void give_back_key_call(std::string principal);
  // RedisRegistry::claim_provider_call from any thread; done runs on the agent's thread.
  // Redis was connected at the last heartbeat (any thread: metrics).
  bool up() const { return up_.load(std::memory_order_relaxed); }
  const SyncCounters& counters() const { return registry_.counters(); }

  void claim_provider_call(std::string provider, std::string provider_call_id, std::string call_id,
                           int64_t ttl_s, std::function<void(std::optional<std::string>)> done);
  // Deregisters every endpoint (waits up to `timeout` for Redis) and stops the thread.
  void stop(Nanos timeout);

 private:
  void beat();

  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  RedisRegistry registry_;
  RegistryOptions options_;
  std::function<uint32_t(size_t)> load_;
  boost::asio::steady_timer timer_;
  std::vector<Endpoint> endpoints_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> up_{false};
  mutable std::mutex signaling_mutex_;  // the HTTP thread reads, the agent's thread writes
  std::unordered_map<uint16_t, SocketAddress> signaling_;
  std::thread thread_;
};

}  // namespace rtce
