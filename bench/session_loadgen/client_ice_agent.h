// client_ice_agent.h — when the load generator's client sends an ICE check, whether the check
// nominates (USE-CANDIDATE), and when the client's ICE counts as connected: a socket-free
// state machine for one controlling agent on its one candidate pair. WebRtcClient does the
// I/O (IceClientChecker builds the checks, IceBindingResponder answers the peer's).
//
// Two client profiles, because WebRTC stacks differ in exactly the ways a server must cope with:
//
//   browser  Chrome-like: every check nominates; checks are retransmitted every 100 ms until
//            the first success, which is also "connected"; then a consent check every 2.5 s
//            whatever the media does (RFC 7675).
//   pion     Pion-like (pion/ice, controlling, regular nomination): the first check does not
//            nominate; checks go out on a 200 ms tick; the agent nominates on its next tick
//            after the first success, or at once when the peer sends it a Binding request on
//            the pair that already succeeded; it is connected when the nominating check
//            succeeds (and only then starts DTLS). Afterwards it sends consent checks per
//            ConsentChecks: `none` (no STUN at all while the call lasts, the way some stacks
//            behave while audio flows both ways) or `on_silence` (only after 2 s without any
//            datagram from the peer, Pion's keepalive).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "clock.h"

namespace rtce::loadgen {

enum class ClientProfile { browser, pion };
enum class ConsentChecks { periodic, none, on_silence };

// Both return nullopt for an unknown name; the names are the command-line values.
std::optional<ClientProfile> parse_client_profile(std::string_view name);
std::optional<ConsentChecks> parse_consent_checks(std::string_view name);
const char* to_string(ClientProfile profile);
const char* to_string(ConsentChecks consent);

struct ClientIceTiming {
  Nanos check_retransmit = 100'000'000;        // browser: until the first success
  Nanos check_tick = 200'000'000;              // pion: the periodic check tick
  Nanos consent_interval = 2'500'000'000;      // periodic consent checks
  Nanos silence_before_check = 2'000'000'000;  // on_silence: quiet this long -> one check
};

class ClientIceAgent {
 public:
  struct Check {
    bool use_candidate = false;
    bool controlling = true;
  };

  ClientIceAgent(ClientProfile profile, ConsentChecks consent, ClientIceTiming timing = {});

  // The first check.
  Check start(Nanos now);
  // The check due now, if any (nullopt when none is due).
  std::optional<Check> poll(Nanos now);
  // When poll next has something to say; INT64_MAX = never on its own.
  Nanos next_deadline() const { return next_check_at_; }

  // A success response to the last check sent (IceClientChecker matches the transaction).
  void on_check_success(Nanos now);
  // A 487 (Role Conflict) response: RFC 8445 section 7.2.5.1 — switch role and check again.
  std::optional<Check> on_role_conflict_response(Nanos now);
  // An authenticated Binding request from the peer, already answered. Returns the check to
  // send at once: pion nominates a pair that already succeeded without waiting for its tick.
  std::optional<Check> on_peer_request(Nanos now);
  // The responder switched our role while answering a peer's request (RFC 8445 7.3.1.1).
  void on_role_switched(bool controlling) { controlling_ = controlling; }
  // Any datagram from the peer: STUN, DTLS, media (for on_silence).
  void on_traffic(Nanos now) { last_traffic_at_ = now; }

  bool pair_succeeded() const { return succeeded_at_ != 0; }
  bool connected() const { return connected_at_ != 0; }
  bool controlling() const { return controlling_; }
  Nanos succeeded_at() const { return succeeded_at_; }
  Nanos connected_at() const { return connected_at_; }
  uint64_t checks_after_connected() const { return checks_after_connected_; }

 private:
  Check next_check(Nanos now);
  void schedule_after_connected(Nanos now);

  const ClientProfile profile_;
  const ConsentChecks consent_;
  const ClientIceTiming timing_;
  bool controlling_ = true;
  bool last_check_nominated_ = false;
  Nanos succeeded_at_ = 0;
  Nanos connected_at_ = 0;
  Nanos last_check_at_ = 0;
  Nanos last_traffic_at_ = 0;
  Nanos next_check_at_ = INT64_MAX;
  uint64_t checks_after_connected_ = 0;
};

}  // namespace rtce::loadgen
