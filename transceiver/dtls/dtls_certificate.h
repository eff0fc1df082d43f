// dtls_certificate.h — the process's DTLS identity: one certificate + key inside one
// configured SSL_CTX (DTLS 1.2, ECDHE, use_srtp, peer certificate requested) that every
// DtlsTransport of the process creates its SSL from. After construction the context is only
// read (SSL_new), which OpenSSL allows from any thread.
#pragma once

#include <openssl/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rtce {

class DtlsContext {
 public:
  // A fresh ECDSA P-256 self-signed certificate: random serial, CN "rtcedge", valid for 30
  // days (notBefore one day back to tolerate peers with slow clocks).
  static std::shared_ptr<DtlsContext> generate();
  // PEM files; throws ConfigError (common/error.h) naming the file that could not be used.
  static std::shared_ptr<DtlsContext> load(const std::string& cert_pem_path, const std::string& key_pem_path);

  ~DtlsContext();
  DtlsContext(const DtlsContext&) = delete;
  DtlsContext& operator=(const DtlsContext&) = delete;

  // "AB:CD:..." (uppercase, colon-separated) for SDP's a=fingerprint:sha-256.
  std::string fingerprint_sha256() const;
  const std::vector<uint8_t>& fingerprint_sha256_bytes() const { return fingerprint_; }
  SSL_CTX* ssl_ctx() const { return ctx_; }

 private:
  DtlsContext(SSL_CTX* ctx, std::vector<uint8_t> fingerprint);
  static std::shared_ptr<DtlsContext> from_certificate(X509* cert, EVP_PKEY* key, const std::string& what);

  SSL_CTX* ctx_;
  std::vector<uint8_t> fingerprint_;
};

// "AB:CD:.." <-> bytes, for SDP fingerprints. parse returns an empty vector on bad text.
std::string format_fingerprint(const std::vector<uint8_t>& bytes);
std::vector<uint8_t> parse_fingerprint(std::string_view text);

}  // namespace rtce
