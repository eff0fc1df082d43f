// memory_flow_store.cpp — bounded map of flows with TTLs on the backend's clock.
#include "memory_flow_store.h"

#include <boost/asio/post.hpp>
#include <vector>

namespace rtce {

namespace asio = boost::asio;

namespace {
Nanos ttl_nanos(Millis ttl) { return static_cast<Nanos>(ttl.count()) * 1'000'000; }
}  // namespace

std::string MemoryFlowBackend::text_key(const rtce_flow_key& key) {
  return flow_client(key).to_string() + "|" + flow_vip(key).to_string();
}

size_t MemoryFlowBackend::size() {
  std::lock_guard lock(mutex_);
  return flows_.size();
}

void MemoryFlowBackend::sweep() {
  std::lock_guard lock(mutex_);
  sweep_locked(clock_());
}

void MemoryFlowBackend::sweep_locked(Nanos now) {
  std::erase_if(flows_, [now](const auto& item) { return item.second.expires_at <= now; });
}

MemoryFlowStore::MemoryFlowStore(asio::io_context& io, std::shared_ptr<MemoryFlowBackend> backend)
    : io_(io), backend_(std::move(backend)) {}

MemoryFlowStore::~MemoryFlowStore() { life_.reset(); }

template <typename Fn>
void MemoryFlowStore::complete_later(Fn&& fn) {
  asio::post(io_, [this, fn = std::forward<Fn>(fn), life = std::weak_ptr<int>(life_)]() mutable {
    if (life.expired()) return;
    counters_.replies.add();
    fn();
  });
}

bool MemoryFlowStore::put_locked(const rtce_flow_key& key, FlowRecord record, Nanos expires_at) {
  counters_.commands_sent.add();
  auto& flows = backend_->flows_;
  std::string text = MemoryFlowBackend::text_key(key);
  if (auto it = flows.find(text); it != flows.end()) {
    it->second = {key, record, expires_at};
    return true;
  }
  if (flows.size() >= backend_->max_flows_) {
    backend_->sweep_locked(backend_->clock_());  // O(n), but only when full
    if (flows.size() >= backend_->max_flows_) {
      counters_.dropped.add();
      return false;
    }
  }
  flows.emplace(std::move(text), MemoryFlowBackend::Entry{key, record, expires_at});
  return true;
}

void MemoryFlowStore::put(const rtce_flow_key& key, FlowRecord record, Millis ttl, DoneCallback done) {
  bool stored = false;
  {
    std::lock_guard lock(backend_->mutex_);
    stored = put_locked(key, record, backend_->clock_() + ttl_nanos(ttl));
  }
  if (!stored) {
    if (done) asio::post(io_, [done = std::move(done)] { done(false); });
    return;
  }
  complete_later([done = std::move(done)] {
    if (done) done(true);
  });
}

void MemoryFlowStore::put_many(std::span<const FlowEntry> flows, Millis ttl) {
  std::lock_guard lock(backend_->mutex_);
  const Nanos expires_at = backend_->clock_() + ttl_nanos(ttl);
  for (const auto& flow : flows) {
    if (put_locked(flow.key, flow.record, expires_at)) counters_.replies.add();
  }
}

void MemoryFlowStore::refresh(const rtce_flow_key& key, Millis ttl, DoneCallback done) {
  bool found = false;
  {
    std::lock_guard lock(backend_->mutex_);
    counters_.commands_sent.add();
    const Nanos now = backend_->clock_();
    auto it = backend_->flows_.find(MemoryFlowBackend::text_key(key));
    if (it != backend_->flows_.end() && it->second.expires_at > now) {
      it->second.expires_at = now + ttl_nanos(ttl);
      found = true;
    }
  }
  complete_later([done = std::move(done), found] {
    if (done) done(found);
  });
}

void MemoryFlowStore::get(const rtce_flow_key& key, GetCallback done) {
  std::optional<FlowRecord> endpoint;
  {
    std::lock_guard lock(backend_->mutex_);
    counters_.commands_sent.add();
    auto it = backend_->flows_.find(MemoryFlowBackend::text_key(key));
    if (it != backend_->flows_.end()) {
      if (it->second.expires_at > backend_->clock_()) {
        endpoint = it->second.record;
      } else {
        backend_->flows_.erase(it);
      }
    }
  }
  complete_later([done = std::move(done), endpoint] { done(endpoint); });
}

void MemoryFlowStore::del(const rtce_flow_key& key, DoneCallback done) {
  {
    std::lock_guard lock(backend_->mutex_);
    counters_.commands_sent.add();
    backend_->flows_.erase(MemoryFlowBackend::text_key(key));
  }
  complete_later([done = std::move(done)] {
    if (done) done(true);
  });
}

void MemoryFlowStore::restore(BatchCallback on_batch, DoneCallback done) {
  std::vector<FlowEntry> all;
  {
    std::lock_guard lock(backend_->mutex_);
    counters_.commands_sent.add();
    const Nanos now = backend_->clock_();
    all.reserve(backend_->flows_.size());
    for (const auto& [text, entry] : backend_->flows_) {
      if (entry.expires_at > now) all.push_back(FlowEntry{entry.key, entry.record});
    }
  }
  complete_later([on_batch = std::move(on_batch), done = std::move(done), all = std::move(all)] {
    constexpr size_t kPage = 1000;
    for (size_t offset = 0; offset < all.size(); offset += kPage) {
      on_batch(std::span<const FlowEntry>(all).subspan(offset, std::min(kPage, all.size() - offset)));
    }
    done(true);
  });
}

}  // namespace rtce
