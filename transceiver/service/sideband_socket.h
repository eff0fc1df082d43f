// sideband_socket.h — one app server's sideband WebSocket on a Realtime call
// (`GET /v1/realtime?call_id=rtc_…`), between the two threads it spans: the HTTP thread owns
// the socket, the media worker owns the call. The Call sees a SidebandLink; what it sends hops
// to the HTTP thread (and waits there, bounded, until the handshake is done); what the app
// server sends hops to the worker, rate-limited here so that a flood closes its own socket
// instead of filling the worker's queue. Either side ending ends the other: the call's end
// closes the socket, the socket's close detaches it from the call, and what the call sent
// before it heard of the close goes back to it, kept for the next sideband as missed.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>

#include "call/call.h"
#include "http_server.h"
#include "token_bucket.h"

namespace rtce {

class MediaWorker;

// Read by /metrics scrapes; written on the HTTP thread.
struct SidebandSocketStats {
  std::atomic<uint64_t> opened{0};          // handshakes completed
  std::atomic<uint64_t> closed{0};          // sockets closed, every reason
  std::atomic<uint64_t> closed_flood{0};    // the app server sent faster than kMessagesPerSecond
  std::atomic<uint64_t> closed_backlog{0};  // more than kMaxPending events waited for the handshake
};

class SidebandSocket final : public SidebandLink, public std::enable_shared_from_this<SidebandSocket> {
 public:
  // Incoming messages: a burst, then a steady rate (a sideband sends a few events per turn).
  static constexpr double kMessageBurst = 200;
  static constexpr double kMessagesPerSecond = 50;
  // Events waiting for the handshake to finish (it takes one round trip).
  static constexpr size_t kMaxPending = 1024;

  SidebandSocket(HttpServer& http, MediaWorker& worker, std::string session_id, SidebandSocketStats& stats);

  // The handlers to accept the WebSocket with, once the call attached this link as `id`.
  WebSocketHandlers handlers(EventSource id, size_t max_message_bytes, int idle_timeout_s);

  // SidebandLink: from the worker thread.
  void send_text(std::string_view json_text) override;
  void close(std::string_view reason) override;

 private:
  // HTTP thread.
  void opened(std::shared_ptr<WebSocketConnection> connection);
  void received(std::string text);
  void closed();
  void deliver(std::string text);
  void close_now(uint16_t code, std::string reason);
  void give_back(std::string text);

  HttpServer& http_;
  MediaWorker& worker_;
  const std::string session_id_;
  SidebandSocketStats& stats_;
  EventSource id_ = kFromBrowser;  // set by handlers()

  // HTTP thread only.
  std::shared_ptr<WebSocketConnection> connection_;
  std::deque<std::string> pending_;  // until the handshake is done
  bool call_closed_ = false;         // the call ended and forgot this link: nothing to detach
  bool closing_ = false;             // a close is under way: nothing more in either direction
  uint16_t close_code_ = 1000;       // for a close asked before the handshake ended
  std::string close_reason_;
  TokenBucket incoming_{kMessageBurst, kMessagesPerSecond};
};

}  // namespace rtce
