// fuzz_dtls_srtp.cc — arbitrary datagrams into a server DtlsTransport and arbitrary packets
// into SRTP/SRTCP unprotect of both profiles. The first byte picks the target; for DTLS the
// rest is a sequence of [u16 length][datagram] with the clock advancing between them.
#include <cstddef>
#include <cstdint>
#include <cstring>
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
  switch (data[0] % 3) {
    case 0: fuzz_dtls(data + 1, size - 1); break;
    case 1: fuzz_srtp(data + 1, size - 1, false); break;
    default: fuzz_srtp(data + 1, size - 1, true); break;
  }
  return 0;
}
