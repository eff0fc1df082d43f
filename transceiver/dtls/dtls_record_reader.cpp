// dtls_record_reader.cpp — see dtls_record_reader.h.
#include "transceiver/dtls/dtls_record_reader.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/obj_mac.h>
#include <openssl/params.h>
#include <openssl/ssl.h>

#include <cstring>

namespace rtce {
namespace {

constexpr size_t kHeaderLength = 13;
constexpr size_t kGcmExplicitNonceLength = 8;
constexpr size_t kReplayWindow = 64;
constexpr char kKeyExpansionLabel[] = "key expansion";

// Fetched once per process; never freed (a fetched cipher keeps its provider loaded).
const EVP_CIPHER* fetch_cipher(const char* name) {
  static const EVP_CIPHER* aes128 = EVP_CIPHER_fetch(nullptr, "AES-128-GCM", nullptr);
  static const EVP_CIPHER* aes256 = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  static const EVP_CIPHER* chacha = EVP_CIPHER_fetch(nullptr, "ChaCha20-Poly1305", nullptr);
  if (std::strcmp(name, "AES-128-GCM") == 0) return aes128;
  if (std::strcmp(name, "AES-256-GCM") == 0) return aes256;
  return chacha;
}

// RFC 5246 §6.3: key_block = PRF(master_secret, "key expansion", server_random + client_random),
// the PRF's hash being the suite's handshake digest (SHA-256, or SHA-384 for AES-256-GCM).
bool derive_key_block(SSL* ssl, const EVP_MD* digest, std::span<uint8_t> out) {
  uint8_t master[SSL_MAX_MASTER_KEY_LENGTH];
  const size_t master_length = SSL_SESSION_get_master_key(SSL_get_session(ssl), master, sizeof master);
  uint8_t seed[sizeof kKeyExpansionLabel - 1 + 2 * SSL3_RANDOM_SIZE];
  std::memcpy(seed, kKeyExpansionLabel, sizeof kKeyExpansionLabel - 1);
  const bool randoms = SSL_get_server_random(ssl, seed + sizeof kKeyExpansionLabel - 1, SSL3_RANDOM_SIZE) ==
                           SSL3_RANDOM_SIZE &&
                       SSL_get_client_random(ssl, seed + sizeof kKeyExpansionLabel - 1 + SSL3_RANDOM_SIZE,
                                             SSL3_RANDOM_SIZE) == SSL3_RANDOM_SIZE;
  bool ok = false;
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "TLS1-PRF", nullptr);
  EVP_KDF_CTX* ctx = kdf != nullptr ? EVP_KDF_CTX_new(kdf) : nullptr;
  if (ctx != nullptr && master_length > 0 && randoms) {
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>(EVP_MD_get0_name(digest)),
                                         0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SECRET, master, master_length),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SEED, seed, sizeof seed),
        OSSL_PARAM_construct_end(),
    };
    ok = EVP_KDF_derive(ctx, out.data(), out.size(), params) == 1;
  }
  EVP_KDF_CTX_free(ctx);
  EVP_KDF_free(kdf);
  OPENSSL_cleanse(master, sizeof master);
  return ok;
}

uint64_t read_be48(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 6; ++i) v = v << 8 | p[i];
  return v;
}

}  // namespace

void DtlsRecordReader::CipherCtxFree::operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }

DtlsRecordReader::DtlsRecordReader(DtlsRecordReader&&) noexcept = default;
DtlsRecordReader& DtlsRecordReader::operator=(DtlsRecordReader&&) noexcept = default;
DtlsRecordReader::~DtlsRecordReader() { OPENSSL_cleanse(key_.data(), key_.size()); }

std::optional<DtlsRecordReader> DtlsRecordReader::from_connected(SSL* ssl) {
  if (ssl == nullptr || !SSL_is_init_finished(ssl)) return std::nullopt;
  const SSL_CIPHER* cipher = SSL_get_current_cipher(ssl);
  if (cipher == nullptr) return std::nullopt;
  DtlsRecordReader reader;
  switch (SSL_CIPHER_get_cipher_nid(cipher)) {
    case NID_aes_128_gcm: reader.aead_ = Aead::aes_128_gcm; break;
    case NID_aes_256_gcm: reader.aead_ = Aead::aes_256_gcm; break;
    case NID_chacha20_poly1305: reader.aead_ = Aead::chacha20_poly1305; break;
    default: return std::nullopt;  // CBC: MAC-then-encrypt and padding are not worth a second reader
  }
  const size_t key_length = reader.aead_ == Aead::aes_128_gcm ? 16 : 32;
  const size_t iv_length = reader.aead_ == Aead::chacha20_poly1305 ? 12 : 4;  // RFC 7905 / RFC 5288
  const EVP_MD* digest = SSL_CIPHER_get_handshake_digest(cipher);
  if (digest == nullptr) return std::nullopt;
  // client_write_key | server_write_key | client_write_IV | server_write_IV (no MAC keys: AEAD).
  uint8_t block[2 * 32 + 2 * 12];
  const size_t block_length = 2 * (key_length + iv_length);
  if (!derive_key_block(ssl, digest, std::span(block, block_length))) return std::nullopt;
  // The peer's write side is ours to read: the client's when we are the server.
  const bool peer_is_client = SSL_is_server(ssl) == 1;
  const uint8_t* key = block + (peer_is_client ? 0 : key_length);
  const uint8_t* iv = block + 2 * key_length + (peer_is_client ? 0 : iv_length);
  std::memcpy(reader.key_.data(), key, key_length);
  std::memcpy(reader.iv_.data(), iv, iv_length);
  OPENSSL_cleanse(block, sizeof block);
  return reader;
}

bool DtlsRecordReader::accept_sequence(uint64_t sequence) const {
  if (sequence > newest_) return true;
  const uint64_t behind = newest_ - sequence;
  return behind < kReplayWindow && (window_ >> behind & 1) == 0;
}

void DtlsRecordReader::mark_sequence(uint64_t sequence) {
  if (sequence > newest_) {
    const uint64_t shift = sequence - newest_;
    window_ = shift >= kReplayWindow ? 1 : (window_ << shift | 1);
    newest_ = sequence;
  } else {
    window_ |= uint64_t{1} << (newest_ - sequence);
  }
}

std::optional<DtlsRecordReader::Record> DtlsRecordReader::open(std::span<const uint8_t> record,
                                                               std::span<uint8_t> out) {
  if (record.size() < kHeaderLength) return std::nullopt;
  const uint8_t* header = record.data();
  const uint16_t epoch = static_cast<uint16_t>(header[3] << 8 | header[4]);
  const size_t length = static_cast<size_t>(header[11]) << 8 | header[12];
  if (epoch != kEpoch || record.size() != kHeaderLength + length) return std::nullopt;
  const uint64_t sequence = read_be48(header + 5);
  if (!accept_sequence(sequence)) return std::nullopt;

  const bool gcm = aead_ != Aead::chacha20_poly1305;
  const size_t explicit_nonce = gcm ? kGcmExplicitNonceLength : 0;
  if (length < explicit_nonce + kTagLength) return std::nullopt;
  const size_t plaintext_length = length - explicit_nonce - kTagLength;
  if (plaintext_length > out.size()) return std::nullopt;
  const uint8_t* body = header + kHeaderLength;

  // GCM: salt(4) | explicit nonce(8) from the record. ChaCha20-Poly1305: the IV XOR the
  // 64-bit epoch|sequence, right-aligned.
  uint8_t nonce[12];
  if (gcm) {
    std::memcpy(nonce, iv_.data(), 4);
    std::memcpy(nonce + 4, body, kGcmExplicitNonceLength);
  } else {
    std::memcpy(nonce, iv_.data(), sizeof nonce);
    for (int i = 0; i < 8; ++i) nonce[4 + i] ^= header[3 + i];
  }
  // epoch|sequence (8) | type | version (2) | plaintext length (2)
  uint8_t aad[13];
  std::memcpy(aad, header + 3, 8);
  aad[8] = header[0];
  aad[9] = header[1];
  aad[10] = header[2];
  aad[11] = static_cast<uint8_t>(plaintext_length >> 8);
  aad[12] = static_cast<uint8_t>(plaintext_length);

  if (!ctx_) ctx_.reset(EVP_CIPHER_CTX_new());
  EVP_CIPHER_CTX* ctx = ctx_.get();
  const EVP_CIPHER* cipher = fetch_cipher(aead_ == Aead::aes_128_gcm   ? "AES-128-GCM"
                                          : aead_ == Aead::aes_256_gcm ? "AES-256-GCM"
                                                                       : "ChaCha20-Poly1305");
  const uint8_t* ciphertext = body + explicit_nonce;
  int n = 0, tail = 0;
  const bool authentic =
      ctx != nullptr && cipher != nullptr &&
      EVP_DecryptInit_ex2(ctx, cipher, key_.data(), nonce, nullptr) == 1 &&
      EVP_DecryptUpdate(ctx, nullptr, &n, aad, sizeof aad) == 1 &&
      EVP_DecryptUpdate(ctx, out.data(), &n, ciphertext, static_cast<int>(plaintext_length)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, static_cast<int>(kTagLength),
                          const_cast<uint8_t*>(ciphertext + plaintext_length)) == 1 &&
      EVP_DecryptFinal_ex(ctx, out.data() + n, &tail) == 1;
  if (!authentic) return std::nullopt;
  mark_sequence(sequence);
  return Record{header[0], out.first(plaintext_length)};
}

}  // namespace rtce
