// ice_responder.cpp — see ice_responder.h.
#include "ice_responder.h"

#include <stun/stunagent.h>
#include <stun/usages/ice.h>

#include <cstring>

#include "byte_order.h"
#include "rtce_stun.h"

namespace rtce::loadgen {
namespace {

uint16_t kRequestKnownAttributes[] = {STUN_ATTRIBUTE_USERNAME,        STUN_ATTRIBUTE_MESSAGE_INTEGRITY,
                                      STUN_ATTRIBUTE_FINGERPRINT,     STUN_ATTRIBUTE_PRIORITY,
                                      STUN_ATTRIBUTE_USE_CANDIDATE,   STUN_ATTRIBUTE_ICE_CONTROLLED,
                                      STUN_ATTRIBUTE_ICE_CONTROLLING, 0};

constexpr uint32_t kMagicCookie = 0x2112A442;

size_t build_error(StunAgent* agent, StunMessage& request, std::span<uint8_t> out, StunError code) {
  StunMessage reply;
  if (!stun_agent_init_error(agent, &reply, out.data(), out.size(), &request, code)) return 0;
  return stun_agent_finish_message(agent, &reply, nullptr, 0);
}

}  // namespace

struct IceBindingResponder::Impl {
  StunAgent agent;
  // libnice's default validater compares the whole USERNAME and hands back this key; both
  // live here, at stable addresses, for the life of the responder.
  std::string username;  // "<local ufrag>:<remote ufrag>"
  std::string pwd;
  StunDefaultValidaterData credentials[2]{};
};

IceBindingResponder::IceBindingResponder(std::string local_ufrag, std::string local_pwd,
                                         std::string remote_ufrag)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  stun_agent_init(&s.agent, kRequestKnownAttributes, STUN_COMPATIBILITY_RFC5389,
                  static_cast<StunAgentUsageFlags>(STUN_AGENT_USAGE_SHORT_TERM_CREDENTIALS |
                                                   STUN_AGENT_USAGE_USE_FINGERPRINT));
  s.username = local_ufrag + ":" + remote_ufrag;
  s.pwd = std::move(local_pwd);
  // libnice only reads through these pointers.
  s.credentials[0] = {reinterpret_cast<uint8_t*>(s.username.data()), s.username.size(),
                      reinterpret_cast<uint8_t*>(s.pwd.data()), s.pwd.size()};
  s.credentials[1] = {nullptr, 0, nullptr, 0};
}

IceBindingResponder::~IceBindingResponder() = default;

bool IceBindingResponder::is_request(std::span<const uint8_t> d) {
  if (d.size() < 20 || rtce_classify_first_byte(d[0]) != RTCE_FIRST_BYTE_STUN) return false;
  return load_be32(d.data() + 4) == kMagicCookie && (load_be16(d.data()) & 0x0110) == 0;
}

IceBindingResponder::Result IceBindingResponder::answer(std::span<const uint8_t> request,
                                                        const SocketAddress& from, bool& controlling,
                                                        uint64_t tie_breaker, std::span<uint8_t> out) {
  Impl& s = *impl_;
  Result result;
  if (!is_request(request)) return result;
  StunMessage req;
  const StunValidationStatus status = stun_agent_validate(&s.agent, &req, request.data(), request.size(),
                                                          stun_agent_default_validater, s.credentials);
  switch (status) {
    case STUN_VALIDATION_SUCCESS: break;
    case STUN_VALIDATION_UNAUTHORIZED_BAD_REQUEST:
      result.outcome = Outcome::unauthenticated;
      result.reply_len = build_error(&s.agent, req, out, STUN_ERROR_BAD_REQUEST);
      return result;
    case STUN_VALIDATION_UNAUTHORIZED:
      result.outcome = Outcome::unauthenticated;
      result.reply_len = build_error(&s.agent, req, out, STUN_ERROR_UNAUTHORIZED);
      return result;
    case STUN_VALIDATION_UNKNOWN_REQUEST_ATTRIBUTE: {
      StunMessage reply;
      result.outcome = Outcome::unknown_attribute;
      result.reply_len =
          stun_agent_build_unknown_attributes_error(&s.agent, &reply, out.data(), out.size(), &req);
      return result;
    }
    default: return result;  // malformed: RFC 5389 section 7.3, silent discard
  }
  if (req.key == nullptr) {  // short-term credentials should make this impossible; never answer 200 unsigned
    result.outcome = Outcome::unauthenticated;
    result.reply_len = build_error(&s.agent, req, out, STUN_ERROR_UNAUTHORIZED);
    return result;
  }
  if (stun_message_get_method(&req) != STUN_BINDING) {
    result.outcome = Outcome::malformed;
    result.reply_len = build_error(&s.agent, req, out, STUN_ERROR_BAD_REQUEST);
    return result;
  }
  const SocketAddress mapped = from.unmapped();
  sockaddr_storage mapped_storage{};
  std::memcpy(&mapped_storage, mapped.sa(), mapped.len());
  StunMessage reply;
  size_t reply_len = out.size();
  const bool was_controlling = controlling;
  const StunUsageIceReturn built = stun_usage_ice_conncheck_create_reply(
      &s.agent, &req, &reply, out.data(), &reply_len, &mapped_storage, mapped.len(), &controlling,
      tie_breaker, STUN_USAGE_ICE_COMPATIBILITY_RFC5245);
  if ((built != STUN_USAGE_ICE_RETURN_SUCCESS && built != STUN_USAGE_ICE_RETURN_ROLE_CONFLICT) ||
      reply_len == 0) {
    result.outcome = Outcome::malformed;
    result.reply_len = 0;
    return result;
  }
  result.reply_len = reply_len;
  // libnice writes the 487 itself and reports success; a switch is reported as ROLE_CONFLICT.
  if (stun_message_get_class(&reply) == STUN_ERROR)
    result.outcome = Outcome::role_conflict;
  else
    result.outcome = controlling != was_controlling ? Outcome::role_switched : Outcome::success;
  result.use_candidate = stun_usage_ice_conncheck_use_candidate(&req);
  return result;
}

const char* to_string(IceBindingResponder::Outcome outcome) {
  using O = IceBindingResponder::Outcome;
  switch (outcome) {
    case O::success: return "success";
    case O::role_switched: return "role_switched";
    case O::role_conflict: return "role_conflict";
    case O::unauthenticated: return "unauthenticated";
    case O::unknown_attribute: return "unknown_attribute";
    case O::malformed: return "malformed";
  }
  return "?";
}

}  // namespace rtce::loadgen
