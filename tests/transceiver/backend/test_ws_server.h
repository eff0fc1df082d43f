// test_ws_server.h — a Beast WebSocket server on 127.0.0.1:0 with its own thread, standing in
// for an AI backend in the backend tests: it records what the transceiver sends and sends
// whatever a test asks for. One connection at a time; every accessor is thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rtce::testing {

struct ReceivedMessage {
  bool text = false;
  std::string data;
};

class TestWsServer {
 public:
  enum class Mode {
    normal,   // reads everything
    stalled,  // accepts the upgrade, then never reads (and has a tiny receive buffer)
  };

  explicit TestWsServer(Mode mode = Mode::normal);
  ~TestWsServer();
  TestWsServer(const TestWsServer&) = delete;
  TestWsServer& operator=(const TestWsServer&) = delete;

  uint16_t port() const { return port_; }
  std::string url(const std::string& path = "/backend") const;

  int accepted_upgrades() const;
  std::vector<ReceivedMessage> messages() const;
  size_t message_count() const;
  std::string request_target() const;
  std::string request_header(const std::string& name) const;
  bool peer_closed() const;  // the client's close frame arrived (or the TCP connection ended)

  void send_text(std::string text);
  void send_binary(std::string bytes);
  void close(uint16_t code, std::string reason);

  struct Connection;

 private:
  friend struct Connection;
  void accept();

  const Mode mode_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::shared_ptr<Connection> connection_;  // touched only on the server thread

  mutable std::mutex mutex_;
  int accepted_upgrades_ = 0;
  std::vector<ReceivedMessage> messages_;
  std::string target_;
  std::map<std::string, std::string> headers_;
  bool peer_closed_ = false;

  std::thread thread_;
};

}  // namespace rtce::testing
