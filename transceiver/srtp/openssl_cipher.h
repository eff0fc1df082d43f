// openssl_cipher.h — the AES contexts of the OpenSSL SRTP backend: a context is keyed once and
// a packet only sets an IV, feeds the data and, for GCM, gets or sets the tag. Two paths, same
// OpenSSL provider code underneath:
//  - provider: the provider's cipher functions (OSSL_PROVIDER_query_operation, public since
//    OpenSSL 3.0) called directly. On OpenSSL 3.0 every EVP_EncryptInit_ex with an IV
//    re-queries the IV length through OSSL_PARAM name lookups, and EVP_CIPHER_CTX_ctrl turns
//    each tag get/set into a parameter call; this path skips that layer (docs/benchmarks.md,
//    "SRTP backend cost", has the figures).
//  - evp: plain EVP_CIPHER_CTX calls, used when a provider lacks one of the functions, and
//    kept selectable so tests and the benchmark check one path against the other.
// Nothing here allocates after construction. Header-only, so that every target that compiles
// the backend's sources (the fuzzers do) gets it without another library.
#pragma once

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <strings.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rtce::srtp_openssl {

enum class CipherPath { provider, evp };

namespace detail {
inline std::atomic<CipherPath> g_path{CipherPath::provider};
}  // namespace detail

// Which path contexts built from now on take (process-wide; default provider). For tests and
// benchmarks: a live context keeps the path it was built with.
inline void set_cipher_path(CipherPath path) { detail::g_path.store(path, std::memory_order_relaxed); }
inline CipherPath cipher_path() { return detail::g_path.load(std::memory_order_relaxed); }

// One algorithm ("AES-128-GCM", "AES-256-GCM", "AES-128-CTR", "AES-256-CTR"), fetched once per
// process with its provider's functions. fetch() throws std::runtime_error when OpenSSL lacks it.
struct CipherAlgorithm {
  const EVP_CIPHER* cipher = nullptr;  // fetched, never freed: it keeps the provider loaded
  void* provider_ctx = nullptr;
  OSSL_FUNC_cipher_newctx_fn* newctx = nullptr;
  OSSL_FUNC_cipher_freectx_fn* freectx = nullptr;
  OSSL_FUNC_cipher_encrypt_init_fn* encrypt_init = nullptr;
  OSSL_FUNC_cipher_decrypt_init_fn* decrypt_init = nullptr;
  OSSL_FUNC_cipher_update_fn* update = nullptr;
  OSSL_FUNC_cipher_final_fn* final = nullptr;
  OSSL_FUNC_cipher_get_ctx_params_fn* get_ctx_params = nullptr;
  OSSL_FUNC_cipher_set_ctx_params_fn* set_ctx_params = nullptr;
  bool aead = false;
  size_t key_length = 0;
  size_t iv_length = 0;

  bool has_provider_functions() const {
    return provider_ctx != nullptr && newctx != nullptr && freectx != nullptr && encrypt_init != nullptr &&
           decrypt_init != nullptr && update != nullptr && final != nullptr && get_ctx_params != nullptr &&
           set_ctx_params != nullptr;
  }

  static CipherAlgorithm fetch(const char* name) {
    CipherAlgorithm algorithm;
    EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, name, nullptr);
    if (cipher == nullptr) throw std::runtime_error(std::string("OpenSSL has no ") + name);
    algorithm.cipher = cipher;
    algorithm.aead = (EVP_CIPHER_get_flags(cipher) & EVP_CIPH_FLAG_AEAD_CIPHER) != 0;
    algorithm.key_length = static_cast<size_t>(EVP_CIPHER_get_key_length(cipher));
    algorithm.iv_length = static_cast<size_t>(EVP_CIPHER_get_iv_length(cipher));
    algorithm.find_provider_functions(name);
    return algorithm;
  }

 private:
  // algorithm_names is "AES-128-GCM:id-aes128-GCM:2.16.840.1.101.3.4.1.6": is `name` one of them?
  static bool names_include(const char* names, std::string_view name) {
    std::string_view rest(names);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string_view one = rest.substr(0, colon);
      if (one.size() == name.size() && strncasecmp(one.data(), name.data(), name.size()) == 0) return true;
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
    return false;
  }

  // The functions of the provider `cipher` was fetched from. The pointers are copied out; the
  // provider stays loaded for as long as `cipher` lives (forever).
  void find_provider_functions(const char* name) {
    const OSSL_PROVIDER* provider = EVP_CIPHER_get0_provider(cipher);
    if (provider == nullptr) return;
    int no_cache = 0;
    const OSSL_ALGORITHM* algorithms = OSSL_PROVIDER_query_operation(provider, OSSL_OP_CIPHER, &no_cache);
    if (algorithms == nullptr) return;
    for (const OSSL_ALGORITHM* a = algorithms; a->algorithm_names != nullptr; ++a) {
      if (!names_include(a->algorithm_names, name)) continue;
      for (const OSSL_DISPATCH* f = a->implementation; f->function_id != 0; ++f) {
        switch (f->function_id) {
          case OSSL_FUNC_CIPHER_NEWCTX: newctx = OSSL_FUNC_cipher_newctx(f); break;
          case OSSL_FUNC_CIPHER_FREECTX: freectx = OSSL_FUNC_cipher_freectx(f); break;
          case OSSL_FUNC_CIPHER_ENCRYPT_INIT: encrypt_init = OSSL_FUNC_cipher_encrypt_init(f); break;
          case OSSL_FUNC_CIPHER_DECRYPT_INIT: decrypt_init = OSSL_FUNC_cipher_decrypt_init(f); break;
          case OSSL_FUNC_CIPHER_UPDATE: update = OSSL_FUNC_cipher_update(f); break;
          case OSSL_FUNC_CIPHER_FINAL: final = OSSL_FUNC_cipher_final(f); break;
          case OSSL_FUNC_CIPHER_GET_CTX_PARAMS: get_ctx_params = OSSL_FUNC_cipher_get_ctx_params(f); break;
          case OSSL_FUNC_CIPHER_SET_CTX_PARAMS: set_ctx_params = OSSL_FUNC_cipher_set_ctx_params(f); break;
          default: break;
        }
      }
      provider_ctx = OSSL_PROVIDER_get0_provider_ctx(provider);
      break;
    }
    OSSL_PROVIDER_unquery_operation(provider, OSSL_OP_CIPHER, algorithms);
  }
};

inline const CipherAlgorithm& aes_gcm(size_t key_length) {  // 16 or 32
  static const CipherAlgorithm gcm128 = CipherAlgorithm::fetch("AES-128-GCM");
  static const CipherAlgorithm gcm256 = CipherAlgorithm::fetch("AES-256-GCM");
  return key_length == 32 ? gcm256 : gcm128;
}

inline const CipherAlgorithm& aes_ctr(size_t key_length) {
  static const CipherAlgorithm ctr128 = CipherAlgorithm::fetch("AES-128-CTR");
  static const CipherAlgorithm ctr256 = CipherAlgorithm::fetch("AES-256-CTR");
  return key_length == 32 ? ctr256 : ctr128;
}

struct ProviderCtxDeleter {
  OSSL_FUNC_cipher_freectx_fn* freectx = nullptr;
  void operator()(void* ctx) const { freectx(ctx); }
};
struct EvpCtxDeleter {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};

// A keyed context for one direction (encrypt or decrypt). Each call returns false on a crypto
// library failure; finish() on a decrypt context also returns false when the tag does not match.
class CipherContext {
 public:
  CipherContext() = default;

  // Keys the context and, for GCM, sets the IV length: once, here.
  CipherContext(const CipherAlgorithm& algorithm, const uint8_t* key, bool encrypt)
      : algorithm_(&algorithm), encrypt_(encrypt) {
    if (cipher_path() == CipherPath::provider && algorithm.has_provider_functions()) {
      provider_ = std::unique_ptr<void, ProviderCtxDeleter>(algorithm.newctx(algorithm.provider_ctx),
                                                            ProviderCtxDeleter{algorithm.freectx});
      if (!provider_) throw std::runtime_error("OpenSSL cipher context allocation failed");
      auto* init = encrypt ? algorithm.encrypt_init : algorithm.decrypt_init;
      bool ok = init(provider_.get(), key, algorithm.key_length, nullptr, 0, nullptr) == 1;
      if (ok && algorithm.aead) {
        size_t iv_length = algorithm.iv_length;
        const OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &iv_length),
                                     OSSL_PARAM_END};
        ok = algorithm.set_ctx_params(provider_.get(), params) == 1;
      }
      if (!ok) throw std::runtime_error("OpenSSL cipher context setup failed");
      return;
    }
    evp_.reset(EVP_CIPHER_CTX_new());
    if (!evp_ ||
        EVP_CipherInit_ex(evp_.get(), algorithm.cipher, nullptr, nullptr, nullptr, encrypt ? 1 : 0) != 1 ||
        (algorithm.aead && EVP_CIPHER_CTX_ctrl(evp_.get(), EVP_CTRL_AEAD_SET_IVLEN,
                                               static_cast<int>(algorithm.iv_length), nullptr) != 1) ||
        EVP_CipherInit_ex(evp_.get(), nullptr, nullptr, key, nullptr, -1) != 1) {
      throw std::runtime_error("OpenSSL cipher context setup failed");
    }
  }

  CipherPath path() const { return provider_ ? CipherPath::provider : CipherPath::evp; }

  // algorithm.iv_length bytes; the key stays.
  bool set_iv(const uint8_t* iv) {
    if (provider_) {
      auto* init = encrypt_ ? algorithm_->encrypt_init : algorithm_->decrypt_init;
      return init(provider_.get(), nullptr, 0, iv, algorithm_->iv_length, nullptr) == 1;
    }
    return EVP_CipherInit_ex(evp_.get(), nullptr, nullptr, nullptr, iv, -1) == 1;
  }

  bool aad(const uint8_t* data, size_t length) {
    if (length == 0) return true;
    if (provider_) {
      size_t written = 0;
      return algorithm_->update(provider_.get(), nullptr, &written, length, data, length) == 1;
    }
    int written = 0;
    return length <= INT_MAX &&
           EVP_CipherUpdate(evp_.get(), nullptr, &written, data, static_cast<int>(length)) == 1;
  }

  // In place.
  bool crypt(uint8_t* data, size_t length) {
    if (length == 0) return true;
    if (provider_) {
      size_t written = 0;
      return algorithm_->update(provider_.get(), data, &written, length, data, length) == 1 &&
             written == length;
    }
    int written = 0;
    return length <= INT_MAX &&
           EVP_CipherUpdate(evp_.get(), data, &written, data, static_cast<int>(length)) == 1 &&
           static_cast<size_t>(written) == length;
  }

  bool finish() {
    uint8_t none[EVP_MAX_BLOCK_LENGTH];  // GCM writes nothing here
    if (provider_) {
      size_t written = 0;
      return algorithm_->final(provider_.get(), none, &written, sizeof(none)) == 1;
    }
    int written = 0;
    return EVP_CipherFinal_ex(evp_.get(), none, &written) == 1;
  }

  // After finish() on an encrypt context. The provider path hands the tag buffer over as a
  // parameter built from plain stores; the EVP path's ctrl builds the same parameter inside.
  bool get_tag(uint8_t* tag, size_t length) {
    if (provider_) {
      OSSL_PARAM params[] = {tag_param(tag, length), OSSL_PARAM_END};
      return algorithm_->get_ctx_params(provider_.get(), params) == 1;
    }
    return EVP_CIPHER_CTX_ctrl(evp_.get(), EVP_CTRL_AEAD_GET_TAG, static_cast<int>(length), tag) == 1;
  }

  // Before finish() on a decrypt context.
  bool set_tag(const uint8_t* tag, size_t length) {
    if (provider_) {
      const OSSL_PARAM params[] = {tag_param(const_cast<uint8_t*>(tag), length), OSSL_PARAM_END};
      return algorithm_->set_ctx_params(provider_.get(), params) == 1;
    }
    return EVP_CIPHER_CTX_ctrl(evp_.get(), EVP_CTRL_AEAD_SET_TAG, static_cast<int>(length),
                               const_cast<uint8_t*>(tag)) == 1;
  }

 private:
  static OSSL_PARAM tag_param(void* tag, size_t length) {
    return OSSL_PARAM{OSSL_CIPHER_PARAM_AEAD_TAG, OSSL_PARAM_OCTET_STRING, tag, length,
                      OSSL_PARAM_UNMODIFIED};
  }

  const CipherAlgorithm* algorithm_ = nullptr;
  bool encrypt_ = false;
  std::unique_ptr<void, ProviderCtxDeleter> provider_;
  std::unique_ptr<EVP_CIPHER_CTX, EvpCtxDeleter> evp_;
};

}  // namespace rtce::srtp_openssl
