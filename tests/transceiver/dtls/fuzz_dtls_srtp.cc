// fuzz_dtls_srtp.cc — arbitrary datagrams into a server DtlsTransport, into a client
// DtlsTransport that released its SSL after a real handshake (its record reader: headers,
// epochs, lengths, AEAD, replay window), and arbitrary packets into SRTP/SRTCP unprotect of both
// profiles. The first byte picks the target; for DTLS the rest is a sequence of
// [u16 length][datagram] with the clock advancing between them; for the released transport a
// datagram whose first byte is 0 is instead the rest XORed over a genuine record from the peer.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "transceiver/dtls/dtls_transport.h"
#include "transceiver/srtp/srtp_session.h"

namespace {

using rtce::DtlsContext;
using rtce::DtlsTransport;
using rtce::SrtpProfile;
using rtce::SrtpSession;

void fuzz_dtls(const uint8_t* data, size_t size) {
  static std::shared_ptr<DtlsContext> context = DtlsContext::generate();
  DtlsTransport::Callbacks callbacks;
  callbacks.send = [](std::span<const uint8_t> d) {
    if (d.size() > 1200) __builtin_trap();  // a datagram over the MTU is a bug
  };
  callbacks.on_application_data = [](std::span<const uint8_t>) {};
  DtlsTransport server(context, DtlsTransport::Role::server, std::vector<uint8_t>(32, 0x5a),
                       std::move(callbacks));
  rtce::Nanos now = 1'000'000'000;
  server.start(now);
  size_t offset = 0;
  while (size - offset >= 2) {
    size_t length = static_cast<size_t>(data[offset]) << 8 | data[offset + 1];
    offset += 2;
    length = std::min(length, size - offset);
    server.handle_datagram(std::span<const uint8_t>(data + offset, length), now);
    offset += length;
    now += 50'000'000;
    server.on_timer(now);
  }
  server.close();
}

// A handshake between two in-memory transports, the client released (what an audio-only
// session keeps), then the datagrams; the server's genuine application-data record is the
// base of the XOR mutations.
void fuzz_released(const uint8_t* data, size_t size) {
  static std::shared_ptr<DtlsContext> ours = DtlsContext::generate();
  static std::shared_ptr<DtlsContext> theirs = DtlsContext::generate();
  std::vector<std::vector<uint8_t>> to_client, to_server;
  auto transport = [](std::shared_ptr<DtlsContext> context, DtlsTransport::Role role,
                      const std::shared_ptr<DtlsContext>& peer, std::vector<std::vector<uint8_t>>& out,
                      bool release) {
    DtlsTransport::Callbacks callbacks;
    callbacks.send = [&out](std::span<const uint8_t> d) {
      if (d.size() > 1200) __builtin_trap();
      out.emplace_back(d.begin(), d.end());
    };
    callbacks.on_application_data = [](std::span<const uint8_t> plaintext) {
      if (plaintext.size() > 16384) __builtin_trap();
    };
    DtlsTransport::Config config;
    config.release_after_handshake = release;
    return DtlsTransport(std::move(context), role, peer->fingerprint_sha256_bytes(), std::move(callbacks),
                         config);
  };
  DtlsTransport client = transport(ours, DtlsTransport::Role::client, theirs, to_server, true);
  DtlsTransport server = transport(theirs, DtlsTransport::Role::server, ours, to_client, false);
  rtce::Nanos now = 1'000'000'000;
  server.start(now);
  client.start(now);
  for (int round = 0; round < 20 && (!to_client.empty() || !to_server.empty()); ++round) {
    for (auto batch = std::exchange(to_server, {}); const auto& d : batch) server.handle_datagram(d, now);
    for (auto batch = std::exchange(to_client, {}); const auto& d : batch) client.handle_datagram(d, now);
  }
  if (!client.ssl_released()) return;
  const uint8_t hello[] = {'h', 'i'};
  if (!server.send_application_data(hello) || to_client.empty()) return;
  const std::vector<uint8_t> genuine = to_client.back();
  size_t offset = 0;
  while (size - offset >= 2) {
    size_t length = static_cast<size_t>(data[offset]) << 8 | data[offset + 1];
    offset += 2;
    length = std::min(length, size - offset);
    std::vector<uint8_t> datagram(data + offset, data + offset + length);
    if (!datagram.empty() && datagram[0] == 0) {
      std::vector<uint8_t> mutated = genuine;
      for (size_t i = 1; i < datagram.size() && i - 1 < mutated.size(); ++i) mutated[i - 1] ^= datagram[i];
      datagram = std::move(mutated);
    }
    client.handle_datagram(datagram, now);
    offset += length;
    now += 50'000'000;
    client.on_timer(now);
  }
  client.close();
}

void fuzz_srtp(const uint8_t* data, size_t size, bool rtcp) {
  if (size == 0) return;
  static const std::vector<uint8_t> key(16 + 14, 0x42);
  static SrtpSession cm(SrtpProfile::aes128_cm_sha1_80, SrtpSession::Direction::inbound, key);
  static SrtpSession gcm(SrtpProfile::aead_aes_128_gcm, SrtpSession::Direction::inbound,
                         std::span<const uint8_t>(key.data(), 16 + 12));
  std::vector<uint8_t> buffer(data, data + size);
  for (SrtpSession* session : {&cm, &gcm}) {
    std::memcpy(buffer.data(), data, size);
    size_t length = size;
    rtce::SrtpError error =
        rtcp ? session->unprotect_rtcp(buffer.data(), length) : session->unprotect_rtp(buffer.data(), length);
    if (error == rtce::SrtpError::ok && length > size) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 4) {
    case 0: fuzz_dtls(data + 1, size - 1); break;
    case 1: fuzz_srtp(data + 1, size - 1, false); break;
    case 2: fuzz_srtp(data + 1, size - 1, true); break;
    default: fuzz_released(data + 1, size - 1); break;
  }
  return 0;
}
