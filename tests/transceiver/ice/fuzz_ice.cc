// fuzz_ice.cc — libFuzzer target for the ICE-lite server: the routing-ufrag walk, STUN
// demux, IceLiteSession::handle_request and the client's response check. The first input
// byte picks how the rest is fed: as is, or re-signed (MESSAGE-INTEGRITY with the session pwd
// and FINGERPRINT recomputed) so that mutations get past the HMAC and CRC into libnice's
// attribute handling and reply building. An odd-sized input meets a session in an ICE restart
// whose pending credentials are the ones the input is signed with, so the restart's paths
// (pending key, completion on nomination) are fuzzed too.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "ice_client.h"
#include "ice_lite.h"
#include "stun_test_util.h"

namespace {

constexpr char kServerUfrag[] = "EQEAAhmWo1ORAxOA";
constexpr char kServerPwd[] = "rtcedgegoldenpassword0123";
constexpr char kClientUfrag[] = "02Jx";

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rtce;
  if (size == 0) return 0;
  uint8_t mode = data[0] % 3;
  // An exact-size copy, so that ASan sees any read past the datagram.
  std::vector<uint8_t> datagram(data + 1, data + size);
  if (mode != 0) {
    if (auto m = stun_test::decode(datagram)) {
      datagram = mode == 1 ? stun_test::encode(*m, std::string_view(kServerPwd))
                           : stun_test::encode(*m, std::nullopt);
    }
  }

  if (auto ufrag = stun_request_server_ufrag(datagram)) {
    const auto* begin = reinterpret_cast<const char*>(datagram.data());
    check(ufrag->data() >= begin && ufrag->data() + ufrag->size() <= begin + datagram.size());
    check(!ufrag->empty());
  }
  (void)looks_like_stun(datagram);

  static IceLiteSession::Config config{};
  const bool restart = (size & 1) != 0;
  const IceLiteSession::Credentials golden{kServerUfrag, kServerPwd, kClientUfrag,
                                           "unusedremotepassword0123"};
  IceLiteSession session(restart ? IceLiteSession::Credentials{"oldserverufrag", "oldserverpassword0123456",
                                                               "oldc", "oldremotepassword0123456"}
                                 : golden,
                         config);
  if (restart) check(session.begin_restart(golden));
  static const SocketAddress client = *SocketAddress::parse("192.0.2.2:54321");
  std::vector<uint8_t> out(kIceReplyBufferSize);
  auto result = session.handle_request(datagram, client, out, 1'000'000'000);
  check(result.reply_len <= out.size());
  if (result.outcome == IceLiteSession::Outcome::success) {
    check(result.authenticated && result.reply_len > 0);
    // What we send must carry our integrity and a valid fingerprint.
    std::span<const uint8_t> reply(out.data(), result.reply_len);
    check(stun_test::integrity_valid(reply, kServerPwd));
    check(stun_test::fingerprint_valid(reply));
    check(result.pending_credentials_used == restart);
    check(result.completed_restart == (restart && result.nominated));
    check(session.credentials().local_ufrag == kServerUfrag || !result.completed_restart);
  } else {
    check(!result.completed_restart);
  }
  if (result.reply_len > 0)
    check(stun_test::decode(std::span<const uint8_t>(out.data(), result.reply_len)).has_value());
  session.on_timer(40'000'000'000);

  static IceClientChecker checker(kServerUfrag, kServerPwd, kClientUfrag, 1);
  static std::vector<uint8_t> request_buffer(512);
  if (checker.build_request(request_buffer) == 0) std::abort();
  (void)checker.process_response(datagram);
  return 0;
}
