// fuzz_sctp_packet.cc — libFuzzer over SCTP packets. The pre-check must never read past its
// input. Every packet it accepts is then made to look like it came from the live peer of an
// established association (ports 5000, the verification tag the peer uses, checksum fixed),
// so usrsctp parses its chunks for real and DATA chunks reach our reassembly, DCEP and
// PPID handling; the endpoint must count or absorb it without crashing, and the link is
// stepped so that whatever the packet provoked (SACKs, resets, ABORTs) runs too.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "data_channel_test_link.h"
#include "sctp_packet.h"

namespace {

using State = rtce::DataChannelEndpoint::State;

struct Target {
  std::unique_ptr<rtce::testing::Link> link;
  uint8_t peer_tag[4] = {};
};

Target& target() {
  static Target t;
  const bool usable = t.link && t.link->a.ep->state() == State::open && t.link->b.ep->state() == State::open;
  if (!usable) {
    t.link.reset();
    auto link = std::make_unique<rtce::testing::Link>();
    if (!link->connect() || !link->open("oai-events")) abort();
    // The tag a writes into its packets is the one b checks.
    const auto& last = link->a.captured.back();
    std::memcpy(t.peer_tag, last.data() + 4, 4);
    link->a.captured.clear();
    link->b.captured.clear();
    t.link = std::move(link);
  }
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto framing = rtce::check_sctp_packet(std::span(data, size), /*verify_checksum=*/false);
  if (framing.error) return 0;
  if (framing.chunks == 0) abort();
  std::vector<uint8_t> packet(data, data + size);
  rtce::set_sctp_checksum(packet);
  if (rtce::check_sctp_packet(packet).error) abort();  // a fixed checksum is a good checksum

  Target& t = target();
  const uint8_t ports[] = {0x13, 0x88, 0x13, 0x88};
  std::memcpy(packet.data(), ports, 4);
  std::memcpy(packet.data() + 4, t.peer_tag, 4);
  rtce::set_sctp_checksum(packet);
  t.link->b.ep->handle_packet(packet, rtce::monotonic_now());
  for (int i = 0; i < 8 && t.link->step(); ++i) {
  }
  t.link->a.messages.clear();
  t.link->b.messages.clear();
  t.link->a.captured.clear();
  t.link->b.captured.clear();
  return 0;
}
