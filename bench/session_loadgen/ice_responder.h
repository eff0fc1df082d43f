// ice_responder.h — the client's answer to a Binding request from the server on its pair
// (a full agent answers checks; a server that sends them, e.g. to trigger a Pion-like
// client's nomination, needs that answer). RFC 8445 section 7.3: the request must carry
// USERNAME "<client ufrag>:<server ufrag>" and MESSAGE-INTEGRITY keyed with the client's own
// ice-pwd (the server knows it from the offer); the success response carries
// XOR-MAPPED-ADDRESS, MESSAGE-INTEGRITY with the same key, FINGERPRINT. Role conflicts
// follow section 7.3.1.1 (libnice's stun_usage_ice_conncheck_create_reply): the agent with
// the larger tie-breaker keeps its role and answers 487, the other switches and answers 200.
// Socket-free: datagram in, reply bytes out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "net_address.h"

namespace rtce::loadgen {

class IceBindingResponder {
 public:
  enum class Outcome {
    success,            // 200 written; use_candidate tells whether the peer nominated
    role_switched,      // 200 written, and *controlling was flipped (we had the smaller tie-breaker)
    role_conflict,      // 487 written: we keep our role
    unauthenticated,    // wrong USERNAME or MESSAGE-INTEGRITY, or none: 400/401 written
    unknown_attribute,  // 420 written
    malformed,          // not a STUN Binding request (bad FINGERPRINT, truncated): no reply
  };
  struct Result {
    Outcome outcome = Outcome::malformed;
    size_t reply_len = 0;
    bool use_candidate = false;
  };

  IceBindingResponder(std::string local_ufrag, std::string local_pwd, std::string remote_ufrag);
  ~IceBindingResponder();
  IceBindingResponder(const IceBindingResponder&) = delete;
  IceBindingResponder& operator=(const IceBindingResponder&) = delete;

  // True for a STUN request (class bits 0): the caller routes responses elsewhere.
  static bool is_request(std::span<const uint8_t> datagram);

  // from: where the request came from (the XOR-MAPPED-ADDRESS). controlling / tie_breaker:
  // this agent's role (updated on a switch) and tie-breaker.
  Result answer(std::span<const uint8_t> request, const SocketAddress& from, bool& controlling,
                uint64_t tie_breaker, std::span<uint8_t> out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

const char* to_string(IceBindingResponder::Outcome outcome);

}  // namespace rtce::loadgen
