// http_client.cpp — see http_client.h.
#include "http_client.h"

#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace rtce::loadgen {

namespace {

constexpr size_t kMaxResponseBytes = 1 << 20;

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

HttpClient::HttpClient(SocketAddress server, Nanos timeout)
    : server_(std::move(server)), timeout_(timeout), host_header_(server_.to_string()) {}

HttpClient::~HttpClient() { close_connection(); }

void HttpClient::close_connection() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool HttpClient::ensure_connected(std::string& error) {
  if (fd_ >= 0) return true;
  fd_ = ::socket(server_.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  timeval tv{static_cast<time_t>(timeout_ / 1'000'000'000),
             static_cast<suseconds_t>(timeout_ % 1'000'000'000 / 1000)};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd_, server_.sa(), server_.len()) != 0) {
    error = "connect " + server_.to_string() + ": " + std::strerror(errno);
    close_connection();
    return false;
  }
  return true;
}

HttpResult HttpClient::request(std::string_view method, std::string_view path, std::string_view content_type,
                               std::string_view body) {
  std::string text;
  text.reserve(256 + body.size());
  text.append(method).append(" ").append(path).append(" HTTP/1.1\r\nHost: ").append(host_header_);
  text.append("\r\nUser-Agent: rtce_session_loadgen\r\nConnection: keep-alive\r\n");
  if (!content_type.empty()) text.append("Content-Type: ").append(content_type).append("\r\n");
  text.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n\r\n").append(body);
  const bool reused = fd_ >= 0;
  bool retryable = false;
  HttpResult result = exchange(text, retryable);
  if (result.status == 0 && reused && retryable) result = exchange(text, retryable);
  return result;
}

HttpResult HttpClient::exchange(const std::string& request_text, bool& retryable) {
  HttpResult result;
  retryable = false;
  if (!ensure_connected(result.error)) return result;
  auto fail = [&](std::string why, bool nothing_received) {
    result.error = std::move(why);
    retryable = nothing_received;
    close_connection();
    return result;
  };
  for (size_t off = 0; off < request_text.size();) {
    const ssize_t n = ::send(fd_, request_text.data() + off, request_text.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return fail(std::string("send: ") + std::strerror(errno), true);
    off += static_cast<size_t>(n);
  }
  std::string in;
  size_t header_end = std::string::npos;
  char buf[8192];
  while (header_end == std::string::npos) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0) return fail("connection closed before the response", in.empty());
    if (n < 0) return fail(std::string("recv: ") + std::strerror(errno), false);
    in.append(buf, static_cast<size_t>(n));
    header_end = in.find("\r\n\r\n");
    if (in.size() > kMaxResponseBytes) return fail("response headers too large", false);
  }
  std::string_view head(in.data(), header_end);
  // "HTTP/1.1 201 Created"
  if (head.size() < 12 || head.substr(0, 5) != "HTTP/") return fail("malformed status line", false);
  const auto sp = head.find(' ');
  if (sp == std::string_view::npos ||
      std::from_chars(head.data() + sp + 1, head.data() + std::min(head.size(), sp + 4), result.status).ec !=
          std::errc{})
    return fail("malformed status line", false);
  size_t content_length = 0;
  bool close_after = false;
  size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos && pos < head.size()) {
    const size_t next = head.find("\r\n", pos + 2);
    const std::string_view line =
        head.substr(pos + 2, (next == std::string_view::npos ? head.size() : next) - pos - 2);
    pos = next;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string name = lowercase(trim(line.substr(0, colon)));
    const std::string_view value = trim(line.substr(colon + 1));
    if (name == "content-length") {
      if (std::from_chars(value.data(), value.data() + value.size(), content_length).ec != std::errc{} ||
          content_length > kMaxResponseBytes)
        return fail("bad Content-Length", false);
    } else if (name == "location") {
      result.location = value;
    } else if (name == "retry-after") {
      result.retry_after = value;
    } else if (name == "connection") {
      close_after = lowercase(value) == "close";
    }
  }
  const size_t body_start = header_end + 4;
  while (in.size() < body_start + content_length) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return fail("connection closed inside the body", false);
    in.append(buf, static_cast<size_t>(n));
  }
  result.body = in.substr(body_start, content_length);
  if (close_after) close_connection();
  return result;
}

}  // namespace rtce::loadgen
