// redis_registry.h — Registry on Redis: one command connection for the Lua scripts that
// keep an endpoint's hash, the id set and the events channel consistent, and (once
// watch() is called) a subscriber connection plus a periodic re-list, because pub/sub
// loses messages while a connection is down.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>

#include "redis_client.h"
#include "registry.h"
#include "schema.h"
#include "watch_diff.h"

namespace rtce {

struct RegistryOptions {
  uint8_t cluster = 0;
  Millis endpoint_ttl{3000};     // a record not heartbeated for this long disappears
  Millis relist_interval{1000};  // watch: full re-list period (bounds the lag of TTL expiry)
  // watch: a re-list that fails, or is answered later than this, means transceivers may not
  // have been able to heartbeat: removals are then held for one endpoint_ttl (watch_diff.h).
  // 0 = a third of endpoint_ttl (the transceivers' heartbeat period).
  Millis stall_threshold{0};
};

class RedisRegistry final : public Registry {
 public:
  RedisRegistry(boost::asio::io_context& io, RedisOptions redis, RegistryOptions options);
  ~RedisRegistry() override;

  void register_endpoint(const EndpointRecord& record, DoneCallback done = {}) override;
  void heartbeat(EndpointId id, uint32_t load, bool draining, DoneCallback done = {}) override;
  void deregister(EndpointId id, DoneCallback done = {}) override;
  void list(ListCallback done) override;
  void watch(WatchCallback on_change) override;
  void allocate_endpoint_ids(std::string_view pod_identity, uint16_t count, AllocateCallback done) override;

  // Global relay (docs/redis.md, the ingress key). Publishes `address` as a relay ingress of
  // this cluster for one endpoint_ttl (Redis's clock, so relays' clocks need not agree) and
  // trims the members that expired; the owner calls it every endpoint_ttl / 3.
  void publish_ingress(const SocketAddress& address, DoneCallback done = {});
  // One call of an ek_ key (its principal) in the fleet: done(true) counted, done(false) the
  // key made max_calls already, done(nullopt) the store did not answer. The counter lives
  // until the key expires (expires_at, unix seconds). give_back_key_call undoes one.
  void take_key_call(std::string_view principal, uint32_t max_calls, int64_t expires_at,
                     std::function<void(std::optional<bool>)> done);
  void give_back_key_call(std::string_view principal);
  // A provider's phone call (`provider`, its call id), claimed for the call `call_id` that
  // answers it, for ttl_s: done(the call id that holds the claim) — call_id when this claim
  // took it, another when a call answered it first; done(nullopt) the store did not answer.
  void claim_provider_call(std::string_view provider, std::string_view provider_call_id,
                           std::string_view call_id, int64_t ttl_s,
                           std::function<void(std::optional<std::string>)> done);
  void withdraw_ingress(const SocketAddress& address, DoneCallback done = {});
  using IngressCallback = std::function<void(std::optional<std::vector<std::string>> live)>;
  // The unexpired members of `cluster`'s ingress set (any cluster: a fleet shares one Redis);
  // nullopt when the store could not be reached.
  void list_ingress(uint8_t cluster, IngressCallback done);

  // watch: runs after every re-list: answered (after its changes were reported) or not.
  void on_listed(std::function<void(bool answered)> hook) { on_listed_ = std::move(hook); }

  bool connected() const override { return commands_->connected(); }
  const SyncCounters& counters() const override { return counters_; }

 private:
  void relist();
  void arm_relist_timer();

  boost::asio::io_context& io_;
  RedisOptions redis_;
  RegistryOptions options_;
  RedisSchema schema_;
  SyncCounters counters_;
  std::unique_ptr<RedisClient> commands_;
  std::unique_ptr<RedisClient> events_;
  WatchCallback on_change_;
  std::function<void(bool answered)> on_listed_;
  EndpointSetDiff diff_;
  bool reported_held_ = false;  // the outage grace's log line, once per outage
  bool relist_in_flight_ = false;
  bool relist_again_ = false;
  boost::asio::steady_timer relist_timer_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace rtce
