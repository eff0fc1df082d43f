// redis_cluster_client.cpp — the Redis Cluster client: the key slot (CRC16/XMODEM), the
// slot map from CLUSTER SLOTS, routing with MOVED / ASK / TRYAGAIN / CLUSTERDOWN followed,
// per-master connections kept across map reloads, and the moving subscriber.
#include "redis_cluster_client.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>
#include <tuple>

namespace rtce {

namespace asio = boost::asio;

namespace {

constexpr uint16_t kNoNode = 0xFFFF;
// Map reads are coalesced and at least this far apart, so a burst of MOVED replies (a
// resharding seen by thousands of commands) costs one CLUSTER SLOTS.
constexpr Nanos kMinRefreshGap = 100'000'000;
// A quiet client still notices failovers and resharding that sent it no MOVED.
constexpr Nanos kRefreshInterval = 5'000'000'000;
// A master whose connection has been down this long makes the map be read again every
// kDegradedRefreshGap from the other nodes, until the map names a master that answers
// (a replica promoted after the cluster's node timeout).
constexpr Nanos kDownGrace = 150'000'000;
constexpr Nanos kDegradedRefreshGap = 250'000'000;
constexpr auto kTickPeriod = std::chrono::milliseconds(50);
// TRYAGAIN (a multi-key command during a migration) and CLUSTERDOWN (a master failed and
// its replica is not promoted yet) are retried after 50, 100, 200, 400 ms: ~1.5 s in all,
// about what an election takes after the failure is detected.
constexpr Nanos kRetryDelay = 50'000'000;

Nanos to_nanos(Millis ms) { return static_cast<Nanos>(ms.count()) * 1'000'000; }

// CRC16/XMODEM (poly 0x1021, init 0, no reflection), the checksum Redis Cluster uses.
bool node_less(const RedisNode& a, const RedisNode& b) {
  return std::tie(a.host, a.port) < std::tie(b.host, b.port);
}

}  // namespace

RedisClusterClient::RedisClusterClient(asio::io_context& io, RedisOptions options, SyncCounters& counters)
    : io_(io), options_(std::move(options)), counters_(counters), tick_timer_(io), refresh_timer_(io) {
  if (options_.nodes.empty()) options_.nodes.push_back(RedisNode{options_.host, options_.port});
  slots_.fill(kNoNode);
}

RedisClusterClient::~RedisClusterClient() {
  life_.reset();
  tick_timer_.cancel();
  refresh_timer_.cancel();
  // Connections are destroyed with this object: none of their callbacks runs afterwards.
}

void RedisClusterClient::start() {
  if (started_) return;
  started_ = true;
  request_refresh();
  if (!channel_.empty()) ensure_subscriber();
  arm_tick();
}

bool RedisClusterClient::connected() const { return map_known_ && any_connected_primary() != nullptr; }

size_t RedisClusterClient::pending() const {
  size_t total = waiting_.size() + retrying_;
  for (const auto& node : nodes_) total += node->connection->pending();
  for (const auto& connection : retired_) total += connection->pending();
  return total;
}

std::optional<RedisNode> RedisClusterClient::owner_of_slot(uint16_t slot) const {
  const Node* node = target_of(slot);
  if (node == nullptr) return std::nullopt;
  return node->address;
}

std::optional<RedisNode> RedisClusterClient::subscriber_node() const { return subscriber_node_; }

// ---- nodes ----

RedisClusterClient::Node* RedisClusterClient::find_node(const RedisNode& address) const {
  for (const auto& node : nodes_) {
    if (node->address == address) return node.get();
  }
  return nullptr;
}

std::unique_ptr<RedisConnection> RedisClusterClient::make_connection(const RedisNode& address) {
  auto connection = std::make_unique<RedisConnection>(io_, options_.for_node(address), counters_);
  connection->on_connected([this, raw = connection.get()] { node_connected(raw); });
  connection->start();
  return connection;
}

RedisClusterClient::Node& RedisClusterClient::ensure_node(const RedisNode& address) {
  if (Node* node = find_node(address)) return *node;
  auto node = std::make_unique<Node>();
  node->address = address;
  node->connection = make_connection(address);
  nodes_.push_back(std::move(node));
  return *nodes_.back();
}

void RedisClusterClient::retire(std::unique_ptr<RedisConnection> connection) {
  if (!connection) return;
  connection->on_connected({});
  // Destroying a connection would drop the handlers of what it has in flight (and it may be
  // the one whose reply is being handled): it is kept until its last command completes or
  // times out, then the tick frees it.
  retired_.push_back(std::move(connection));
}

RedisClusterClient::Node* RedisClusterClient::target_of(int32_t slot) const {
  if (slot < 0) return any_connected_primary();
  const uint16_t index = slots_[static_cast<size_t>(slot)];
  return index == kNoNode ? nullptr : nodes_[index].get();
}

RedisClusterClient::Node* RedisClusterClient::any_connected_primary() const {
  // Keyless commands (PUBLISH, PING) may go anywhere: the first master that is up, starting
  // from a rotating index so that one node does not take them all.
  const size_t count = sorted_primaries_.size();
  for (size_t i = 0; i < count; ++i) {
    Node* node = sorted_primaries_[(rotation_ + i) % count];
    if (node->connection->connected()) return node;
  }
  return nullptr;
}

void RedisClusterClient::node_connected(RedisConnection* connection) {
  for (const auto& node : nodes_) {
    if (node->connection.get() == connection) node->down_since = 0;
  }
  flush_waiting();
  if (on_connected_) on_connected_();
}

// ---- commands ----

bool RedisClusterClient::accept_one(ReplyHandler& handler) {
  if (pending() < options_.max_pending) return true;
  counters_.dropped.add();
  fail_later(std::move(handler), SyncStatus::kDropped);
  return false;
}

bool RedisClusterClient::command(std::span<const std::string_view> args, ReplyHandler handler) {
  if (!accept_one(handler)) return false;
  Request request;
  // The encoded form is kept until the final reply: a redirect resends it, and the
  // caller's argument views are gone by then.
  encode_redis_command(args, request.resp);
  request.handler = std::move(handler);
  request.deadline = monotonic_now() + to_nanos(options_.command_timeout);
  const std::string_view key = routing_key(args);
  request.slot = key.empty() ? -1 : redis_key_slot(key);
  dispatch(std::move(request));
  return true;
}

// Each entry goes out as its own command with an internal handler rather than as one
// send_batch per node: a batch has no handlers, so the MOVED/ASK replies its entries get
// while slots move (a resharding, a failover the map has not caught up with) would be
// lost, and a flow record written then is exactly what a relay needs moments later. The
// cost is a copy of the entry and one handler per write, small next to the write rate
// (one SET per new flow, refreshes bounded per worker); commands issued in one turn of the
// loop still leave in one write per node, so the pipelining stays.
size_t RedisClusterClient::send_batch(std::span<const RedisBatchCommand> commands) {
  const size_t total = pending();
  const size_t room = options_.max_pending - std::min(options_.max_pending, total);
  const size_t accepted = std::min(room, commands.size());
  if (accepted < commands.size()) counters_.dropped.add(commands.size() - accepted);
  const Nanos deadline = monotonic_now() + to_nanos(options_.command_timeout);
  for (size_t i = 0; i < accepted; ++i) {
    Request request;
    request.resp.assign(commands[i].resp);
    request.deadline = deadline;
    request.slot = commands[i].key.empty() ? -1 : redis_key_slot(commands[i].key);
    dispatch(std::move(request));
  }
  return accepted;
}

bool RedisClusterClient::command_on_primary(size_t index, std::span<const std::string_view> args,
                                            ReplyHandler handler) {
  if (index >= sorted_primaries_.size()) {
    fail_later(std::move(handler), SyncStatus::kDisconnected);
    return false;
  }
  if (!accept_one(handler)) return false;
  return sorted_primaries_[index]->connection->command(args, std::move(handler));
}

void RedisClusterClient::dispatch(Request&& request) {
  // Sent only to a master whose connection is up: a command for a master that is down
  // waits here, not in that connection's queue, so that the next map (the promoted
  // replica) takes it. Per node the order holds: while its connection is down everything
  // for it waits, and the connect hook sends what waited before anything newer.
  Node* node = map_known_ ? target_of(request.slot) : nullptr;
  if (node != nullptr && node->connection->connected()) {
    send_to(*node, std::move(request), false);
    return;
  }
  if (map_known_ && node == nullptr && request.slot >= 0) request_refresh();  // a slot without owner
  waiting_.push_back(std::move(request));
}

void RedisClusterClient::flush_waiting() {
  if (waiting_.empty() || !map_known_) return;
  std::deque<Request> still;
  std::deque<Request> ready;
  ready.swap(waiting_);
  for (auto& request : ready) {
    Node* node = target_of(request.slot);
    if (node != nullptr && node->connection->connected()) {
      send_to(*node, std::move(request), false);
    } else {
      still.push_back(std::move(request));
    }
  }
  // Anything send_to put back (it never does today) stays behind the older commands.
  for (auto& request : waiting_) still.push_back(std::move(request));
  waiting_.swap(still);
}

void RedisClusterClient::expire_waiting(Nanos now) {
  // Commands wait in arrival order with one timeout, so the front expires first (a
  // redirected command re-enters with its first deadline; it is at most one pass late).
  while (!waiting_.empty() && waiting_.front().deadline <= now) {
    Request expired = std::move(waiting_.front());
    waiting_.pop_front();
    counters_.timeouts.add();
    if (expired.handler) expired.handler(SyncStatus::kTimeout, nullptr);
  }
}

void RedisClusterClient::send_to(Node& node, Request&& request, bool asking) {
  // The arguments are views into a reused copy of the text: the request itself moves into
  // the handler below (and a short string's bytes move with it).
  send_text_.assign(request.resp);
  if (!decode_redis_command(send_text_, args_scratch_)) {
    counters_.errors.add();
    if (request.handler) fail_later(std::move(request.handler), SyncStatus::kError);
    return;
  }
  RedisConnection& connection = *node.connection;
  if (asking) {
    static constexpr std::string_view kAsking[] = {"ASKING"};
    connection.command(kAsking, {});  // pipelined right before the command; its OK is not needed
  }
  connection.command(args_scratch_, [this, from = node.address, request = std::move(request)](
                                        SyncStatus status, const redisReply* reply) mutable {
    on_reply(std::move(request), from, status, reply);
  });
}

void RedisClusterClient::on_reply(Request&& request, const RedisNode& from, SyncStatus status,
                                  const redisReply* reply) {
  if (status == SyncStatus::kError && reply != nullptr && request.attempts < kMaxRedirects) {
    const std::string_view error = reply_string(reply);
    if (auto redirect = parse_redis_redirect(error)) {
      ++request.attempts;
      counters_.redirects.add();
      if (redirect->node.host.empty()) redirect->node.host = from.host;
      Node& target = ensure_node(redirect->node);
      if (redirect->kind == RedisRedirect::Kind::kAsk) {
        // One key of a slot being migrated: ask the importing node this once; the map stays.
        send_to(target, std::move(request), true);
        return;
      }
      // The slot has a new owner: believe it now for this slot, and read the whole map
      // soon (a MOVED rarely comes alone).
      target.primary = true;
      const auto index =
          static_cast<size_t>(std::find_if(nodes_.begin(), nodes_.end(),
                                           [&](const auto& node) { return node.get() == &target; }) -
                              nodes_.begin());
      slots_[redirect->slot] = static_cast<uint16_t>(index);
      request_refresh();
      // The server's slot wins (a keyless command redirected, or a key routed otherwise).
      request.slot = redirect->slot;
      dispatch(std::move(request));
      return;
    }
    if (error.starts_with("TRYAGAIN") || error.starts_with("CLUSTERDOWN")) {
      ++request.attempts;
      if (error.starts_with("CLUSTERDOWN")) request_refresh();
      retry_later(std::move(request));
      return;
    }
  }
  // A lost connection may be a master that died: the map is read again (rate-limited).
  if (status == SyncStatus::kDisconnected || status == SyncStatus::kTimeout) request_refresh();
  if (request.handler) request.handler(status, reply);
}

void RedisClusterClient::retry_later(Request&& request) {
  auto timer = std::make_shared<asio::steady_timer>(io_);
  const Nanos delay = kRetryDelay << std::min<int>(request.attempts - 1, 4);
  timer->expires_after(std::chrono::nanoseconds(delay));
  ++retrying_;
  timer->async_wait([this, timer, life = std::weak_ptr<int>(life_),
                     request = std::move(request)](const boost::system::error_code&) mutable {
    if (life.expired()) return;
    --retrying_;
    dispatch(std::move(request));
  });
}

void RedisClusterClient::fail_later(ReplyHandler handler, SyncStatus status) {
  if (!handler) return;
  asio::post(io_, [handler = std::move(handler), status, life = std::weak_ptr<int>(life_)] {
    if (!life.expired()) handler(status, nullptr);
  });
}

// ---- the slot map ----

std::vector<RedisNode> RedisClusterClient::candidates() const {
  std::vector<RedisNode> out = known_nodes_;
  for (const auto& seed : options_.nodes) {
    if (std::find(out.begin(), out.end(), seed) == out.end()) out.push_back(seed);
  }
  return out;
}

RedisConnection& RedisClusterClient::probe() {
  if (!probe_) {
    // Reads the map when no master connection is up (the start, every master down): each
    // connect goes to the next known node or seed, replicas included, so one that is down
    // costs one connect attempt.
    probe_ = std::make_unique<RedisConnection>(io_, options_.for_node(options_.nodes.front()), counters_);
    probe_->resolve_with([this](std::function<void(std::optional<RedisNode>)> answer) {
      const auto nodes = candidates();
      answer(nodes[probe_rotation_++ % nodes.size()]);
    });
    probe_->start();
  }
  return *probe_;
}

void RedisClusterClient::request_refresh() {
  if (!started_) return;
  if (refresh_in_flight_) {
    refresh_again_ = true;
    return;
  }
  if (refresh_timer_armed_) return;
  const Nanos now = monotonic_now();
  if (last_refresh_ != 0 && now - last_refresh_ < kMinRefreshGap) {
    refresh_timer_armed_ = true;
    refresh_timer_.expires_after(std::chrono::nanoseconds(kMinRefreshGap - (now - last_refresh_)));
    refresh_timer_.async_wait([this, life = std::weak_ptr<int>(life_)](const boost::system::error_code& ec) {
      if (ec || life.expired()) return;
      refresh_timer_armed_ = false;
      start_refresh();
    });
    return;
  }
  start_refresh();
}

void RedisClusterClient::start_refresh() {
  if (refresh_in_flight_) return;
  refresh_in_flight_ = true;
  refresh_again_ = false;
  last_refresh_ = monotonic_now();
  ++rotation_;  // a master that failed to answer is not asked first next time
  Node* node = any_connected_primary();
  RedisConnection* connection = node != nullptr ? node->connection.get() : &probe();
  static constexpr std::string_view kClusterSlots[] = {"CLUSTER", "SLOTS"};
  connection->command(kClusterSlots, [this, connection](SyncStatus status, const redisReply* reply) {
    refresh_in_flight_ = false;
    std::optional<std::vector<RedisSlotRange>> ranges;
    if (status == SyncStatus::kOk) ranges = parse_cluster_slots(reply, connection->node().host);
    if (ranges && !ranges->empty()) {
      apply_map(std::move(*ranges));
    } else {
      if (status == SyncStatus::kOk) counters_.errors.add();  // not a cluster node's answer
      // The tick asks again (at once while no map is known, else as its schedule says);
      // a probe on a node that cannot answer moves on to the next.
      if (connection == probe_.get()) {
        asio::post(io_, [this, life = std::weak_ptr<int>(life_)] {
          if (!life.expired() && probe_) probe_->reconnect();  // not from inside its own callback
        });
      }
    }
    if (refresh_again_) request_refresh();
  });
}

void RedisClusterClient::apply_map(std::vector<RedisSlotRange> ranges) {
  ++map_loads_;
  std::vector<std::unique_ptr<Node>> old_nodes;
  old_nodes.swap(nodes_);
  const std::array<uint16_t, kRedisClusterSlots> old_slots = slots_;
  std::vector<RedisNode> old_owners;  // by old index, to tell whether any slot changed hands
  for (const auto& node : old_nodes) old_owners.push_back(node->address);
  const std::vector<Node*> old_primaries = sorted_primaries_;
  std::vector<RedisNode> old_primary_addresses;
  for (const Node* node : old_primaries) old_primary_addresses.push_back(node->address);

  // Connections are reused by address: a reload that changes nothing costs nothing.
  const auto take = [&](const RedisNode& address) -> uint16_t {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->address == address) return static_cast<uint16_t>(i);
    }
    std::unique_ptr<Node> node;
    for (auto& old : old_nodes) {
      if (old && old->address == address) node = std::move(old);
    }
    if (!node) {
      node = std::make_unique<Node>();
      node->address = address;
      node->connection = make_connection(address);
    }
    node->primary = true;
    nodes_.push_back(std::move(node));
    return static_cast<uint16_t>(nodes_.size() - 1);
  };
  slots_.fill(kNoNode);
  known_nodes_.clear();
  for (const auto& range : ranges) {
    const uint16_t index = take(range.master);
    std::fill(slots_.begin() + range.first, slots_.begin() + range.last + 1, index);
  }
  for (const auto& range : ranges) {
    if (std::find(known_nodes_.begin(), known_nodes_.end(), range.master) == known_nodes_.end())
      known_nodes_.push_back(range.master);
  }
  for (const auto& range : ranges) {
    for (const auto& replica : range.replicas) {
      if (std::find(known_nodes_.begin(), known_nodes_.end(), replica) == known_nodes_.end())
        known_nodes_.push_back(replica);
    }
  }
  // Nodes that are no longer masters (a demoted master, a node that left, an ASK target):
  // only masters get commands, so their connections go.
  for (auto& old : old_nodes) {
    if (old) retire(std::move(old->connection));
  }

  sorted_primaries_.clear();
  for (const auto& node : nodes_) sorted_primaries_.push_back(node.get());
  std::sort(sorted_primaries_.begin(), sorted_primaries_.end(),
            [](const Node* a, const Node* b) { return node_less(a->address, b->address); });

  bool changed = !map_known_ || sorted_primaries_.size() != old_primary_addresses.size();
  for (size_t i = 0; !changed && i < sorted_primaries_.size(); ++i)
    changed = !(sorted_primaries_[i]->address == old_primary_addresses[i]);
  for (size_t slot = 0; !changed && slot < kRedisClusterSlots; ++slot) {
    const uint16_t before = old_slots[slot];
    const uint16_t after = slots_[slot];
    if ((before == kNoNode) != (after == kNoNode))
      changed = true;
    else if (before != kNoNode && !(old_owners[before] == nodes_[after]->address))
      changed = true;
  }
  map_known_ = true;
  flush_waiting();
  if (changed && on_connected_) on_connected_();
}

// ---- the subscriber ----

void RedisClusterClient::subscribe(std::string channel, MessageHandler on_message) {
  channel_ = std::move(channel);
  on_message_ = std::move(on_message);
  if (started_) ensure_subscriber();
}

void RedisClusterClient::ensure_subscriber() {
  retire(std::move(subscriber_));
  subscriber_node_.reset();
  subscriber_ = std::make_unique<RedisConnection>(io_, options_.for_node(options_.nodes.front()), counters_);
  subscriber_->resolve_with([this](std::function<void(std::optional<RedisNode>)> answer) {
    resolve_subscriber(std::move(answer));
  });
  subscriber_->subscribe(channel_, on_message_);
  subscriber_->start();
}

void RedisClusterClient::resolve_subscriber(std::function<void(std::optional<RedisNode>)> answer) {
  // Asked before every connect of the subscriber. Asked again means the last node dropped
  // the subscription or refused it: another node is taken (cluster pub/sub reaches every
  // node), a master whose command connection is up when there is one.
  const std::optional<RedisNode> avoid = subscriber_node_;
  const auto acceptable = [&](const RedisNode& node) { return !avoid || !(node == *avoid); };
  std::optional<RedisNode> pick;
  for (size_t i = 0; i < sorted_primaries_.size() && !pick; ++i) {
    const Node* node = sorted_primaries_[(subscriber_rotation_ + i) % sorted_primaries_.size()];
    if (node->connection->connected() && acceptable(node->address)) pick = node->address;
  }
  if (!pick) {
    const auto nodes = candidates();
    for (size_t i = 0; i < nodes.size() && !pick; ++i) {
      const RedisNode& node = nodes[(subscriber_rotation_ + i) % nodes.size()];
      if (acceptable(node) || nodes.size() == 1) pick = node;
    }
    ++subscriber_rotation_;
  }
  if (!pick) pick = options_.nodes.front();
  subscriber_node_ = pick;
  answer(*pick);
}

// ---- the tick ----

void RedisClusterClient::arm_tick() {
  tick_timer_.expires_after(kTickPeriod);
  tick_timer_.async_wait([this, life = std::weak_ptr<int>(life_)](const boost::system::error_code& ec) {
    if (ec || life.expired()) return;
    tick();
    if (!life.expired()) arm_tick();
  });
}

void RedisClusterClient::tick() {
  const Nanos now = monotonic_now();
  expire_waiting(now);

  bool degraded = false;
  for (const auto& node : nodes_) {
    if (!node->primary) continue;
    if (node->connection->connected()) {
      node->down_since = 0;
    } else if (node->down_since == 0) {
      node->down_since = now;
    } else if (now - node->down_since >= kDownGrace) {
      degraded = true;
    }
  }
  if (!map_known_ || (degraded && now - last_refresh_ >= kDegradedRefreshGap) ||
      now - last_refresh_ >= kRefreshInterval) {
    request_refresh();
  }

  std::erase_if(retired_, [](const auto& connection) { return connection->pending() == 0; });
  // The probe is only needed while no master answers; an idle one is closed.
  if (probe_ && !refresh_in_flight_ && probe_->pending() == 0 && any_connected_primary() != nullptr)
    probe_.reset();
}

}  // namespace rtce
