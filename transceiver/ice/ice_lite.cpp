// ice_lite.cpp — see ice_lite.h. libnice does the STUN encoding and the HMAC/CRC work; this
// file decides what an ICE-lite server answers (RFC 8445 section 7.3, RFC 5389 section 10.1.2)
// and keeps the nomination/consent state.
#include "ice_lite.h"

#include <stun/stunagent.h>
#include <stun/usages/ice.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "byte_order.h"
#include "random.h"
#include "rtce_stun.h"
#include "vocab.h"

namespace rtce {
namespace {

// Comprehension-required attributes (< 0x8000) we understand in a request; anything else
// in that range gets a 420. The optional ones (Chrome's GOOG-*, NOMINATION) are ignored.
uint16_t kServerKnownAttributes[] = {STUN_ATTRIBUTE_USERNAME,        STUN_ATTRIBUTE_MESSAGE_INTEGRITY,
                                     STUN_ATTRIBUTE_FINGERPRINT,     STUN_ATTRIBUTE_PRIORITY,
                                     STUN_ATTRIBUTE_USE_CANDIDATE,   STUN_ATTRIBUTE_ICE_CONTROLLED,
                                     STUN_ATTRIBUTE_ICE_CONTROLLING, 0};

// A StunAgent is 12.8 KB, almost all of it the table of transactions the agent itself sent.
// A lite agent sends no requests, so answering checks reads only the agent's configuration,
// which is the same for every session: one agent per worker thread instead of one per session.
struct ServerAgent {
  StunAgent agent;
  ServerAgent() {
    stun_agent_init(&agent, kServerKnownAttributes, STUN_COMPATIBILITY_RFC5389,
                    static_cast<StunAgentUsageFlags>(STUN_AGENT_USAGE_SHORT_TERM_CREDENTIALS |
                                                     STUN_AGENT_USAGE_USE_FINGERPRINT));
  }
};

StunAgent* server_agent() {
  thread_local ServerAgent instance;
  return &instance.agent;
}

struct ValidaterContext {
  const IceLiteSession::Credentials* credentials;
  const IceLiteSession::Credentials* pending;  // a pending restart's, or nullptr
  bool wrong_username = false;
  bool used_pending = false;
};

bool username_matches(std::string_view got, const IceLiteSession::Credentials& creds) {
  return got.size() == creds.local_ufrag.size() + 1 + creds.remote_ufrag.size() &&
         got.starts_with(creds.local_ufrag) && got[creds.local_ufrag.size()] == ':' &&
         got.ends_with(creds.remote_ufrag);
}

// libnice calls this for a request that carries USERNAME and MESSAGE-INTEGRITY; returning
// the key makes it verify the HMAC. RFC 8445 section 7.3: the USERNAME must be exactly
// "<our ufrag>:<their ufrag>", otherwise 401. During a restart the USERNAME picks the
// generation, and so the key: begin_restart keeps the two local ufrags distinct.
bool check_username(StunAgent*, StunMessage*, uint8_t* username, uint16_t username_len, uint8_t** password,
                    size_t* password_len, void* user_data) {
  auto* ctx = static_cast<ValidaterContext*>(user_data);
  std::string_view got(reinterpret_cast<const char*>(username), username == nullptr ? 0 : username_len);
  const IceLiteSession::Credentials* creds = nullptr;
  if (username_matches(got, *ctx->credentials)) {
    creds = ctx->credentials;
  } else if (ctx->pending != nullptr && username_matches(got, *ctx->pending)) {
    creds = ctx->pending;
    ctx->used_pending = true;
  } else {
    ctx->wrong_username = true;
    return false;
  }
  // An empty key would make libnice skip the HMAC check altogether.
  if (creds->local_pwd.empty()) return false;
  // libnice only reads through this pointer.
  *password = reinterpret_cast<uint8_t*>(const_cast<char*>(creds->local_pwd.data()));
  *password_len = creds->local_pwd.size();
  return true;
}

// Error responses take the request's key: none for 400/401 (RFC 5389 section 10.1.2: no
// MESSAGE-INTEGRITY when the request did not authenticate), the session pwd for 487.
size_t build_error(StunAgent* agent, StunMessage& request, std::span<uint8_t> out, StunError code) {
  StunMessage reply;
  if (!stun_agent_init_error(agent, &reply, out.data(), out.size(), &request, code)) return 0;
  return stun_agent_finish_message(agent, &reply, nullptr, 0);
}

}  // namespace

bool looks_like_stun(std::span<const uint8_t> d) {
  return d.size() >= RTCE_STUN_HEADER_LEN && rtce_classify_first_byte(d[0]) == RTCE_FIRST_BYTE_STUN &&
         load_be32(d.data() + 4) == RTCE_STUN_MAGIC_COOKIE;
}

std::optional<std::string_view> stun_request_server_ufrag(std::span<const uint8_t> datagram) {
  if (datagram.size() > UINT32_MAX) return std::nullopt;
  __u32 off = 0;
  __u32 len = 0;
  if (rtce_stun_server_ufrag(datagram.data(), static_cast<__u32>(datagram.size()), &off, &len) !=
      RTCE_STUN_OK)
    return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(datagram.data()) + off, len);
}

IceLiteSession::IceLiteSession(Credentials credentials, Config config)
    : credentials_(std::move(credentials)),
      config_(config),
      error_replies_(config.error_replies_per_second, config.error_replies_per_second) {
  if (credentials_.local_ufrag.empty() || credentials_.local_pwd.empty() || credentials_.remote_ufrag.empty())
    throw std::invalid_argument("IceLiteSession: local ufrag, local pwd and remote ufrag must not be empty");
  fill_random(&tie_breaker_, sizeof tie_breaker_);
  server_agent();  // construct this thread's agent now, not on the first packet
}

IceLiteSession::Result IceLiteSession::handle_request(std::span<const uint8_t> request,
                                                      const SocketAddress& client, std::span<uint8_t> out,
                                                      Nanos now) {
  Result result;
  if (state_ == State::disconnected || state_ == State::closed) {
    result.outcome = Outcome::session_inactive;
    return result;
  }
  if (!looks_like_stun(request)) {
    result.outcome = Outcome::malformed;
    return result;
  }
  // Class bits C1 (0x0100) and C0 (0x0010) are both zero only for requests. Responses and
  // indications never reach libnice's transaction table from here.
  if ((load_be16(request.data()) & 0x0110) != 0) {
    result.outcome = Outcome::not_a_request;
    return result;
  }

  StunAgent* agent = server_agent();
  StunMessage req;
  ValidaterContext ctx{&credentials_, pending_ ? &*pending_ : nullptr};
  // An error reply, unless the error-reply budget is spent (then none, and say so).
  auto refuse = [&](Outcome outcome, StunError code) {
    result.outcome = outcome;
    if (error_replies_.take(now))
      result.reply_len = build_error(agent, req, out, code);
    else
      result.reply_suppressed = true;
    return result;
  };
  StunValidationStatus status =
      stun_agent_validate(agent, &req, request.data(), request.size(), check_username, &ctx);
  switch (status) {
    case STUN_VALIDATION_SUCCESS: break;
    case STUN_VALIDATION_UNAUTHORIZED_BAD_REQUEST:
      return refuse(Outcome::bad_request, STUN_ERROR_BAD_REQUEST);
    case STUN_VALIDATION_UNAUTHORIZED:
      return refuse(ctx.wrong_username ? Outcome::wrong_username : Outcome::unauthorized,
                    STUN_ERROR_UNAUTHORIZED);
    case STUN_VALIDATION_UNKNOWN_REQUEST_ATTRIBUTE: {
      // libnice checks unknown attributes after MESSAGE-INTEGRITY, so the 420 is signed.
      StunMessage reply;
      result.authenticated = req.key != nullptr;
      result.outcome = Outcome::unknown_attribute;
      result.reply_len =
          stun_agent_build_unknown_attributes_error(agent, &reply, out.data(), out.size(), &req);
      return result;
    }
    case STUN_VALIDATION_NOT_STUN:
    case STUN_VALIDATION_INCOMPLETE_STUN:
    case STUN_VALIDATION_BAD_REQUEST:  // no cookie, or FINGERPRINT missing or wrong: RFC 5389 7.3 silent
                                       // discard
      result.outcome = Outcome::malformed;
      return result;
    default: result.outcome = Outcome::not_a_request; return result;
  }
  // Short-term credentials make libnice refuse requests without USERNAME and
  // MESSAGE-INTEGRITY, so a validated request carries our key; check anyway, since a
  // request that did not authenticate must never refresh consent.
  if (req.key == nullptr) return refuse(Outcome::unauthorized, STUN_ERROR_UNAUTHORIZED);
  result.authenticated = true;
  result.pending_credentials_used = ctx.used_pending;

  if (stun_message_get_method(&req) != STUN_BINDING) {
    result.outcome = Outcome::bad_request;
    result.reply_len = build_error(agent, req, out, STUN_ERROR_BAD_REQUEST);
    return result;
  }
  // RFC 8445 section 7.3.1.1 would let a controlled agent with the larger tie-breaker take
  // over the controlling role (libnice does that). A lite agent has no checklist to control
  // with, so it always answers 487 and the full agent switches to controlling.
  uint64_t peer_tie_breaker = 0;
  if (stun_message_find64(&req, STUN_ATTRIBUTE_ICE_CONTROLLED, &peer_tie_breaker) ==
      STUN_MESSAGE_RETURN_SUCCESS) {
    result.outcome = Outcome::role_conflict;
    result.reply_len = build_error(agent, req, out, STUN_ERROR_ROLE_CONFLICT);
    return result;
  }

  SocketAddress mapped = client.unmapped();
  if (mapped.family() != AF_INET && mapped.family() != AF_INET6) {
    result.outcome = Outcome::internal_error;
    return result;
  }
  sockaddr_storage mapped_storage{};
  std::memcpy(&mapped_storage, mapped.sa(), mapped.len());
  StunMessage reply;
  size_t reply_len = out.size();
  bool controlling = false;
  StunUsageIceReturn built = stun_usage_ice_conncheck_create_reply(
      agent, &req, &reply, out.data(), &reply_len, &mapped_storage, mapped.len(), &controlling, tie_breaker_,
      STUN_USAGE_ICE_COMPATIBILITY_RFC5245);
  if (built != STUN_USAGE_ICE_RETURN_SUCCESS || reply_len == 0 || controlling) {
    result.outcome = Outcome::internal_error;
    result.reply_len = 0;
    return result;
  }
  result.outcome = Outcome::success;
  result.reply_len = reply_len;
  result.nominated = stun_usage_ice_conncheck_use_candidate(&req);

  // A transaction id already answered for another address is a copy of a check someone
  // captured: answer it (the sender may be a client whose NAT rebinding cut a retransmission
  // short) but let it prove nothing. The same id from the same address is a retransmission.
  // The 96-bit RFC 5389 id (libnice's StunTransactionId also holds the cookie).
  std::array<uint8_t, 12> id;
  std::memcpy(id.data(), request.data() + 8, id.size());
  for (size_t i = 0; i < recent_count_; ++i) {
    if (recent_[i].id != id) continue;
    if (!(recent_[i].from == client)) {
      result.replayed = true;
      result.nominated = false;
      return result;
    }
  }
  recent_[recent_next_] = {id, client};
  recent_next_ = (recent_next_ + 1) % kRecentTransactions;
  recent_count_ = std::min(recent_count_ + 1, kRecentTransactions);

  // Consent (RFC 7675) is refreshed by every successful authenticated check, from any
  // address and with either credential generation: the client may move (NAT rebinding,
  // network change, ICE restart) within one session.
  if (!have_check_) {
    have_check_ = true;
    first_check_ = now;
  }
  last_check_ = now;
  last_checked_address_ = client;
  last_check_pending_ = ctx.used_pending;
  if (ctx.used_pending) {
    if (!pending_have_check_) {
      pending_have_check_ = true;
      pending_first_check_ = now;
    }
    pending_last_checked_address_ = client;
    if (result.nominated || config_.nomination_wait <= 0) {
      complete_restart(client);
      result.completed_restart = true;
    }
    return result;
  }
  if (result.nominated || (state_ == State::waiting && config_.nomination_wait <= 0)) {
    selected_ = client;
    have_selected_ = true;
    state_ = State::connected;
  }
  return result;
}

bool IceLiteSession::begin_restart(Credentials next) {
  if (state_ == State::disconnected || state_ == State::closed) return false;
  if (next.local_ufrag.empty() || next.local_pwd.empty() || next.remote_ufrag.empty()) return false;
  if (next.local_ufrag == credentials_.local_ufrag) return false;
  pending_ = std::move(next);
  pending_triggered_ = {};
  pending_have_check_ = false;
  pending_first_check_ = 0;
  last_check_pending_ = false;  // a check of a replaced generation triggers nothing
  return true;
}

void IceLiteSession::complete_restart(const SocketAddress& selected) {
  credentials_ = std::move(*pending_);
  pending_.reset();
  triggered_ = pending_triggered_;
  pending_triggered_ = {};
  pending_have_check_ = false;
  last_check_pending_ = false;
  selected_ = selected;
  have_selected_ = true;
  state_ = State::connected;
}

void IceLiteSession::refresh_consent(Nanos now) {
  if ((state_ != State::waiting && state_ != State::connected) || !have_check_) return;
  last_check_ = std::max(last_check_, now);
}

size_t IceLiteSession::build_triggered_check(const SocketAddress& client, std::span<uint8_t> out) {
  // The pair's generation is that of the latest valid check: a check with a pending restart's
  // credentials gets a check keyed with the client's new pwd, even from a pair already nominated.
  const bool pending = last_check_pending_ && pending_.has_value();
  const Credentials& creds = pending ? *pending_ : credentials_;
  Triggered& triggered = pending ? pending_triggered_ : triggered_;
  if (creds.remote_pwd.empty() || !have_check_ || !(last_checked_address_ == client)) return 0;
  if (state_ != State::waiting && state_ != State::connected) return 0;
  if (!pending && have_selected_ && selected_ == client && state_ == State::connected) return 0;  // nominated
  if (triggered.count == kMaxTriggeredChecks) return 0;
  for (size_t i = 0; i < triggered.count; ++i)
    if (triggered.pairs[i] == client) return 0;
  // USERNAME "<their ufrag>:<ours>": ufrags are at most 256 characters (RFC 8839).
  std::array<uint8_t, 514> username;
  const auto& theirs = creds.remote_ufrag;
  const auto& ours = creds.local_ufrag;
  if (theirs.size() + 1 + ours.size() > username.size()) return 0;
  std::memcpy(username.data(), theirs.data(), theirs.size());
  username[theirs.size()] = ':';
  std::memcpy(username.data() + theirs.size() + 1, ours.data(), ours.size());
  StunAgent* agent = server_agent();
  StunMessage request;
  // Peer-reflexive type preference (110), as RFC 8445 section 7.1.1 asks of a check.
  constexpr uint32_t kPriority = (110u << 24) | (65535u << 8) | 255u;
  const size_t len = stun_usage_ice_conncheck_create(
      agent, &request, out.data(), out.size(), username.data(), theirs.size() + 1 + ours.size(),
      reinterpret_cast<const uint8_t*>(creds.remote_pwd.data()), creds.remote_pwd.size(),
      /*cand_use=*/false, /*controlling=*/false, kPriority, tie_breaker_, nullptr,
      STUN_USAGE_ICE_COMPATIBILITY_RFC5245);
  if (len == 0) return 0;
  // The worker's agent is shared by every session and never validates responses: the
  // session matches them by id itself, so the agent's table of sent requests must not fill.
  StunTransactionId id;  // libnice's: the cookie and the 96-bit id
  stun_message_id(&request, id);
  stun_agent_forget_transaction(agent, id);
  triggered.pairs[triggered.count] = client;
  std::memcpy(triggered.ids[triggered.count].data(), out.data() + 8, 12);
  ++triggered.count;
  return len;
}

bool IceLiteSession::handle_response(std::span<const uint8_t> response) {
  if (!looks_like_stun(response)) return false;
  const uint16_t type = load_be16(response.data());
  if ((type & 0x0110) != 0x0100 && (type & 0x0110) != 0x0110) return false;  // success or error class
  for (const Triggered* triggered : {&triggered_, &pending_triggered_})
    for (size_t i = 0; i < triggered->count; ++i)
      if (std::memcmp(response.data() + 8, triggered->ids[i].data(), 12) == 0) return true;
  return false;
}

void IceLiteSession::on_timer(Nanos now) {
  if ((state_ != State::waiting && state_ != State::connected) || !have_check_) return;
  if (now - last_check_ >= config_.consent_timeout) {
    state_ = State::disconnected;
    return;
  }
  if (pending_ && pending_have_check_ && now - pending_first_check_ >= config_.nomination_wait) {
    complete_restart(pending_last_checked_address_);
    return;
  }
  if (state_ == State::waiting && now - first_check_ >= config_.nomination_wait) {
    selected_ = last_checked_address_;
    have_selected_ = true;
    state_ = State::connected;
  }
}

Nanos IceLiteSession::next_deadline() const {
  if ((state_ != State::waiting && state_ != State::connected) || !have_check_)
    return std::numeric_limits<Nanos>::max();
  Nanos deadline = last_check_ + config_.consent_timeout;
  if (state_ == State::waiting) deadline = std::min(deadline, first_check_ + config_.nomination_wait);
  if (pending_ && pending_have_check_)
    deadline = std::min(deadline, pending_first_check_ + config_.nomination_wait);
  return deadline;
}

std::optional<Nanos> IceLiteSession::last_valid_check() const {
  if (!have_check_) return std::nullopt;
  return last_check_;
}

std::optional<SocketAddress> IceLiteSession::selected_address() const {
  if (!have_selected_) return std::nullopt;
  return selected_;
}

const char* to_string(IceLiteSession::Outcome outcome) {
  static constexpr const char* kNames[] = {RTCE_ICE_LITE_OUTCOMES(RTCE_VOCAB_LABEL)};
  return vocab_name(kNames, outcome);
}

const char* to_string(IceLiteSession::State state) {
  static constexpr const char* kNames[] = {RTCE_ICE_LITE_STATES(RTCE_VOCAB_LABEL)};
  return vocab_name(kNames, state);
}

}  // namespace rtce
