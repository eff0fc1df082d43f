// udp_socket_options.h — the socket options both binaries set on their UDP sockets, each
// failing with an exception that names the socket, and the buffer sizing that tells the
// operator when the kernel gave less than asked.
#pragma once

#include <string_view>

namespace rtce {

// setsockopt of an int; throws std::runtime_error "<what>: <errno text>" on failure.
void set_socket_option(int fd, int level, int name, int value, std::string_view what);

// Asks for `bytes` of receive and of send buffer. With CAP_NET_ADMIN the *FORCE variants
// bypass net.core.[rw]mem_max; without it the kernel silently caps the request, so the
// size is read back and a shortfall is logged once per process, instead of running with
// a fraction of the configured buffer unnoticed. Throws when even the plain option fails.
void set_socket_buffers(int fd, int bytes, std::string_view what);

// Asks the kernel to report each datagram's destination address (IP_PKTINFO or
// IPV6_RECVPKTINFO, by `ipv4`), which UdpReceiveBatch::destination() reads. Only a socket
// bound to a wildcard address needs it: the kernel builds that control message per packet.
void request_destination_address(int fd, bool ipv4, std::string_view what);

// Turns UDP_GRO on: the kernel may then hand over a run of datagrams from one sender as one
// receive (a GSO sender's run on loopback or veth, or what the NIC's GRO coalesced), which
// only a UdpReceiveBatch::coalescing() batch splits. Returns false, changing nothing, on a
// kernel without it (before 5.0): datagrams then come one by one, as without.
bool enable_udp_gro(int fd);

}  // namespace rtce
