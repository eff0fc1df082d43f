// ice_client.h — the client half of one ICE connectivity check, for tests and the load
// generator: builds a Binding request the way a controlling browser does (USERNAME
// "server:client", PRIORITY, ICE-CONTROLLING, USE-CANDIDATE, MESSAGE-INTEGRITY keyed with
// the server pwd, FINGERPRINT) and checks the answer. libnice's stun/usages/ice.h does the
// encoding. Not for the media path: it holds a 12.8 KB libnice agent per instance.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "net_address.h"
#include "vocab.h"

namespace rtce {

class IceClientChecker {
 public:
  // Peer-reflexive type preference (110) as RFC 8445 section 7.1.1 asks for a check's PRIORITY.
  static constexpr uint32_t kDefaultPriority = (110u << 24) | (65535u << 8) | 255u;

  struct RequestOptions {
    bool use_candidate = true;
    bool controlling = true;  // false sends ICE-CONTROLLED (a lite server answers 487)
    uint32_t priority = kDefaultPriority;
  };
#define RTCE_ICE_CLIENT_VERDICTS(X)                                                              \
  X(success)           /* 200 with a verified MESSAGE-INTEGRITY and an XOR-MAPPED-ADDRESS */     \
  X(error_response)    /* an error response for our transaction; see error_code */               \
  X(unmatched)         /* not a response to the outstanding check (wrong transaction id) */      \
  X(bad_integrity)     /* MESSAGE-INTEGRITY missing or not keyed with the server pwd */          \
  X(malformed)         /* not STUN, bad FINGERPRINT, unknown comprehension-required attribute */ \
  X(no_mapped_address) /* success response without (XOR-)MAPPED-ADDRESS */
  enum class Verdict { RTCE_ICE_CLIENT_VERDICTS(RTCE_VOCAB_ENUMERATOR) };
  struct Response {
    Verdict verdict = Verdict::malformed;
    std::optional<SocketAddress> mapped;
    int error_code = 0;
  };

  // tie_breaker: nullopt draws a random one.
  IceClientChecker(std::string server_ufrag, std::string server_pwd, std::string client_ufrag,
                   std::optional<uint64_t> tie_breaker = std::nullopt);
  ~IceClientChecker();
  IceClientChecker(IceClientChecker&&) noexcept;
  IceClientChecker& operator=(IceClientChecker&&) noexcept;

  // Writes a Binding request with a fresh transaction id into out; returns its length, 0 if
  // out is too small. One check is outstanding at a time: this forgets the previous one.
  size_t build_request(std::span<uint8_t> out, const RequestOptions& options);
  size_t build_request(std::span<uint8_t> out) { return build_request(out, RequestOptions{}); }
  Response process_response(std::span<const uint8_t> datagram);

  std::array<uint8_t, 12> transaction_id() const;
  uint64_t tie_breaker() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

const char* to_string(IceClientChecker::Verdict verdict);

}  // namespace rtce
