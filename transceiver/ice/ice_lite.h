// ice_lite.h — the server side of ICE for one WebRTC session: an ICE-lite agent (RFC 8445
// section 2.5) that answers the client's connectivity checks, tracks nomination and consent
// (RFC 7675). It sends one check of its own per new pair at most: a triggered check on the
// first valid pair, so that clients that nominate on their next timer tick (Pion) or on a
// triggered check nominate at once. Socket-free: the worker feeds it datagrams, the client's
// address and the time; it writes the reply into a caller buffer.
// STUN encoding and MESSAGE-INTEGRITY / FINGERPRINT are libnice's (stun/usages/ice.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "clock.h"
#include "net_address.h"
#include "token_bucket.h"
#include "vocab.h"

namespace rtce {

// RFC 7983 demultiplexing: first byte 0..3 and the RFC 5389 magic cookie.
bool looks_like_stun(std::span<const uint8_t> d);

// The local (server) ufrag of a Binding request's USERNAME "server:client", unvalidated:
// the worker uses it to find the session before anything is authenticated. nullopt unless
// the datagram is a well-framed Binding request with a USERNAME among its first
// attributes. The view points into `datagram`. Bounded walk (wire/rtce_stun.h), no
// allocation.
std::optional<std::string_view> stun_request_server_ufrag(std::span<const uint8_t> datagram);

// Large enough for every reply handle_request builds (the largest is a 420 listing
// unknown attributes); a smaller buffer can make a reply fail with internal_error.
inline constexpr size_t kIceReplyBufferSize = 1280;

class IceLiteSession {
 public:
  struct Credentials {
    std::string local_ufrag;   // ours, from the answer (carries the routing hint)
    std::string local_pwd;     // ours: keys MESSAGE-INTEGRITY both ways
    std::string remote_ufrag;  // the client's, from the offer
    std::string remote_pwd;    // the client's: keys our triggered checks (empty: none are sent)
  };
#define RTCE_ICE_LITE_STATES(X)                                                           \
  X(waiting)      /* no nominated pair yet */                                             \
  X(connected)    /* a pair is selected; media and DTLS may flow to selected_address() */ \
  X(disconnected) /* consent lapsed (no authenticated check for consent_timeout) */       \
  X(closed)       /* close() was called */
#define RTCE_ICE_LITE_OUTCOMES(X)                                                                        \
  X(success)           /* 200 written */                                                                 \
  X(bad_request)       /* 400 written (USERNAME or MESSAGE-INTEGRITY missing, or not Binding) */         \
  X(unauthorized)      /* 401 written (MESSAGE-INTEGRITY does not verify with local_pwd) */              \
  X(role_conflict)     /* 487 written (peer claims ICE-CONTROLLED; a lite agent stays controlled) */     \
  X(not_a_request)     /* response or indication: nothing written */                                     \
  X(malformed)         /* not STUN, bad framing or bad/missing FINGERPRINT: nothing written */           \
  X(wrong_username)    /* 401 written (USERNAME is not "local_ufrag:remote_ufrag") */                    \
  X(unknown_attribute) /* 420 written (authenticated, but a comprehension-required attribute we lack) */ \
  X(session_inactive)  /* disconnected or closed: nothing written (RFC 7675 section 5.1) */              \
  X(internal_error)    /* libnice could not build the reply (buffer too small): nothing written */
  enum class State { RTCE_ICE_LITE_STATES(RTCE_VOCAB_ENUMERATOR) };
  enum class Outcome { RTCE_ICE_LITE_OUTCOMES(RTCE_VOCAB_ENUMERATOR) };
  struct Result {
    Outcome outcome = Outcome::malformed;
    size_t reply_len = 0;        // bytes written to out; 0 = send nothing
    bool nominated = false;      // the check carried USE-CANDIDATE and succeeded
    bool authenticated = false;  // MESSAGE-INTEGRITY verified with local_pwd
    // A success whose transaction id this session already answered from another address: a
    // replay (or a retransmission that crossed a NAT rebinding). It is answered, but it
    // refreshes no consent and moves no path: only fresh checks prove an address.
    bool replayed = false;
    bool reply_suppressed = false;          // an error reply was due but the per-session limit held it
    bool pending_credentials_used = false;  // keyed with the pending restart's credentials
    bool completed_restart = false;         // this check made the pending credentials current
  };
  struct Config {
    // RFC 7675: consent lapses 30 s after the last authenticated check. Chrome refreshes
    // it every ~5 s.
    Nanos consent_timeout = 30'000'000'000;
    // A controlling agent must nominate (USE-CANDIDATE), and Chrome does so on its next
    // check. If authenticated checks arrive but none nominates within this time after the
    // first one, on_timer selects the latest checked address anyway, so that a client that
    // nominates late or never still gets media. 0 = select on the first authenticated check.
    Nanos nomination_wait = 2'000'000'000;
    // Error replies (400/401/487) to checks, per second per session (a burst of as many).
    // An unauthenticated check can come from anyone; a 401 only helps an attacker, so they
    // are rate-limited, and 0 makes the agent silent (RFC 8445 lets it discard them).
    uint32_t error_replies_per_second = 5;
  };

  IceLiteSession(Credentials credentials, Config config);

  // `client` is the client's original address (from the relay framing, or the datagram
  // source in direct mode; a v4-mapped IPv6 address is reported as IPv4). The reply
  // (success with XOR-MAPPED-ADDRESS = client, MESSAGE-INTEGRITY and FINGERPRINT, or an
  // error response) is written into `out`, which must not overlap `request` and should
  // hold kIceReplyBufferSize bytes. No allocation.
  Result handle_request(std::span<const uint8_t> request, const SocketAddress& client, std::span<uint8_t> out,
                        Nanos now);
  // Consent expiry (-> disconnected) and the nomination fallback (-> connected).
  void on_timer(Nanos now);
  // Another authenticated packet of the session arrived (SRTP/SRTCP that verified, DTLS the
  // session accepted): the client is alive. Clients that send no consent checks while media
  // flows (Pion-based stacks) stay connected this way. Ignored before the first valid check.
  void refresh_consent(Nanos now);
  // A Binding request to the client on the pair `client` (USERNAME "remote:local",
  // ICE-CONTROLLED, PRIORITY, MESSAGE-INTEGRITY keyed by the client's pwd, FINGERPRINT), so
  // that a controlling client nominates at once instead of on its next check tick. Written
  // into out; returns its length, or 0 when nothing should be sent: no remote pwd, no valid
  // check came from `client` as the latest check, the pair already had its check, the pair
  // is nominated, or kMaxTriggeredChecks pairs had one. Never before an authenticated check
  // and at most one per pair, so it can neither be provoked by strangers nor amplify.
  size_t build_triggered_check(const SocketAddress& client, std::span<uint8_t> out);
  // A STUN response from the client: true when it answers one of our triggered checks
  // (transaction id match; the content is not needed: the client's next check nominates).
  bool handle_response(std::span<const uint8_t> response);
  static constexpr size_t kMaxTriggeredChecks = 4;
  // When on_timer next has something to do; max() when nothing is pending.
  Nanos next_deadline() const;
  void close() { state_ = State::closed; }

  // An ICE restart (RFC 8445 section 9): `next` (new local and remote ufrag/pwd) is accepted
  // beside the current credentials, so media keeps flowing on the old pair while the client
  // checks the new one. The first fresh successful check with `next` that nominates
  // (USE-CANDIDATE) completes it, or, for a client that never nominates, nomination_wait after
  // the first check with `next` (on_timer; at once when nomination_wait is 0): `next` becomes
  // current, the selected address becomes that check's, and checks with the old credentials
  // get 401 wrong_username (rate-limited) from then on. Calling it again while one is pending
  // replaces the pending one (its checks are forgotten). Consent is continuous: checks with
  // either generation refresh it, and the last valid check time carries across the switch.
  // Returns false, changing nothing, when the session is disconnected or closed (consent is
  // gone: the client must start a new session), when next's local ufrag, local pwd or remote
  // ufrag is empty, or when next's local ufrag equals the current one (the worker finds the
  // session by that ufrag, and RFC 8839 section 4.4.1.1.1 makes a restart change it).
  bool begin_restart(Credentials next);
  bool restart_pending() const { return pending_.has_value(); }
  // nullptr unless a restart is pending. While one is, the worker must map both
  // credentials().local_ufrag and pending_credentials()->local_ufrag to this session.
  const Credentials* pending_credentials() const { return pending_ ? &*pending_ : nullptr; }

  State state() const { return state_; }
  // Time of the last authenticated, successful check; nullopt before the first.
  std::optional<Nanos> last_valid_check() const;
  // Where media and DTLS go once connected: the address of the nominating check (or, after
  // nomination_wait, the latest checked one).
  std::optional<SocketAddress> selected_address() const;
  // Ours, random per session. A lite agent never sends ICE-CONTROLLED/-CONTROLLING, so it
  // only matters for the record.
  uint64_t tie_breaker() const { return tie_breaker_; }
  const Credentials& credentials() const { return credentials_; }

 private:
  Credentials credentials_;
  std::optional<Credentials> pending_;
  Config config_;
  State state_ = State::waiting;
  uint64_t tie_breaker_ = 0;
  bool have_check_ = false;
  bool have_selected_ = false;
  Nanos first_check_ = 0;
  Nanos last_check_ = 0;
  SocketAddress last_checked_address_;
  SocketAddress selected_;

  // The latest transaction ids answered with success, with where they came from.
  static constexpr size_t kRecentTransactions = 16;
  struct SeenTransaction {
    std::array<uint8_t, 12> id{};
    SocketAddress from;
  };
  std::array<SeenTransaction, kRecentTransactions> recent_{};
  size_t recent_next_ = 0, recent_count_ = 0;

  // Triggered checks: the pairs that had one, and the ids to match responses with. One set
  // per credential generation: a restart's pairs get checks of their own, keyed with its pwd.
  struct Triggered {
    std::array<SocketAddress, kMaxTriggeredChecks> pairs{};
    std::array<std::array<uint8_t, 12>, kMaxTriggeredChecks> ids{};
    size_t count = 0;
  };
  Triggered triggered_;
  Triggered pending_triggered_;
  // The pending generation's checks: the fallback clock and the address it would select.
  bool pending_have_check_ = false;
  Nanos pending_first_check_ = 0;
  SocketAddress pending_last_checked_address_;
  bool last_check_pending_ = false;  // the latest valid check was keyed with pending_
  void complete_restart(const SocketAddress& selected);

  // Error replies: a burst of error_replies_per_second, refilled at that rate (0: none).
  TokenBucket error_replies_;
};

const char* to_string(IceLiteSession::Outcome outcome);
const char* to_string(IceLiteSession::State state);

}  // namespace rtce
