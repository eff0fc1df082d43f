// fuzz_sctp_packet.cc — libFuzzer over SCTP packets: the pre-check must never read past its
// input, and every packet it accepts (checksum fixed up, so usrsctp parses it too) is fed
// to a live, connecting DataChannelEndpoint, which must count or absorb it without crashing.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "data_channel_endpoint.h"
#include "sctp_packet.h"

namespace {

std::unique_ptr<rtce::DataChannelEndpoint>& endpoint() {
  static std::unique_ptr<rtce::DataChannelEndpoint> ep;
  return ep;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto framing = rtce::check_sctp_packet(std::span(data, size), /*verify_checksum=*/false);
  if (framing.error) return 0;
  if (framing.chunks == 0) abort();
  std::vector<uint8_t> packet(data, data + size);
  rtce::set_sctp_checksum(packet);
  if (rtce::check_sctp_packet(packet).error) abort();  // a fixed checksum is a good checksum

  auto& ep = endpoint();
  if (!ep || ep->state() == rtce::DataChannelEndpoint::State::failed ||
      ep->state() == rtce::DataChannelEndpoint::State::closed) {
    rtce::DataChannelEndpoint::Config config;
    config.dtls_client = false;
    rtce::DataChannelEndpoint::Callbacks callbacks;
    callbacks.send = [](std::span<const uint8_t> p) {
      if (p.empty()) abort();
    };
    ep.reset();
    ep = std::make_unique<rtce::DataChannelEndpoint>(config, std::move(callbacks));
    ep->start(rtce::monotonic_now());
  }
  ep->handle_packet(packet, rtce::monotonic_now());
  return 0;
}
