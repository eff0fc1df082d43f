// call_forwarder.h — a request for a call that another transceiver pod owns, passed to that
// pod (session_id.h names the owner, the registry its signaling address): GET, PATCH, DELETE
// and hangup as one HTTP exchange whose answer goes back as it came, and the sideband
// WebSocket as a WebSocket to the owner whose messages are copied both ways. The owner checks
// the keys and the ownership itself; a forwarded request carries kForwardedHeader and is never
// forwarded again (no loops whatever the registry says). One thread of its own, so a slow
// owner never holds the HTTP thread.
#pragma once

#include <atomic>
#include <memory>
#include <string_view>
#include <thread>

#include "clock.h"
#include "http_server.h"
#include "net_address.h"

namespace rtce {

inline constexpr std::string_view kForwardedHeader = "rtcedge-forwarded";
// The Host the client sent, on a forwarded HTTP exchange (the owner sees its own address as Host).
inline constexpr std::string_view kForwardedHostHeader = "x-forwarded-host";

class CallForwarder {
 public:
  struct Stats {
    std::atomic<uint64_t> requests{0};           // HTTP exchanges forwarded
    std::atomic<uint64_t> websockets{0};         // sideband WebSockets bridged to their owner
    std::atomic<uint64_t> owner_unreachable{0};  // the owner did not answer (connect, timeout, reset)
  };

  // `timeout` bounds a whole HTTP exchange and a WebSocket's connect + handshake.
  explicit CallForwarder(Nanos timeout);
  ~CallForwarder();
  CallForwarder(const CallForwarder&) = delete;
  CallForwarder& operator=(const CallForwarder&) = delete;

  // Calls respond exactly once, from the forwarder's thread: the owner's answer, or 502
  // (owner_unreachable, JSON) when it gave none. A request with websocket_upgrade is bridged.
  void forward(const HttpRequest& request, const SocketAddress& owner, HttpServer::Responder respond);

  const Stats& stats() const { return stats_; }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  Stats stats_;
};

}  // namespace rtce
