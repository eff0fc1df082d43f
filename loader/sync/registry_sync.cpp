// registry_sync.cpp — see registry_sync.h.
#include "registry_sync.h"

#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <set>

namespace rtce {

RegistrySync::RegistrySync(RedisOptions redis, RegistryOptions options, Apply apply)
    : registry_(io_, std::move(redis), options), apply_(std::move(apply)) {
  registry_.watch([this](const RegistryEvent& event) {
    const auto& r = event.record;
    if (event.change == RegistryChange::kRemoved) {
      endpoints_.erase(r.id);
      spdlog::info("registry: endpoint {} left", r.id);
    } else {
      if (event.change == RegistryChange::kAdded)
        spdlog::info("registry: endpoint {} at {}", r.id, r.address.to_string());
      endpoints_[r.id] = r.address;
    }
    std::vector<EndpointConfig> set;
    for (const auto& [id, address] : endpoints_) set.push_back({id, address});
    apply_(std::move(set));
  });
  thread_ = std::thread([this] {
    auto guard = boost::asio::make_work_guard(io_);
    io_.run();
  });
}

RegistrySync::~RegistrySync() {
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

std::vector<EndpointConfig> merge_endpoints(const std::vector<EndpointConfig>& configured,
                                            const std::vector<EndpointConfig>& registry) {
  std::vector<EndpointConfig> out = configured;
  std::set<uint16_t> ids;
  for (const auto& e : configured) ids.insert(e.id);
  for (const auto& e : registry)
    if (ids.insert(e.id).second) out.push_back(e);
  return out;
}

}  // namespace rtce
