// websocket_backend.cpp — the WebSocket backend connection (Boost.Beast on the worker's
// io_context, over TLS for wss://): connect with a deadline, the dialect's opening message,
// one outstanding write at a time from a bounded ring that drops the oldest frame, a read
// loop that splits PCM into 20 ms frames, and a bounded close. The realtime dialect's
// framing is realtime_dialect.h; this file only moves its messages. The connection object may die with
// operations pending: the state lives in a shared Impl that pending handlers keep alive, and close() detaches
// the listener and counters so no late handler can reach them.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <type_traits>

#include "backend.h"
#include "backend_protocol.h"
#include "realtime_dialect.h"

namespace rtce {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

static_assert(std::endian::native == std::endian::little, "PCM frames go on the wire as host-order s16le");

constexpr size_t kMaxQueuedEvents = 64;
constexpr size_t kMaxOpusPacketBytes = 4000;  // RFC 6716: 120 ms of 1275-byte frames plus headers
// Realtime dialect: the smallest message limit (1 MiB of base64 is about 16 s at 24 kHz).
// Its audio goes to the listener as it arrives: the Call's playout queue holds what the
// server sends ahead of real time and plays it on the Call's frame clock.
constexpr size_t kRealtimeMinMessageBytes = 1 << 20;

// The outbound audio queue: a fixed ring of byte buffers reused in place, so that queueing
// a frame copies it without allocating once every slot has grown to frame size.
class FrameRing {
 public:
  FrameRing(size_t capacity, size_t reserve_bytes) : slots_(std::max<size_t>(capacity, 1)) {
    for (auto& slot : slots_) slot.reserve(reserve_bytes);
  }

  // Returns true when the oldest frame was dropped to make room.
  bool push(std::span<const uint8_t> bytes) {
    bool dropped = false;
    if (size_ == slots_.size()) {
      head_ = (head_ + 1) % slots_.size();
      --size_;
      dropped = true;
    }
    slots_[(head_ + size_) % slots_.size()].assign(bytes.begin(), bytes.end());
    ++size_;
    return dropped;
  }

  // Moves the oldest frame into `out` and gives the ring out's old buffer in exchange.
  void pop_into(std::vector<uint8_t>& out) {
    out.swap(slots_[head_]);
    head_ = (head_ + 1) % slots_.size();
    --size_;
  }

  bool empty() const { return size_ == 0; }
  void clear() { head_ = size_ = 0; }

 private:
  std::vector<std::vector<uint8_t>> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

std::chrono::nanoseconds to_duration(Nanos nanos) { return std::chrono::nanoseconds(nanos); }

// TLS client contexts, one per CA choice and worker thread: loading the system store costs
// milliseconds, so it happens once per thread, not per call. Contexts are shared by the
// connections using them (SSL_CTX is reference counted by its streams too).
struct TlsContextResult {
  std::shared_ptr<ssl::context> context;
  std::string error;
};

TlsContextResult tls_client_context(const std::string& ca_file) {
  thread_local std::map<std::string, std::shared_ptr<ssl::context>> contexts;
  if (auto it = contexts.find(ca_file); it != contexts.end()) return {it->second, {}};
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  if (!ca_file.empty() && access(ca_file.c_str(), R_OK) != 0)
    return {nullptr, "ca_file " + ca_file + ": " + std::strerror(errno)};
  beast::error_code ec;
  if (ca_file.empty()) {
    context->set_default_verify_paths(ec);
  } else {
    context->load_verify_file(ca_file, ec);
  }
  if (ec)
    return {nullptr, (ca_file.empty() ? "system CA store: " : "ca_file " + ca_file + ": ") + ec.message()};
  contexts.emplace(ca_file, context);
  return {std::move(context), {}};
}

// One socket type per scheme; everything else about the connection is the same.
template <bool Tls>
struct StreamOf {
  using type = websocket::stream<beast::tcp_stream>;
};
template <>
struct StreamOf<true> {
  using type = websocket::stream<beast::ssl_stream<beast::tcp_stream>>;
};

template <bool Tls>
class WebSocketImpl : public std::enable_shared_from_this<WebSocketImpl<Tls>> {
  using Stream = typename StreamOf<Tls>::type;
  using std::enable_shared_from_this<WebSocketImpl<Tls>>::shared_from_this;

 public:
  WebSocketImpl(asio::io_context& io, const WebSocketBackendConfig& config, BackendSessionInfo info,
                BackendListener& listener, BackendCounters& counters,
                std::shared_ptr<ssl::context> tls_context)
      : config_(config),
        info_(std::move(info)),
        listener_(&listener),
        counters_(&counters),
        resolver_(io),
        tls_context_(std::move(tls_context)),
        ws_(make_stream(io, tls_context_.get())),
        timer_(io),
        frame_bytes_(pcm_frame_bytes(info_.sample_rate)),
        audio_(config.max_queued_frames, std::max<size_t>(frame_bytes_, 1500)),
        inbound_pcm_(frame_bytes_ / 2) {
    in_flight_.reserve(std::max<size_t>(frame_bytes_, 1500));
    if (config_.dialect == BackendDialect::realtime && frame_bytes_ != 0 && !info_.opus_passthrough) {
      realtime_.emplace(info_.sample_rate);
      // A base64 append of 20 ms at 24 kHz is 1280 characters plus 46 of JSON: it fits the
      // ring's 1500-byte slots, so queueing it does not allocate either.
      encoded_.reserve(1500);
    }
  }

  // Set up by the factory when the TLS context could not be made: the connection fails
  // asynchronously like any other connect failure.
  void start(const std::string& setup_error) {
    url_ = parse_backend_url(config_.url, info_.session_id);
    std::string reason;
    if (!url_.error.empty()) {
      reason = "invalid_url: " + url_.error;
    } else if (frame_bytes_ == 0) {
      reason = "invalid_session: sample rate " + std::to_string(info_.sample_rate);
    } else if (config_.dialect == BackendDialect::realtime && info_.opus_passthrough) {
      reason = "invalid_session: Opus passthrough needs the rtcedge dialect";
    } else if (!setup_error.empty()) {
      reason = "connect_failed: tls " + setup_error;
    }
    if (!reason.empty()) {
      // The listener must not be called from inside the factory.
      asio::post(ws_.get_executor(), [self = shared_from_this(), reason] { self->fail(reason); });
      return;
    }
    if (realtime_) {
      queue_text(realtime_->session_update(info_.session_config));
    } else {
      queue_event(session_started_event(info_));
    }
    timer_.expires_after(to_duration(config_.connect_timeout));
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && self->state_ == State::connecting) self->fail("connect_timeout");
    });
    resolver_.async_resolve(
        url_.host, url_.port,
        [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
          self->on_resolve(ec, results);
        });
  }

  void send_audio(std::span<const int16_t> pcm) {
    if (realtime_) {
      if (state_ != State::connecting && state_ != State::open) {
        if (counters_) counters_->frames_dropped_outbound.add();
        return;
      }
      if (!realtime_->encode_audio(pcm, encoded_)) return;
      queue_binary({reinterpret_cast<const uint8_t*>(encoded_.data()), encoded_.size()});
      return;
    }
    queue_binary({reinterpret_cast<const uint8_t*>(pcm.data()), pcm.size_bytes()});
  }

  void send_opus(std::span<const uint8_t> packet) {
    if (realtime_) {
      if (counters_) counters_->frames_dropped_outbound.add();
      return;
    }
    queue_binary(packet);
  }

  void send_event(const nlohmann::json& event) {
    if (state_ != State::connecting && state_ != State::open) return;
    if (realtime_) {
      // The client stopping the answer (interrupt()) must also stop what is held back here.
      const auto type = event.find("type");
      // rtcedge's own link report means nothing to a Realtime server, which would answer
      // every one with an error event.
      if (type != event.end() && *type == "session.quality") return;
      // WebRTC-only: the edge holds the output buffer (the Call cleared it); a Realtime
      // WebSocket server does not know the event and would answer it with an error.
      if (type != event.end() && *type == "output_audio_buffer.clear") return;
      queue_text(realtime_->encode_event(event));
    } else {
      queue_event(event);
    }
  }

  // A barge-in: the partial frame of the last delta no longer plays.
  void discard_output() {
    if (realtime_) realtime_->clear_pending();
  }

  void close(std::string_view reason) {
    listener_ = nullptr;
    counters_ = nullptr;
    if (state_ == State::connecting) {
      shut_down();
    } else if (state_ == State::open) {
      state_ = State::closing;
      audio_.clear();
      // The realtime dialect has no goodbye message: the close frame says it.
      if (!realtime_) {
        events_.push_back(
            session_ended_event(reason).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      }
      // Bounds the whole goodbye, including a session.ended stuck behind a stalled backend.
      timer_.expires_after(to_duration(config_.connect_timeout));
      timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (!ec) self->shut_down();
      });
      write_next();
    }
  }

 private:
  enum class State { connecting, open, closing, closed };

  static Stream make_stream(asio::io_context& io, ssl::context* tls_context) {
    if constexpr (Tls) {
      return Stream(io, *tls_context);
    } else {
      (void)tls_context;
      return Stream(io);
    }
  }

  void queue_binary(std::span<const uint8_t> bytes) {
    if (state_ == State::closing || state_ == State::closed) {
      if (counters_) counters_->frames_dropped_outbound.add();
      return;
    }
    if (bytes.empty() || bytes.size() > config_.max_message_bytes) {
      counters_->frames_dropped_outbound.add();
      return;
    }
    if (audio_.push(bytes)) counters_->frames_dropped_outbound.add();
    write_next();
  }

  void queue_event(const nlohmann::json& event) {
    queue_text(event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }

  void queue_text(std::string text) {
    // Dropping the newest keeps the opening message, which is always first in line.
    if (events_.size() >= kMaxQueuedEvents) {
      counters_->frames_dropped_outbound.add();
      return;
    }
    events_.push_back(std::move(text));
    write_next();
  }

  void on_resolve(beast::error_code ec, const tcp::resolver::results_type& results) {
    if (state_ != State::connecting) return;
    if (ec) return fail("connect_failed: resolve " + url_.host + ": " + ec.message());
    beast::get_lowest_layer(ws_).async_connect(
        results,
        [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) { self->on_connect(ec); });
  }

  void on_connect(beast::error_code ec) {
    if (state_ != State::connecting) return;
    if (ec) return fail("connect_failed: " + ec.message());
    beast::get_lowest_layer(ws_).socket().set_option(tcp::no_delay(true), ec);
    if constexpr (Tls) {
      auto& tls = ws_.next_layer();
      // RFC 6066 §3: SNI names hosts, never address literals; verification covers both.
      boost::system::error_code not_an_address;
      asio::ip::make_address(url_.host, not_an_address);
      if (not_an_address && !SSL_set_tlsext_host_name(tls.native_handle(), url_.host.c_str()))
        return fail("connect_failed: tls cannot set SNI " + url_.host);
      tls.set_verify_mode(ssl::verify_peer);
      // The stream is a member, so the callback cannot outlive this object.
      tls.set_verify_callback([this, verify = ssl::host_name_verification(url_.host)](
                                  bool preverified, ssl::verify_context& context) mutable {
        bool ok = verify(preverified, context);
        if (preverified && !ok) name_mismatch_ = true;
        return ok;
      });
      tls.async_handshake(ssl::stream_base::client,
                          [self = shared_from_this()](beast::error_code ec) { self->on_tls_handshake(ec); });
    } else {
      upgrade();
    }
  }

  void on_tls_handshake(beast::error_code ec) {
    if (state_ != State::connecting) return;
    if (ec) {
      std::string reason = "connect_failed: tls " + ec.message();
      if (name_mismatch_) {
        reason = "connect_failed: tls certificate does not name " + url_.host;
      } else if constexpr (Tls) {
        long verify = SSL_get_verify_result(ws_.next_layer().native_handle());
        if (verify != X509_V_OK) reason += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
      }
      return fail(reason);
    }
    upgrade();
  }

  void upgrade() {
    ws_.set_option(
        websocket::stream_base::decorator([headers = config_.headers](websocket::request_type& request) {
          request.set(http::field::user_agent, "rtcedge-transceiver");
          for (const auto& [name, value] : headers) request.set(name, value);
        }));
    std::string host = url_.host.find(':') == std::string::npos ? url_.host : "[" + url_.host + "]";
    if (url_.port != (Tls ? "443" : "80")) host += ":" + url_.port;
    ws_.async_handshake(upgrade_response_, host, url_.target,
                        [self = shared_from_this()](beast::error_code ec) { self->on_handshake(ec); });
  }

  void on_handshake(beast::error_code ec) {
    if (state_ != State::connecting) return;
    if (ec == websocket::error::upgrade_declined) {
      return fail("connect_failed: upgrade declined (HTTP " + std::to_string(upgrade_response_.result_int()) +
                  ")");
    }
    if (ec) return fail("connect_failed: " + ec.message());
    timer_.cancel();
    state_ = State::open;
    // From here on the websocket's own timers apply: close handshake and idle pings.
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout timeouts{};
    timeouts.handshake_timeout = to_duration(config_.connect_timeout);
    timeouts.idle_timeout =
        config_.idle_timeout > 0 ? to_duration(config_.idle_timeout) : websocket::stream_base::none();
    timeouts.keep_alive_pings = config_.idle_timeout > 0;
    ws_.set_option(timeouts);
    // Realtime servers put whole seconds of audio in one delta.
    ws_.read_message_max(realtime_ ? std::max(config_.max_message_bytes, kRealtimeMinMessageBytes)
                                   : config_.max_message_bytes);
    spdlog::info("session {}: backend connected to {}:{}{}", info_.session_id, url_.host, url_.port,
                 url_.target);
    read_next();
    write_next();
  }

  void write_next() {
    if (writing_ || (state_ != State::open && state_ != State::closing)) return;
    if (!events_.empty()) {
      // Events overtake queued audio: control messages should not wait up to a second.
      in_flight_text_ = std::move(events_.front());
      events_.pop_front();
      writing_ = true;
      in_flight_is_audio_ = false;
      ws_.text(true);
      ws_.async_write(asio::buffer(in_flight_text_),
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
    } else if (!audio_.empty()) {
      audio_.pop_into(in_flight_);
      writing_ = true;
      in_flight_is_audio_ = true;
      ws_.text(realtime_.has_value());
      ws_.async_write(asio::buffer(in_flight_),
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
    } else if (state_ == State::closing && !close_sent_) {
      close_sent_ = true;
      ws_.async_close(websocket::close_code::normal, [self = shared_from_this()](beast::error_code ec) {
        if (ec) self->shut_down();  // success: the read loop sees error::closed and finishes
      });
    }
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    if (state_ == State::closed) return;
    if (ec) {
      if (state_ == State::closing) return shut_down();
      return fail("backend_error: write: " + ec.message());
    }
    if (in_flight_is_audio_ && counters_) counters_->frames_sent.add();
    write_next();
  }

  void read_next() {
    ws_.async_read(read_buffer_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (state_ == State::closed) return;
    if (ec) {
      if (state_ == State::closing) return shut_down();
      if (ec == websocket::error::closed) {
        return fail("backend_closed: " + std::to_string(ws_.reason().code) + " " +
                    std::string(ws_.reason().reason.data(), ws_.reason().reason.size()));
      }
      if (ec == beast::error::timeout) return fail("backend_timeout");
      if (ec == websocket::error::message_too_big) {
        counters_->protocol_errors.add();
        return fail("protocol_error: message larger than " +
                    std::to_string(realtime_ ? std::max(config_.max_message_bytes, kRealtimeMinMessageBytes)
                                             : config_.max_message_bytes) +
                    " bytes");
      }
      return fail("backend_error: read: " + ec.message());
    }
    if (listener_) deliver();
    read_buffer_.consume(read_buffer_.size());
    read_next();
  }

  // Hands one message to the listener. Every callback may close or destroy the connection,
  // so listener_ is checked again after each one.
  void deliver() {
    auto data = read_buffer_.cdata();
    std::span<const uint8_t> bytes(static_cast<const uint8_t*>(data.data()), data.size());
    if (realtime_) return deliver_realtime(bytes);
    if (ws_.got_text()) {
      BackendText text = parse_backend_text({reinterpret_cast<const char*>(bytes.data()), bytes.size()});
      switch (text.kind) {
        case BackendTextKind::invalid: counters_->protocol_errors.add(); return;
        case BackendTextKind::clear: listener_->on_backend_clear(); return;
        case BackendTextKind::event: listener_->on_backend_event(text.event); return;
        case BackendTextKind::session_end: {
          // The socket stays up so that the session's close() still says session.ended.
          auto* listener = std::exchange(listener_, nullptr);
          listener->on_backend_closed("session_end: " + text.reason);
          return;
        }
      }
      return;
    }
    if (info_.opus_passthrough) {
      if (bytes.size() > kMaxOpusPacketBytes) {
        counters_->protocol_errors.add();
        return;
      }
      counters_->frames_received.add();
      listener_->on_backend_opus(bytes);
      return;
    }
    size_t frames = pcm_frames_in_message(bytes.size(), frame_bytes_);
    if (frames == 0) {
      counters_->protocol_errors.add();
      return;
    }
    for (size_t i = 0; i < frames && listener_; ++i) {
      // A copy, not a cast: the read buffer promises no int16 alignment.
      std::memcpy(inbound_pcm_.data(), bytes.data() + i * frame_bytes_, frame_bytes_);
      counters_->frames_received.add();
      listener_->on_backend_audio(inbound_pcm_);
    }
  }

  void deliver_realtime(std::span<const uint8_t> bytes) {
    RealtimeInbound in =
        ws_.got_text() ? realtime_->decode_text({reinterpret_cast<const char*>(bytes.data()), bytes.size()})
                       : RealtimeDialect::decode_binary();
    switch (in.kind) {
      case RealtimeInboundKind::invalid:
        counters_->protocol_errors.add();
        spdlog::debug("session {}: backend message dropped: {}", info_.session_id,
                      realtime_dialect_error_message(*in.error));
        return;
      case RealtimeInboundKind::audio:
        for (size_t i = 0; i < in.frames && listener_; ++i) {
          counters_->frames_received.add();
          listener_->on_backend_audio(realtime_->frame(i));
        }
        return;
      case RealtimeInboundKind::clear:
        listener_->on_backend_clear();
        if (listener_) listener_->on_backend_event(in.event);
        return;
      case RealtimeInboundKind::event: listener_->on_backend_event(in.event); return;
    }
  }

  void fail(const std::string& reason) {
    if (state_ == State::closed || state_ == State::closing) return;
    if (state_ == State::connecting && counters_) counters_->connect_failures.add();
    spdlog::warn("session {}: backend {}: {}", info_.session_id, config_.url, reason);
    shut_down();
    counters_ = nullptr;
    if (auto* listener = std::exchange(listener_, nullptr)) listener->on_backend_closed(reason);
  }

  void shut_down() {
    state_ = State::closed;
    timer_.cancel();
    resolver_.cancel();
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    audio_.clear();
    events_.clear();
  }

  const WebSocketBackendConfig config_;
  const BackendSessionInfo info_;
  BackendListener* listener_;  // null once closed or ended: nothing reaches the session after that
  BackendCounters* counters_;  // null once closed: the worker may be tearing down
  BackendUrl url_;
  tcp::resolver resolver_;
  std::shared_ptr<ssl::context> tls_context_;  // wss:// only; outlives the stream built on it
  Stream ws_;
  asio::steady_timer timer_;  // the connect deadline, then the close deadline
  http::response<http::string_body> upgrade_response_;
  State state_ = State::connecting;
  const size_t frame_bytes_;
  FrameRing audio_;
  std::deque<std::string> events_;
  std::vector<uint8_t> in_flight_;
  std::string in_flight_text_;
  bool in_flight_is_audio_ = false;
  bool writing_ = false;
  bool close_sent_ = false;
  bool name_mismatch_ = false;  // the chain verified, but not for url_.host
  beast::flat_buffer read_buffer_;
  std::vector<int16_t> inbound_pcm_;
  std::optional<RealtimeDialect> realtime_;  // the realtime dialect's framing; empty = rtcedge
  std::string encoded_;                      // the last append event, reused
};

template <bool Tls>
class WebSocketBackend final : public BackendConnection {
 public:
  explicit WebSocketBackend(std::shared_ptr<WebSocketImpl<Tls>> impl) : impl_(std::move(impl)) {}
  ~WebSocketBackend() override { impl_->close("destroyed"); }

  void send_audio(std::span<const int16_t> pcm_20ms) override { impl_->send_audio(pcm_20ms); }
  void send_opus(std::span<const uint8_t> packet) override { impl_->send_opus(packet); }
  void send_event(const nlohmann::json& event) override { impl_->send_event(event); }
  void discard_output() override { impl_->discard_output(); }
  void close(std::string_view reason) override { impl_->close(reason); }

 private:
  std::shared_ptr<WebSocketImpl<Tls>> impl_;
};

template <bool Tls>
std::unique_ptr<BackendConnection> make(asio::io_context& io, const WebSocketBackendConfig& config,
                                        BackendSessionInfo info, BackendListener& listener,
                                        BackendCounters& counters) {
  std::shared_ptr<ssl::context> context;
  std::string setup_error;
  if constexpr (Tls) {
    auto made = tls_client_context(config.ca_file);
    setup_error = std::move(made.error);
    // The stream needs a context even when the connection is about to fail with the error.
    context =
        made.context ? std::move(made.context) : std::make_shared<ssl::context>(ssl::context::tls_client);
  }
  auto impl = std::make_shared<WebSocketImpl<Tls>>(io, config, std::move(info), listener, counters, context);
  impl->start(setup_error);
  return std::make_unique<WebSocketBackend<Tls>>(std::move(impl));
}

}  // namespace

std::unique_ptr<BackendConnection> make_websocket_backend(asio::io_context& io,
                                                          const WebSocketBackendConfig& config,
                                                          BackendSessionInfo info, BackendListener& listener,
                                                          BackendCounters& counters) {
  if (config.url.starts_with("wss://")) return make<true>(io, config, std::move(info), listener, counters);
  return make<false>(io, config, std::move(info), listener, counters);
}

}  // namespace rtce
