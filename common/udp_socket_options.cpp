// udp_socket_options.cpp — see udp_socket_options.h.
#include "udp_socket_options.h"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#ifndef UDP_GRO
#define UDP_GRO 104  // linux/udp.h; older libc headers lack it
#endif

namespace rtce {

void set_socket_option(int fd, int level, int name, int value, std::string_view what) {
  if (setsockopt(fd, level, name, &value, sizeof value) < 0)
    throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

void set_socket_buffers(int fd, int bytes, std::string_view what) {
  struct Option {
    int force, plain;
    const char* name;
  };
  for (const Option& o :
       {Option{SO_RCVBUFFORCE, SO_RCVBUF, "SO_RCVBUF"}, Option{SO_SNDBUFFORCE, SO_SNDBUF, "SO_SNDBUF"}}) {
    if (setsockopt(fd, SOL_SOCKET, o.force, &bytes, sizeof bytes) < 0)
      set_socket_option(fd, SOL_SOCKET, o.plain, bytes, std::string(o.name) + " on " + std::string(what));
    int granted = 0;
    socklen_t len = sizeof granted;
    getsockopt(fd, SOL_SOCKET, o.plain, &granted, &len);
    if (granted / 2 < bytes) {  // the kernel reports twice the usable size
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true))
        spdlog::warn(
            "{} on {}: asked for {} bytes, got {}; raise net.core.rmem_max/wmem_max or run with "
            "CAP_NET_ADMIN",
            o.name, what, bytes, granted / 2);
    }
  }
}

void request_destination_address(int fd, bool ipv4, std::string_view what) {
  if (ipv4)
    set_socket_option(fd, IPPROTO_IP, IP_PKTINFO, 1, "IP_PKTINFO on " + std::string(what));
  else
    set_socket_option(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO on " + std::string(what));
}

bool enable_udp_gro(int fd) {
  const int on = 1;
  return setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on) == 0;
}

}  // namespace rtce
