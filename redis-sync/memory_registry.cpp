// memory_registry.cpp — the in-memory registry: same semantics as the Redis one (TTL,
// contiguous stable id ranges, snapshot-diff watch), one mutex over shared data.
#include "memory_registry.h"

#include <boost/asio/post.hpp>

namespace rtce {

namespace asio = boost::asio;

std::vector<EndpointRecord> MemoryRegistryBackend::live_locked() {
  const Nanos now = clock_();
  std::vector<EndpointRecord> live;
  for (auto it = endpoints_.begin(); it != endpoints_.end();) {
    if (it->second.expires_at <= now) {
      it = endpoints_.erase(it);
    } else {
      live.push_back(it->second.record);
      ++it;
    }
  }
  return live;
}

void MemoryRegistryBackend::notify() {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard lock(mutex_);
    std::erase_if(watchers_, [](const auto& watcher) { return watcher.first.expired(); });
    for (const auto& watcher : watchers_) calls.push_back(watcher.second);
  }
  for (const auto& call : calls) call();  // each posts to its own client's io_context
}

MemoryRegistry::MemoryRegistry(asio::io_context& io, std::shared_ptr<MemoryRegistryBackend> backend,
                               RegistryOptions options)
    : io_(io), backend_(std::move(backend)), options_(options), relist_timer_(io) {}

MemoryRegistry::~MemoryRegistry() {
  life_.reset();
  relist_timer_.cancel();
}

template <typename Fn>
void MemoryRegistry::complete_later(Fn&& fn) {
  counters_.commands_sent.add();
  asio::post(io_, [this, fn = std::forward<Fn>(fn), life = std::weak_ptr<int>(life_)]() mutable {
    if (life.expired()) return;
    counters_.replies.add();
    fn();
  });
}

void MemoryRegistry::register_endpoint(const EndpointRecord& record, DoneCallback done) {
  {
    std::lock_guard lock(backend_->mutex_);
    const Nanos ttl = static_cast<Nanos>(options_.endpoint_ttl.count()) * 1'000'000;
    backend_->endpoints_[record.id] = {record, backend_->clock_() + ttl};
  }
  backend_->notify();
  complete_later([done = std::move(done)] {
    if (done) done(true);
  });
}

void MemoryRegistry::heartbeat(EndpointId id, uint32_t load, bool draining, DoneCallback done) {
  bool found = false;
  bool draining_changed = false;
  {
    std::lock_guard lock(backend_->mutex_);
    const Nanos now = backend_->clock_();
    auto it = backend_->endpoints_.find(id);
    if (it != backend_->endpoints_.end() && it->second.expires_at > now) {
      found = true;
      draining_changed = it->second.record.draining != draining;
      it->second.record.load = load;
      it->second.record.draining = draining;
      it->second.expires_at = now + static_cast<Nanos>(options_.endpoint_ttl.count()) * 1'000'000;
    }
  }
  if (draining_changed) backend_->notify();  // as the Redis registry: load waits for the re-list
  complete_later([done = std::move(done), found] {
    if (done) done(found);
  });
}

void MemoryRegistry::deregister(EndpointId id, DoneCallback done) {
  {
    std::lock_guard lock(backend_->mutex_);
    backend_->endpoints_.erase(id);
  }
  backend_->notify();
  complete_later([done = std::move(done)] {
    if (done) done(true);
  });
}

void MemoryRegistry::list(ListCallback done) {
  std::vector<EndpointRecord> live;
  {
    std::lock_guard lock(backend_->mutex_);
    live = backend_->live_locked();
  }
  complete_later([done = std::move(done), live = std::move(live)]() mutable { done(std::move(live)); });
}

void MemoryRegistry::allocate_endpoint_ids(std::string_view pod_identity, uint16_t count,
                                           AllocateCallback done) {
  std::optional<EndpointId> base;
  if (count > 0) {
    std::lock_guard lock(backend_->mutex_);
    auto it = backend_->pod_ranges_.find(pod_identity);
    if (it != backend_->pod_ranges_.end() && it->second.second >= count) {
      base = it->second.first;
    } else if (backend_->next_id_ + count - 1 <= 65535) {
      base = static_cast<EndpointId>(backend_->next_id_);
      backend_->next_id_ += count;
      backend_->pod_ranges_[std::string(pod_identity)] = {*base, count};
    }
  }
  complete_later([done = std::move(done), base] { done(base); });
}

void MemoryRegistry::watch(WatchCallback on_change) {
  on_change_ = std::move(on_change);
  diff_.clear();
  if (!watching_) {
    watching_ = true;
    std::lock_guard lock(backend_->mutex_);
    // Runs on the notifying thread: touch nothing of this client but through the post.
    backend_->watchers_.emplace_back(life_, [this, io = &io_, life = std::weak_ptr<int>(life_)] {
      asio::post(*io, [this, life] {
        if (!life.expired()) resync();
      });
    });
    arm_relist_timer();
  }
  asio::post(io_, [this, life = std::weak_ptr<int>(life_)] {
    if (!life.expired()) resync();
  });
}

void MemoryRegistry::arm_relist_timer() {
  relist_timer_.expires_after(options_.relist_interval);
  relist_timer_.async_wait([this, life = std::weak_ptr<int>(life_)](const boost::system::error_code& ec) {
    if (ec || life.expired()) return;
    resync();
    arm_relist_timer();
  });
}

void MemoryRegistry::resync() {
  if (!on_change_) return;
  std::vector<EndpointRecord> live;
  {
    std::lock_guard lock(backend_->mutex_);
    live = backend_->live_locked();
  }
  diff_.apply(live, backend_->clock_(), [this](const RegistryEvent& event) { on_change_(event); });
}

}  // namespace rtce
