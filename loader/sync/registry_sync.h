// registry_sync.h — keeps a relay's transceiver endpoints in step with the shared registry
// (redis-sync): it watches the registry on its own thread and hands every changed set of
// endpoints to `apply` (which swaps the routing table the way a SIGHUP reload does), within
// the registry's re-list period (1 s) of a change. Redis being down keeps the last known
// set: an outage must not look like every transceiver leaving.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "redis_registry.h"
#include "relay_config.h"

namespace rtce {

class RegistrySync {
 public:
  using Apply = std::function<void(std::vector<EndpointConfig>)>;
  RegistrySync(RedisOptions redis, RegistryOptions options, Apply apply);
  ~RegistrySync();
  RegistrySync(const RegistrySync&) = delete;
  RegistrySync& operator=(const RegistrySync&) = delete;

 private:
  boost::asio::io_context io_;
  RedisRegistry registry_;
  Apply apply_;
  std::map<uint16_t, SocketAddress> endpoints_;  // registry thread only
  std::thread thread_;
};

// Static endpoints from the configuration win over registry ones with the same id.
std::vector<EndpointConfig> merge_endpoints(const std::vector<EndpointConfig>& configured,
                                            const std::vector<EndpointConfig>& registry);

}  // namespace rtce
