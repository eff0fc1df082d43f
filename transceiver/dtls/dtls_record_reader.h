// dtls_record_reader.h — the peer's DTLS 1.2 records of the first epoch after the handshake,
// read without the SSL object: AEAD open under the peer's write key and IV from the key block
// (RFC 5246 §6.3: AES-GCM per RFC 5288, ChaCha20-Poly1305 per RFC 7905), and a replay window
// (RFC 6347 §4.1.2.6). A DtlsTransport that released its SSL after an audio-only handshake
// keeps one (a few hundred bytes instead of the SSL's ~70 KiB) to authenticate what may still
// arrive: close_notify, a fatal alert, a repeated Finished, stray application data. CBC suites
// are not read (from_connected refuses them), so such a session keeps its SSL.
#pragma once

#include <openssl/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

namespace rtce {

class DtlsRecordReader {
 public:
  // The reader of the records `ssl`'s peer sends from now on; nullopt unless `ssl` completed
  // a handshake with an AEAD suite (AES-128/256-GCM, ChaCha20-Poly1305).
  static std::optional<DtlsRecordReader> from_connected(SSL* ssl);

  DtlsRecordReader(DtlsRecordReader&&) noexcept;
  DtlsRecordReader& operator=(DtlsRecordReader&&) noexcept;
  ~DtlsRecordReader();

  struct Record {
    uint8_t type = 0;  // 21 alert, 22 handshake, 23 application data
    std::span<const uint8_t> plaintext;
  };
  // One record, its 13-byte header included. The plaintext goes to `out`. nullopt for a
  // record of another epoch (a stale handshake retransmission), a forged or malformed one, a
  // replay, or one whose plaintext does not fit `out`: all dropped, as OpenSSL drops them.
  std::optional<Record> open(std::span<const uint8_t> record, std::span<uint8_t> out);

  // The epoch whose records are read: the first after the handshake (no renegotiation).
  static constexpr uint16_t kEpoch = 1;
  static constexpr size_t kTagLength = 16;

 private:
  enum class Aead : uint8_t { aes_128_gcm, aes_256_gcm, chacha20_poly1305 };
  DtlsRecordReader() = default;
  bool accept_sequence(uint64_t sequence) const;
  void mark_sequence(uint64_t sequence);

  Aead aead_ = Aead::aes_128_gcm;
  std::array<uint8_t, 32> key_{};
  std::array<uint8_t, 12> iv_{};  // GCM: the 4-byte salt; ChaCha20: all 12
  // The newest sequence number accepted and a bit per earlier one (bit i: newest - i).
  uint64_t newest_ = 0;
  uint64_t window_ = 1;  // the peer's Finished (sequence 0) was read by the SSL
  // Built at the first record: most sessions never see one after the handshake.
  struct CipherCtxFree {
    void operator()(EVP_CIPHER_CTX* ctx) const;
  };
  std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree> ctx_;
};

}  // namespace rtce
