// registry_agent.cpp — see registry_agent.h.
#include "registry_agent.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <future>

namespace rtce {

RegistryAgent::RegistryAgent(RedisOptions redis, RegistryOptions options,
                             std::function<uint32_t(size_t)> load)
    : work_(boost::asio::make_work_guard(io_)),
      registry_(io_, std::move(redis), options),
      options_(options),
      load_(std::move(load)),
      timer_(io_) {
  thread_ = std::thread([this] { io_.run(); });
}

RegistryAgent::~RegistryAgent() { stop(1'000'000'000); }

std::optional<uint16_t> RegistryAgent::allocate_ids(const std::string& pod_identity, uint16_t count,
                                                    Nanos timeout) {
  auto result = std::make_shared<std::promise<std::optional<EndpointId>>>();
  auto future = result->get_future();
  boost::asio::post(io_, [this, pod_identity, count, result] {
    registry_.allocate_endpoint_ids(pod_identity, count,
                                    [result](std::optional<EndpointId> base) { result->set_value(base); });
  });
  if (future.wait_for(std::chrono::nanoseconds(timeout)) != std::future_status::ready) return std::nullopt;
  return future.get();
}

void RegistryAgent::start(std::vector<Endpoint> endpoints) {
  boost::asio::post(io_, [this, endpoints = std::move(endpoints)]() mutable {
    endpoints_ = std::move(endpoints);
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      EndpointRecord record{
          endpoints_[i].id,       endpoints_[i].address, endpoints_[i].capacity, load_(i), false,
          endpoints_[i].signaling};
      registry_.register_endpoint(record, [id = record.id](bool ok) {
        if (!ok)
          spdlog::warn(
              "registry: endpoint {} not registered yet (Redis unreachable); retrying with heartbeats", id);
      });
    }
    beat();
    registry_.watch([this](const RegistryEvent& event) {
      std::lock_guard lock(signaling_mutex_);
      auto address = SocketAddress::parse(event.record.signaling);
      if (event.change == RegistryChange::kRemoved || !address)
        signaling_.erase(event.record.id);
      else
        signaling_[event.record.id] = *address;
    });
  });
}

std::optional<SocketAddress> RegistryAgent::signaling_of(uint16_t id) const {
  std::lock_guard lock(signaling_mutex_);
  auto it = signaling_.find(id);
  if (it == signaling_.end()) return std::nullopt;
  return it->second;
}

void RegistryAgent::take_key_call(std::string principal, uint32_t max_calls, int64_t expires_at,
                                  std::function<void(std::optional<bool>)> done) {
  boost::asio::post(io_,
                    [this, principal = std::move(principal), max_calls, expires_at, done = std::move(done)] {
                      registry_.take_key_call(principal, max_calls, expires_at, done);
                    });
}

void RegistryAgent::give_back_key_call(std::string principal) {
  boost::asio::post(io_,
                    [this, principal = std::move(principal)] { registry_.give_back_key_call(principal); });
}

void RegistryAgent::claim_provider_call(std::string provider, std::string provider_call_id,
                                        std::string call_id, int64_t ttl_s,
                                        std::function<void(std::optional<std::string>)> done) {
  boost::asio::post(io_,
                    [this, provider = std::move(provider), provider_call_id = std::move(provider_call_id),
                     call_id = std::move(call_id), ttl_s, done = std::move(done)] {
                      registry_.claim_provider_call(provider, provider_call_id, call_id, ttl_s, done);
                    });
}

void RegistryAgent::beat() {
  // A third of the TTL: two heartbeats may be lost before the record expires.
  timer_.expires_after(options_.endpoint_ttl / 3);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    up_.store(registry_.connected(), std::memory_order_relaxed);
    const bool draining = draining_.load();
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      const auto& e = endpoints_[i];
      const uint32_t load = load_(i);
      registry_.heartbeat(e.id, load, draining, [this, e, load, draining](bool ok) {
        // An expired record (Redis restarted, or a long outage) is registered again.
        if (!ok)
          registry_.register_endpoint(
              EndpointRecord{e.id, e.address, e.capacity, load, draining, e.signaling});
      });
    }
    beat();
  });
}

void RegistryAgent::set_draining() {
  draining_ = true;
  boost::asio::post(io_, [this] {
    for (size_t i = 0; i < endpoints_.size(); ++i) registry_.heartbeat(endpoints_[i].id, load_(i), true);
  });
}

void RegistryAgent::stop(Nanos timeout) {
  if (!thread_.joinable()) return;
  auto done = std::make_shared<std::promise<void>>();
  auto future = done->get_future();
  boost::asio::post(io_, [this, done] {
    timer_.cancel();
    auto remaining = std::make_shared<size_t>(endpoints_.size());
    if (*remaining == 0) return done->set_value();
    for (const auto& e : endpoints_)
      registry_.deregister(e.id, [done, remaining](bool) {
        if (--*remaining == 0) done->set_value();
      });
  });
  future.wait_for(std::chrono::nanoseconds(timeout));
  work_.reset();
  io_.stop();
  thread_.join();
}

}  // namespace rtce
