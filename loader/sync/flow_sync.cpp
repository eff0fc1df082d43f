// flow_sync.cpp — see flow_sync.h.
#include "flow_sync.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace rtce {

FlowRecord to_flow_record(FlowRole role, uint16_t id, const sockaddr_in6& via) {
  switch (role) {
    case FlowRole::ingress: return FlowRecord::peer_cluster(static_cast<uint8_t>(id));
    case FlowRole::owner:
      return FlowRecord::owner(
          id, SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&via), sizeof via).unmapped());
    default: return FlowRecord(id);
  }
}

FlowLookupReply to_lookup_reply(const rtce_flow_key& key, const std::optional<FlowRecord>& record) {
  FlowLookupReply reply;
  reply.key = key;
  if (record) {
    reply.endpoint_id = record->id;
    reply.role = record->role;
    if (record->role == FlowRole::owner) reply.via = record->via.to_v6_mapped();
  }
  return reply;
}

bool FlowSyncChannel::push(const FlowSyncRequest& request) {
  if (requests_.push(request)) return true;
  requests_dropped.add();
  return false;
}

struct FlowSync::Wakeup {
  explicit Wakeup(boost::asio::io_context& io) : descriptor(io), timer(io) {
    const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) throw std::runtime_error(std::string("flow sync eventfd: ") + std::strerror(errno));
    descriptor.assign(fd);
  }
  boost::asio::posix::stream_descriptor descriptor;
  boost::asio::steady_timer timer;
};

FlowSync::FlowSync(Options options, size_t channels) : options_(std::move(options)) {
  store_ =
      std::make_unique<RedisFlowStore>(io_, options_.redis, FlowStoreOptions{.cluster = options_.cluster});
  for (size_t i = 0; i < channels; i++) channels_.push_back(std::make_unique<FlowSyncChannel>());
  wakeup_ = std::make_unique<Wakeup>(io_);
  put_batch_.reserve(FlowSyncChannel::kRequestCapacity);
  arm_wakeup();
  schedule_tick();
  thread_ = std::thread([this] {
    auto guard = boost::asio::make_work_guard(io_);
    io_.run();
  });
}

FlowSync::~FlowSync() {
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

void FlowSync::notify() {
  if (signaled_.exchange(true, std::memory_order_acq_rel)) return;
  const uint64_t one = 1;
  [[maybe_unused]] auto n = write(wakeup_->descriptor.native_handle(), &one, sizeof one);
}

void FlowSync::schedule_tick() {
  // A slow tick as well: it tracks the connection state for /metrics and drains anything a
  // producer pushed without notifying (a notify lost to a full eventfd cannot happen, but
  // the tick makes the sync independent of that reasoning).
  wakeup_->timer.expires_after(std::chrono::milliseconds(100));
  wakeup_->timer.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    const bool now_connected = store_->connected();
    if (now_connected) store_seen_up_at_ = monotonic_now();
    if (now_connected != connected_.exchange(now_connected)) {
      if (now_connected)
        spdlog::info("flow store: connected to {}", options_.redis.describe());
      else
        spdlog::warn("flow store: disconnected from {}; new flows are not recoverable until it is back",
                     options_.redis.describe());
    }
    drain();
    schedule_tick();
  });
}

void FlowSync::arm_wakeup() {
  wakeup_->descriptor.async_wait(
      boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
        if (ec) return;
        uint64_t count = 0;
        [[maybe_unused]] auto n = read(wakeup_->descriptor.native_handle(), &count, sizeof count);
        signaled_.store(false, std::memory_order_release);
        drain();
        arm_wakeup();
      });
}

bool FlowSync::store_down_for_long() const {
  // Not connected, and not for a reconnect in progress: a start (or a drop) more than a
  // connect timeout ago. A restarted relay's first lookups wait for the first connect.
  return !store_->connected() && monotonic_now() - store_seen_up_at_ > kStoreDownAfter;
}

void FlowSync::drain() {
  put_batch_.clear();
  for (auto& channel_ptr : channels_) {
    FlowSyncChannel* channel = channel_ptr.get();
    channel->requests_.consume_all([&](const FlowSyncRequest& r) {
      if (r.op == FlowSyncRequest::Op::put) {
        put_batch_.push_back(FlowEntry{r.key, to_flow_record(r.role, r.endpoint_id, r.via)});
        return;
      }
      counters_.lookups.add();
      if (store_down_for_long()) {
        // A store down for longer than a connect takes answers nothing: say so now rather
        // than hold the flow's packets for the lookup timeout (the flow comes back with its
        // next STUN check, as without a store).
        counters_.lookups_failed.add();
        FlowLookupReply reply = to_lookup_reply(r.key, std::nullopt);
        reply.store_reachable = false;
        if (!channel->replies_.push(reply)) channel->replies_dropped.add();
        if (channel->wake_replies_) channel->wake_replies_();
        return;
      }
      store_->get(r.key, [this, channel, key = r.key](std::optional<FlowRecord> record) {
        FlowLookupReply reply = to_lookup_reply(key, record);
        reply.store_reachable = record.has_value() || store_->connected();
        if (record)
          counters_.lookups_found.add();
        else if (reply.store_reachable)
          counters_.lookups_missing.add();
        else
          counters_.lookups_failed.add();
        if (!channel->replies_.push(reply)) channel->replies_dropped.add();
        if (channel->wake_replies_) channel->wake_replies_();
      });
    });
  }
  if (!put_batch_.empty()) {
    // One pipelined write; when Redis is down the store counts the loss and the next
    // refresh writes the flow again.
    counters_.puts.add(put_batch_.size());
    store_->put_many(put_batch_, options_.ttl);
  }
}

}  // namespace rtce
