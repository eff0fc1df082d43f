// registry_sync.cpp — see registry_sync.h.
#include "registry_sync.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <future>
#include <set>

namespace rtce {

RegistrySync::RegistrySync(RedisOptions redis, RegistryOptions options, Apply apply, Peers peers, Cache cache)
    : registry_(io_, std::move(redis), options),
      apply_(std::move(apply)),
      peers_(std::move(peers)),
      cache_(std::move(cache)),
      // Publish well within the TTL (a third, like the transceivers' heartbeats); learn at
      // least as often as endpoints are re-listed.
      peer_period_(std::min(options.endpoint_ttl / 3, options.relist_interval)),
      peer_timer_(io_),
      cache_grace_(options.endpoint_ttl + options.relist_interval),
      cache_grace_timer_(io_) {
  if (!cache_.file.empty()) {
    std::string why;
    if (access(cache_.file.c_str(), F_OK) != 0) {
      spdlog::info("registry: no cache at {} yet", cache_.file);
    } else if (auto cached = load_registry_cache(cache_.file, cache_.max_age, &why)) {
      for (const auto& e : *cached) endpoints_[e.id] = e.address;
      saved_ = std::move(*cached);
      from_cache_ = true;
      spdlog::info("registry: {} endpoint(s) from the cache {} until the registry answers", endpoints_.size(),
                   cache_.file);
      // Now, before the registry thread starts (and before the caller's workers take
      // packets): a flow recovered from the store on the first packet needs its route.
      apply_endpoints();
    } else {
      spdlog::warn("registry: cache {} not used: {}", cache_.file, why);
    }
  }
  registry_.watch([this](const RegistryEvent& event) {
    const auto& r = event.record;
    if (event.change == RegistryChange::kRemoved) {
      endpoints_.erase(r.id);
      spdlog::info("registry: endpoint {} left", r.id);
    } else {
      if (event.change == RegistryChange::kAdded)
        spdlog::info("registry: endpoint {} at {}", r.id, r.address.to_string());
      endpoints_[r.id] = r.address;
      if (from_cache_) confirmed_.insert(r.id);
    }
    apply_endpoints();
  });
  registry_.on_listed([this](bool answered) {
    up_.store(answered, std::memory_order_relaxed);
    if (!answered || !from_cache_ || grace_started_) return;
    // The registry answered. After an outage it may answer before the transceivers have
    // registered again: cached endpoints it does not list yet are kept for one TTL (their
    // heartbeat period fits in it three times), as the watch keeps a known endpoint after
    // an outage; those still unlisted then leave.
    grace_started_ = true;
    cache_grace_timer_.expires_after(cache_grace_);
    cache_grace_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      from_cache_ = false;
      std::erase_if(endpoints_, [this](const auto& entry) {
        if (confirmed_.count(entry.first) > 0) return false;
        spdlog::info("registry: cached endpoint {} left (not registered again within {} ms)", entry.first,
                     cache_grace_.count());
        return true;
      });
      confirmed_.clear();
      apply_endpoints();
    });
  });
  if (peers_.publish || !peers_.learn.empty()) peer_tick();
  thread_ = std::thread([this] {
    auto guard = boost::asio::make_work_guard(io_);
    io_.run();
  });
}

void RegistrySync::apply_endpoints() {
  std::vector<EndpointConfig> set;
  for (const auto& [id, address] : endpoints_) set.push_back({id, address});
  if (!cache_.file.empty() && !from_cache_ &&
      !std::equal(set.begin(), set.end(), saved_.begin(), saved_.end(),
                  [](const EndpointConfig& a, const EndpointConfig& b) {
                    return a.id == b.id && a.address == b.address;
                  })) {
    std::string why;
    if (save_registry_cache(cache_.file, set, &why)) {
      saved_ = set;
    } else {
      spdlog::warn("registry: cache not saved: {}", why);
    }
  }
  apply_(std::move(set));
}

RegistrySync::~RegistrySync() {
  auto withdrawn = std::make_shared<std::promise<void>>();  // outlives a late callback
  auto future = withdrawn->get_future();
  boost::asio::post(io_, [this, withdrawn] {
    peer_timer_.cancel();
    if (!peers_.publish) {
      withdrawn->set_value();
      return;
    }
    registry_.withdraw_ingress(*peers_.publish, [withdrawn](bool) { withdrawn->set_value(); });
  });
  // Redis down must not hold up a shutdown; the member then expires within registry.ttl.
  future.wait_for(std::chrono::milliseconds(500));
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

void RegistrySync::learn(std::vector<uint8_t> clusters) {
  boost::asio::post(io_, [this, clusters = std::move(clusters)]() mutable {
    const bool was_idle = !peers_.publish && peers_.learn.empty();
    peers_.learn = std::move(clusters);
    bool dropped = false;
    for (auto it = learned_.begin(); it != learned_.end();) {
      if (std::find(peers_.learn.begin(), peers_.learn.end(), it->first) == peers_.learn.end()) {
        it = learned_.erase(it);
        dropped = true;
      } else {
        ++it;
      }
    }
    if (dropped && peers_.apply) peers_.apply(learned_);
    if (was_idle && !peers_.learn.empty()) peer_tick();
  });
}

void RegistrySync::arm_peer_timer() {
  peer_timer_.expires_after(peer_period_);
  peer_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) peer_tick();
  });
}

void RegistrySync::peer_tick() {
  if (peers_.publish) {
    registry_.publish_ingress(*peers_.publish, [address = *peers_.publish](bool ok) {
      if (!ok) spdlog::debug("registry: ingress {} not published (Redis unreachable)", address.to_string());
    });
  }
  for (const uint8_t cluster : peers_.learn) {
    registry_.list_ingress(cluster, [this, cluster](std::optional<std::vector<std::string>> live) {
      // Unreachable, or every member expired (as they all do in a Redis frozen for a TTL):
      // keep the last known address rather than strand the cluster's flows.
      if (!live) return;
      if (std::find(peers_.learn.begin(), peers_.learn.end(), cluster) == peers_.learn.end()) return;
      const auto chosen = choose_ingress(*live);
      if (!chosen) return;
      const auto it = learned_.find(cluster);
      if (it != learned_.end() && it->second == *chosen) return;
      spdlog::info("registry: cluster {} relay ingress {} (was {})", cluster, chosen->to_string(),
                   it == learned_.end() ? std::string("unknown") : it->second.to_string());
      learned_[cluster] = *chosen;
      if (peers_.apply) peers_.apply(learned_);
    });
  }
  if (peers_.publish || !peers_.learn.empty()) arm_peer_timer();
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

std::optional<SocketAddress> choose_ingress(const std::vector<std::string>& live) {
  std::optional<std::string> best;
  std::optional<SocketAddress> chosen;
  for (const auto& text : live) {
    // A member another writer got wrong must not take the cluster down: skip it.
    auto address = SocketAddress::parse(text);
    if (!address || address->is_unspecified() || address->port() == 0) continue;
    if (!best || text < *best) {
      best = text;
      chosen = *address;
    }
  }
  return chosen;
}

std::vector<PeerClusterConfig> merge_peer_clusters(const std::vector<PeerClusterConfig>& configured,
                                                   const std::map<uint8_t, SocketAddress>& learned) {
  std::vector<PeerClusterConfig> out = configured;
  for (auto& p : out) {
    if (!p.from_registry) continue;
    if (auto it = learned.find(p.cluster); it != learned.end()) p.address = it->second;
  }
  return out;
}

std::vector<uint8_t> learned_clusters(const std::vector<PeerClusterConfig>& configured) {
  std::vector<uint8_t> out;
  for (const auto& p : configured)
    if (p.from_registry) out.push_back(p.cluster);
  return out;
}

}  // namespace rtce
