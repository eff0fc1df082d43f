// dtls_certificate.cpp — certificate generation/loading and the shared SSL_CTX settings.
#include "transceiver/dtls/dtls_certificate.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdio>
#include <stdexcept>

#include "common/error.h"

namespace rtce {
namespace {

template <auto Free>
struct OpenSslDeleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using X509Ptr = std::unique_ptr<X509, OpenSslDeleter<X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslDeleter<EVP_PKEY_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpenSslDeleter<BN_free>>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, OpenSslDeleter<SSL_CTX_free>>;

std::string openssl_error_text() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// ECDSA suites first (our own certificate is ECDSA); the RSA ones only matter when we are
// the DTLS client of a peer that presents an RSA certificate.
constexpr const char* kCipherList =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA";

constexpr int kValidityDays = 30;

}  // namespace

std::string format_fingerprint(const std::vector<uint8_t>& bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string text;
  text.reserve(bytes.size() * 3);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i != 0) text.push_back(':');
    text.push_back(kHex[bytes[i] >> 4]);
    text.push_back(kHex[bytes[i] & 0xf]);
  }
  return text;
}

std::vector<uint8_t> parse_fingerprint(std::string_view text) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::vector<uint8_t> bytes;
  if ((text.size() + 1) % 3 != 0) return {};
  for (size_t i = 0; i < text.size(); i += 3) {
    int high = nibble(text[i]);
    int low = nibble(text[i + 1]);
    if (high < 0 || low < 0 || (i + 2 < text.size() && text[i + 2] != ':')) return {};
    bytes.push_back(static_cast<uint8_t>(high << 4 | low));
  }
  return bytes;
}

DtlsContext::DtlsContext(SSL_CTX* ctx, std::vector<uint8_t> fingerprint)
    : ctx_(ctx), fingerprint_(std::move(fingerprint)) {}

DtlsContext::~DtlsContext() { SSL_CTX_free(ctx_); }

std::string DtlsContext::fingerprint_sha256() const { return format_fingerprint(fingerprint_); }

std::shared_ptr<DtlsContext> DtlsContext::from_certificate(X509* cert, EVP_PKEY* key,
                                                           const std::string& what) {
  std::vector<uint8_t> fingerprint(EVP_MAX_MD_SIZE);
  unsigned int fingerprint_length = 0;
  if (X509_digest(cert, EVP_sha256(), fingerprint.data(), &fingerprint_length) != 1) {
    throw ConfigError(what + ": cannot hash the certificate: " + openssl_error_text());
  }
  fingerprint.resize(fingerprint_length);

  SslCtxPtr ctx(SSL_CTX_new(DTLS_method()));
  if (!ctx) throw std::runtime_error("SSL_CTX_new(DTLS_method) failed: " + openssl_error_text());
  if (SSL_CTX_use_certificate(ctx.get(), cert) != 1 || SSL_CTX_use_PrivateKey(ctx.get(), key) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1) {
    throw ConfigError(what + ": certificate and key do not form a usable pair: " + openssl_error_text());
  }
  if (SSL_CTX_set_min_proto_version(ctx.get(), DTLS1_2_VERSION) != 1 ||
      SSL_CTX_set_cipher_list(ctx.get(), kCipherList) != 1 ||
      SSL_CTX_set1_groups_list(ctx.get(), "X25519:P-256") != 1) {
    throw std::runtime_error("DTLS context setup failed: " + openssl_error_text());
  }
  // The datagram size is ours to set (SSL_set_mtu per session); there is no socket to ask.
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_QUERY_MTU | SSL_OP_NO_TICKET | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                     SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  SSL_CTX_set_read_ahead(ctx.get(), 1);
  return std::shared_ptr<DtlsContext>(new DtlsContext(ctx.release(), std::move(fingerprint)));
}

std::shared_ptr<DtlsContext> DtlsContext::generate() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) throw std::runtime_error("EC P-256 key generation failed: " + openssl_error_text());

  X509Ptr cert(X509_new());
  if (!cert) throw std::runtime_error("X509_new failed");
  X509_set_version(cert.get(), X509_VERSION_3);

  unsigned char serial_bytes[16];
  if (RAND_bytes(serial_bytes, sizeof(serial_bytes)) != 1) {
    throw std::runtime_error("RAND_bytes failed: " + openssl_error_text());
  }
  serial_bytes[0] &= 0x7f;  // a positive INTEGER
  BignumPtr serial(BN_bin2bn(serial_bytes, sizeof(serial_bytes), nullptr));
  if (!serial || BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    throw std::runtime_error("certificate serial failed: " + openssl_error_text());
  }

  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -24L * 3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValidityDays * 24L * 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("rtcedge"), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), name);
  if (X509_set_pubkey(cert.get(), key.get()) != 1 || X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    throw std::runtime_error("self-signing the DTLS certificate failed: " + openssl_error_text());
  }
  return from_certificate(cert.get(), key.get(), "generated DTLS certificate");
}

std::shared_ptr<DtlsContext> DtlsContext::load(const std::string& cert_pem_path,
                                               const std::string& key_pem_path) {
  auto open = [](const std::string& path) {
    std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!file) throw ConfigError("DTLS certificate file " + path + ": cannot open it");
    return file;
  };
  auto cert_file = open(cert_pem_path);
  X509Ptr cert(PEM_read_X509(cert_file.get(), nullptr, nullptr, nullptr));
  if (!cert)
    throw ConfigError("DTLS certificate file " + cert_pem_path +
                      ": no PEM certificate: " + openssl_error_text());
  auto key_file = open(key_pem_path);
  PkeyPtr key(PEM_read_PrivateKey(key_file.get(), nullptr, nullptr, nullptr));
  if (!key)
    throw ConfigError("DTLS key file " + key_pem_path + ": no PEM private key: " + openssl_error_text());
  return from_certificate(cert.get(), key.get(),
                          "DTLS certificate " + cert_pem_path + " with key " + key_pem_path);
}

}  // namespace rtce
