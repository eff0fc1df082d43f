// media_path.h — how a Peer's datagrams reach its client: straight to the client's
// address (direct mode) or framed with PROXY v2 to the relay that forwarded them. The
// framing of a reply is the framing the relay sent (it names the same client and VIP).
//
// What ICE sees is the pair (client, VIP): the relay is transparent to ICE, its hop is
// routing. So a path is *identified* by the one flow key of wire/rtce_flow.h (client, VIP,
// transport; the VIP is empty in direct mode), the key the relay and the XDP program use for
// the same flow, read from the PROXY v2 header once per datagram; the relay's address
// (send_to) is only where replies go now: a restarted relay that forwards from a new port is
// the same path, followed from the next authenticated packet.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "flow_key.h"
#include "net_address.h"
#include "rtce_proxy_v2.h"

namespace rtce {

// The ICE identity of a path (see above).
using PathKey = rtce_flow_key;

struct MediaPath {
  SocketAddress send_to;  // the relay's return address, or the client in direct mode
  SocketAddress client;   // the client's own address (from the framing when relayed)
  SocketAddress vip;      // the relay VIP the client sent to (relayed only)
  PathKey key{};          // client, VIP and transport as the framing (or the socket) gave them
  uint8_t framing[RTCE_PP2_LEN_V6]{};
  uint8_t framing_len = 0;

  bool relayed() const { return framing_len != 0; }
  std::span<const uint8_t> framing_bytes() const { return {framing, framing_len}; }
  bool same_route(const MediaPath& o) const {
    return send_to == o.send_to && client == o.client && framing_len == o.framing_len &&
           std::memcmp(framing, o.framing, framing_len) == 0;
  }
};

// Where a Peer's transmits go: one datagram along a path. The worker's implementation copies
// it into its sendmmsg batch; a test's records it. The Peer never touches a socket.
class DatagramSender {
 public:
  virtual ~DatagramSender() = default;
  virtual void send(const MediaPath& path, std::span<const uint8_t> payload) = 0;
};

class Peer;
// Which Peer the worker hands a path's non-STUN datagrams to. A Peer routes the paths it
// has authenticated (its media path and a few candidates) and unroutes them when it lets
// them go; the worker owns the table.
class PathRouter {
 public:
  virtual ~PathRouter() = default;
  virtual void route(const PathKey& key, Peer& peer) = 0;
  virtual void unroute(const PathKey& key, const Peer& peer) = 0;
  // STUN finds a Peer by its server ufrag; during an ICE restart it has two.
  virtual void route_ufrag(const std::string& ufrag, Peer& peer) = 0;
  virtual void unroute_ufrag(const std::string& ufrag, const Peer& peer) = 0;
};

}  // namespace rtce
