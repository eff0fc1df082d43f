// ice_client.cpp — see ice_client.h.
#include "ice_client.h"

#include <stun/stunagent.h>
#include <stun/usages/ice.h>

#include <cstring>

#include "random.h"
#include "vocab.h"

namespace rtce {
namespace {

// What a success or error response to a check may carry that the client must understand
// (libnice echoes USERNAME in its replies).
uint16_t kClientKnownAttributes[] = {STUN_ATTRIBUTE_MAPPED_ADDRESS, STUN_ATTRIBUTE_XOR_MAPPED_ADDRESS,
                                     STUN_ATTRIBUTE_USERNAME,       STUN_ATTRIBUTE_MESSAGE_INTEGRITY,
                                     STUN_ATTRIBUTE_ERROR_CODE,     STUN_ATTRIBUTE_UNKNOWN_ATTRIBUTES,
                                     STUN_ATTRIBUTE_FINGERPRINT,    0};

}  // namespace

struct IceClientChecker::Impl {
  StunAgent agent;
  // libnice keeps a pointer to the key of each outstanding request, so the pwd lives here,
  // at a stable address for the life of the agent.
  std::string username;
  std::string server_pwd;
  uint64_t tie_breaker = 0;
  StunTransactionId outstanding{};
  bool have_outstanding = false;
};

IceClientChecker::IceClientChecker(std::string server_ufrag, std::string server_pwd, std::string client_ufrag,
                                   std::optional<uint64_t> tie_breaker)
    : impl_(std::make_unique<Impl>()) {
  stun_agent_init(&impl_->agent, kClientKnownAttributes, STUN_COMPATIBILITY_RFC5389,
                  static_cast<StunAgentUsageFlags>(STUN_AGENT_USAGE_SHORT_TERM_CREDENTIALS |
                                                   STUN_AGENT_USAGE_USE_FINGERPRINT));
  impl_->username = server_ufrag + ":" + client_ufrag;
  impl_->server_pwd = std::move(server_pwd);
  if (tie_breaker) {
    impl_->tie_breaker = *tie_breaker;
  } else {
    fill_random(&impl_->tie_breaker, sizeof impl_->tie_breaker);
  }
}

IceClientChecker::~IceClientChecker() = default;
IceClientChecker::IceClientChecker(IceClientChecker&&) noexcept = default;
IceClientChecker& IceClientChecker::operator=(IceClientChecker&&) noexcept = default;

size_t IceClientChecker::build_request(std::span<uint8_t> out, const RequestOptions& options) {
  Impl& s = *impl_;
  if (s.have_outstanding) {
    stun_agent_forget_transaction(&s.agent, s.outstanding);
    s.have_outstanding = false;
  }
  StunMessage msg;
  size_t len = stun_usage_ice_conncheck_create(
      &s.agent, &msg, out.data(), out.size(), reinterpret_cast<const uint8_t*>(s.username.data()),
      s.username.size(), reinterpret_cast<const uint8_t*>(s.server_pwd.data()), s.server_pwd.size(),
      options.use_candidate, options.controlling, options.priority, s.tie_breaker, nullptr,
      STUN_USAGE_ICE_COMPATIBILITY_RFC5245);
  if (len == 0) return 0;
  stun_message_id(&msg, s.outstanding);
  s.have_outstanding = true;
  return len;
}

IceClientChecker::Response IceClientChecker::process_response(std::span<const uint8_t> datagram) {
  Impl& s = *impl_;
  Response response;
  StunMessage msg;
  StunValidationStatus status =
      stun_agent_validate(&s.agent, &msg, datagram.data(), datagram.size(), nullptr, nullptr);
  switch (status) {
    case STUN_VALIDATION_SUCCESS: break;
    case STUN_VALIDATION_UNMATCHED_RESPONSE: response.verdict = Verdict::unmatched; return response;
    case STUN_VALIDATION_UNAUTHORIZED:
    case STUN_VALIDATION_UNAUTHORIZED_BAD_REQUEST: response.verdict = Verdict::bad_integrity; return response;
    default: response.verdict = Verdict::malformed; return response;
  }
  StunClass cls = stun_message_get_class(&msg);
  if (cls != STUN_RESPONSE && cls != STUN_ERROR) {
    response.verdict = Verdict::unmatched;
    return response;
  }
  // libnice matched the transaction and dropped it from its table.
  s.have_outstanding = false;
  if (cls == STUN_ERROR) {
    int code = 0;
    response.verdict = Verdict::error_response;
    if (stun_message_find_error(&msg, &code) == STUN_MESSAGE_RETURN_SUCCESS) response.error_code = code;
    return response;
  }
  sockaddr_storage mapped{};
  socklen_t mapped_len = sizeof mapped;
  StunUsageIceReturn processed =
      stun_usage_ice_conncheck_process(&msg, &mapped, &mapped_len, STUN_USAGE_ICE_COMPATIBILITY_RFC5245);
  if (processed != STUN_USAGE_ICE_RETURN_SUCCESS) {
    response.verdict = Verdict::no_mapped_address;
    return response;
  }
  response.verdict = Verdict::success;
  response.mapped = SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&mapped), mapped_len);
  return response;
}

std::array<uint8_t, 12> IceClientChecker::transaction_id() const {
  // libnice's transaction id includes the 4-byte magic cookie in front of RFC 5389's 12 bytes.
  static_assert(sizeof(StunTransactionId) == 16);
  std::array<uint8_t, 12> id{};
  std::memcpy(id.data(), impl_->outstanding + 4, id.size());
  return id;
}

uint64_t IceClientChecker::tie_breaker() const { return impl_->tie_breaker; }

const char* to_string(IceClientChecker::Verdict verdict) {
  static constexpr const char* kNames[] = {RTCE_ICE_CLIENT_VERDICTS(RTCE_VOCAB_LABEL)};
  return vocab_name(kNames, verdict);
}

}  // namespace rtce
