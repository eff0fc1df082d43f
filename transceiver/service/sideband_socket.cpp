// sideband_socket.cpp — see sideband_socket.h.
#include "sideband_socket.h"

#include <spdlog/spdlog.h>

#include "clock.h"
#include "media_worker.h"

namespace rtce {

namespace {
// RFC 6455 §7.4.1.
constexpr uint16_t kNormalClosure = 1000;
constexpr uint16_t kPolicyViolation = 1008;
constexpr uint16_t kTryAgainLater = 1013;
}  // namespace

SidebandSocket::SidebandSocket(HttpServer& http, MediaWorker& worker, std::string session_id,
                               SidebandSocketStats& stats)
    : http_(http), worker_(worker), session_id_(std::move(session_id)), stats_(stats) {}

WebSocketHandlers SidebandSocket::handlers(EventSource id, size_t max_message_bytes, int idle_timeout_s) {
  id_ = id;
  WebSocketHandlers h;
  auto self = shared_from_this();
  h.on_open = [self](std::shared_ptr<WebSocketConnection> connection) {
    self->opened(std::move(connection));
  };
  h.on_text = [self](std::string text) { self->received(std::move(text)); };
  h.on_closed = [self](uint16_t, std::string_view) { self->closed(); };
  h.max_message_bytes = max_message_bytes;
  h.idle_timeout_s = idle_timeout_s;
  return h;
}

void SidebandSocket::send_text(std::string_view json_text) {
  http_.post([self = shared_from_this(), text = std::string(json_text)]() mutable {
    self->deliver(std::move(text));
  });
}

void SidebandSocket::close(std::string_view reason) {
  http_.post([self = shared_from_this(), reason = std::string(reason)]() mutable {
    // The call is over: it has forgotten this link already, so no detach goes back.
    self->call_closed_ = true;
    if (!self->closing_) self->close_now(kNormalClosure, "call ended: " + reason);
  });
}

void SidebandSocket::opened(std::shared_ptr<WebSocketConnection> connection) {
  stats_.opened.fetch_add(1, std::memory_order_relaxed);
  connection_ = std::move(connection);
  for (auto& text : pending_) connection_->send_text(std::move(text));
  pending_.clear();
  // Closed before the handshake ended (the call's end, a backlog): say so now.
  if (closing_) connection_->close(close_code_, close_reason_);
}

void SidebandSocket::deliver(std::string text) {
  if (!closing_) {
    if (connection_) return connection_->send_text(std::move(text));
    if (pending_.size() < kMaxPending) return pending_.push_back(std::move(text));
    stats_.closed_backlog.fetch_add(1, std::memory_order_relaxed);
    close_now(kTryAgainLater, "too many events waited for the handshake");
  }
  if (call_closed_) return;  // nothing comes after the call's end
  give_back(std::move(text));
}

void SidebandSocket::give_back(std::string text) {
  // The socket is closing and the call has not heard yet: the call keeps it for the next
  // sideband, as one of the events this one missed.
  worker_.post([worker = &worker_, id = session_id_, sideband = id_, text = std::move(text)]() mutable {
    worker->with_live_session(id, [&](WorkerSession& session, Nanos now) {
      session.call().on_sideband_undelivered(sideband, std::move(text), now);
    });
  });
}

void SidebandSocket::received(std::string text) {
  if (closing_) return;
  if (!incoming_.take(monotonic_now())) {
    stats_.closed_flood.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("sideband on call rtc_{}: more than {} messages/s, closed", session_id_, kMessagesPerSecond);
    return close_now(kPolicyViolation, "too many messages");
  }
  worker_.post([worker = &worker_, id = session_id_, sideband = id_, text = std::move(text)] {
    worker->with_live_session(id, [&](WorkerSession& session, Nanos now) {
      session.call().on_sideband_message(sideband, text, now);
    });
  });
}

void SidebandSocket::closed() {
  stats_.closed.fetch_add(1, std::memory_order_relaxed);
  connection_.reset();
  pending_.clear();
  closing_ = true;
  if (call_closed_) return;  // the call closed it and forgot it already
  worker_.post([worker = &worker_, id = session_id_, sideband = id_] {
    worker->with_live_session(
        id, [&](WorkerSession& session, Nanos now) { session.call().detach_sideband(sideband, now); });
  });
}

void SidebandSocket::close_now(uint16_t code, std::string reason) {
  closing_ = true;
  if (connection_) return connection_->close(code, std::move(reason));
  // Before the handshake: what waited for it is kept (the call's last events, its end), and
  // opened() closes once they are sent.
  close_code_ = code;
  close_reason_ = std::move(reason);
}

}  // namespace rtce
