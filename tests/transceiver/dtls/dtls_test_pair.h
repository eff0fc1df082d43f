// dtls_test_pair.h — two DtlsTransports (client and server) wired back to back through
// in-memory queues, driven by the fake clock. Tests drop, reorder or inject datagrams by
// hooking `filter` and reading what each side sent, failed with or received.
#pragma once

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fake_wall_clock.h"
#include "transceiver/dtls/dtls_transport.h"

namespace rtce::testing {

struct DtlsEndpoint {
  std::unique_ptr<DtlsTransport> transport;
  std::deque<std::vector<uint8_t>> outbox;  // sent, not yet delivered
  std::vector<size_t> sent_sizes;           // every datagram it ever sent
  std::optional<SrtpKeys> keys;
  std::string failure;
  int failed_calls = 0;
  int closed_calls = 0;
  std::vector<std::vector<uint8_t>> received_application_data;

  size_t largest_datagram() const {
    return sent_sizes.empty() ? 0 : *std::max_element(sent_sizes.begin(), sent_sizes.end());
  }
};

class DtlsPair {
 public:
  enum class Side { client, server };
  // Return false to drop a datagram `from` one side; `index` counts that side's datagrams.
  std::function<bool(Side from, size_t index, const std::vector<uint8_t>&)> filter;

  DtlsPair(std::shared_ptr<DtlsContext> client_context, std::shared_ptr<DtlsContext> server_context,
           DtlsTransport::Config client_config = {}, DtlsTransport::Config server_config = {},
           std::optional<std::vector<uint8_t>> client_expects = std::nullopt,
           std::optional<std::vector<uint8_t>> server_expects = std::nullopt) {
    client.transport = make(client_context, DtlsTransport::Role::client,
                            client_expects.value_or(server_context->fingerprint_sha256_bytes()), client,
                            std::move(client_config));
    server.transport = make(server_context, DtlsTransport::Role::server,
                            server_expects.value_or(client_context->fingerprint_sha256_bytes()), server,
                            std::move(server_config));
  }

  void start() {
    set_fake_now(now);
    server.transport->start(now);
    client.transport->start(now);
  }

  // Delivers queued datagrams until both sides are quiet; returns how many were delivered.
  size_t pump() {
    size_t delivered = 0;
    for (int round = 0; round < 1000 && (!client.outbox.empty() || !server.outbox.empty()); ++round) {
      delivered += deliver(client, server, Side::client);
      delivered += deliver(server, client, Side::server);
    }
    return delivered;
  }

  // Moves the clock to the earliest pending timer of either side and fires both timers.
  bool advance_to_next_timer() {
    std::optional<Nanos> next;
    for (DtlsEndpoint* e : {&client, &server}) {
      if (auto t = e->transport->next_timeout(now); t && (!next || *t < *next)) next = t;
    }
    if (!next) return false;
    now = std::max(now, *next);
    set_fake_now(now);
    client.transport->on_timer(now);
    server.transport->on_timer(now);
    return true;
  }

  // Pumps and fires timers until `done` holds or nothing is left to do.
  bool run_until(const std::function<bool()>& done, int max_timer_steps = 64) {
    for (int step = 0; step <= max_timer_steps; ++step) {
      pump();
      if (done()) return true;
      if (!advance_to_next_timer()) return done();
    }
    return done();
  }

  bool both_connected() const {
    return client.transport->state() == DtlsTransport::State::connected &&
           server.transport->state() == DtlsTransport::State::connected;
  }

  void inject(Side to, std::vector<uint8_t> datagram) {
    set_fake_now(now);
    (to == Side::client ? client : server).transport->handle_datagram(datagram, now);
  }

  DtlsEndpoint client, server;
  Nanos now = 1'000'000'000;
  size_t sent_by_client = 0, sent_by_server = 0;

 private:
  static std::unique_ptr<DtlsTransport> make(std::shared_ptr<DtlsContext> context, DtlsTransport::Role role,
                                             std::vector<uint8_t> expected, DtlsEndpoint& endpoint,
                                             DtlsTransport::Config config) {
    DtlsTransport::Callbacks callbacks;
    callbacks.send = [&endpoint](std::span<const uint8_t> d) {
      endpoint.sent_sizes.push_back(d.size());
      endpoint.outbox.emplace_back(d.begin(), d.end());
    };
    callbacks.on_connected = [&endpoint](const SrtpKeys& keys) { endpoint.keys = keys; };
    callbacks.on_failed = [&endpoint](std::string_view reason) {
      endpoint.failure = std::string(reason);
      endpoint.failed_calls++;
    };
    callbacks.on_closed = [&endpoint] { endpoint.closed_calls++; };
    callbacks.on_application_data = [&endpoint](std::span<const uint8_t> data) {
      endpoint.received_application_data.emplace_back(data.begin(), data.end());
    };
    return std::make_unique<DtlsTransport>(std::move(context), role, std::move(expected),
                                           std::move(callbacks), std::move(config));
  }

  size_t deliver(DtlsEndpoint& from, DtlsEndpoint& to, Side side) {
    size_t delivered = 0;
    std::deque<std::vector<uint8_t>> batch;
    batch.swap(from.outbox);
    set_fake_now(now);
    for (auto& datagram : batch) {
      size_t index = side == Side::client ? sent_by_client++ : sent_by_server++;
      if (filter && !filter(side, index, datagram)) continue;
      to.transport->handle_datagram(datagram, now);
      ++delivered;
    }
    return delivered;
  }
};

}  // namespace rtce::testing
