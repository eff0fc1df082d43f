// dtls_transport.cpp — the SSL object behind DtlsTransport, its datagram BIO and timers.
//
// Datagram BIO: OpenSSL writes each flight through a buffering BIO that it flushes whenever
// the next record would not fit into the MTU, so every BIO write reaching us is exactly one
// datagram; it goes straight to Callbacks::send. Reads hand OpenSSL the one datagram being
// processed, without copying it into a memory BIO.
//
// Timers: OpenSSL measures its retransmission timer with gettimeofday. We choose every
// interval ourselves (DTLS_set_timer_cb) and learn from BIO_CTRL_DGRAM_SET_NEXT_TIMEOUT when
// OpenSSL arms or stops its timer, so our deadline in `now` units and OpenSSL's agree; when
// ours passes, DTLSv1_handle_timeout finds OpenSSL's expired too and retransmits.
//
// Release (Config::release_after_handshake): OpenSSL's DTLS keeps its handshake buffer (21 KiB)
// and its record read and write buffers for the life of the connection; SSL_MODE_RELEASE_BUFFERS
// does not apply to DTLS (measured: no change). What a connected association can still need
// from its SSL, and what replaces it here once the SSL is freed:
//  - a repeated Finished from the peer (its final flight was retransmitted because ours was
//    lost): OpenSSL answers with the flight it buffered, which is only ever non-empty for the
//    server (a client's is cleared when the server's flight arrives). The server's final flight
//    is kept as sent, datagram by datagram: never-received records are accepted as they are,
//    and records the peer did receive are discarded by its replay window, as retransmissions
//    would be. After 12 repeated Finished OpenSSL fails the connection; so do we.
//  - close_notify, both ways: ours is written by SSL_shutdown before the SSL is freed, captured
//    instead of sent, and sent by close() or in answer to the peer's;
//  - the peer's alerts and application data: DtlsRecordReader authenticates them with the
//    record keys, so a forged or replayed record is dropped as OpenSSL drops it.
#include "transceiver/dtls/dtls_transport.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/time.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "common/vocab.h"
#include "transceiver/dtls/dtls_record_reader.h"

namespace rtce {
namespace {

constexpr Nanos kNanosPerMicro = 1000;
constexpr size_t kDtlsRecordHeaderLength = 13;
constexpr size_t kMaxRecordPlaintext = 16384;
constexpr const char kSrtpExporterLabel[] = "EXTRACTOR-dtls_srtp";
// OpenSSL's DTLS1_TMO_ALERT_COUNT: retransmissions (a repeated Finished counts as one) before it
// fails the connection.
constexpr unsigned kMaxRepeatedFinished = 12;
constexpr size_t kHandshakeHeaderLength = 12;  // DTLS handshake message header
// OpenSSL's bounds for SSL_set_max_send_fragment.
constexpr size_t kMinSendFragment = 512;

// The plaintext of one record read, for OpenSSL's SSL_read and the released reader alike: one
// buffer per thread instead of 16 KiB per session. A transport reads only inside its own
// calls, on its owner's thread, and the span given to on_application_data is valid only during
// that call (the data channel copies what it keeps).
std::span<uint8_t> read_scratch() {
  thread_local std::vector<uint8_t> buffer(kMaxRecordPlaintext);
  return buffer;
}

std::string openssl_error_text() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no OpenSSL error detail";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// A datagram must be DTLS records back to back (type, 0xFE.. version, epoch, sequence,
// length); anything else is dropped before OpenSSL sees it, and counted.
bool is_dtls_record_sequence(std::span<const uint8_t> datagram) {
  if (datagram.empty()) return false;
  size_t offset = 0;
  while (offset < datagram.size()) {
    if (datagram.size() - offset < kDtlsRecordHeaderLength) return false;
    const uint8_t* record = datagram.data() + offset;
    if (record[0] < 20 || record[0] > 63 || record[1] != 0xfe) return false;
    size_t length = static_cast<size_t>(record[11]) << 8 | record[12];
    if (datagram.size() - offset - kDtlsRecordHeaderLength < length) return false;
    offset += kDtlsRecordHeaderLength + length;
  }
  return true;
}

std::optional<SrtpProfile> profile_from_openssl_id(unsigned long id) {
  switch (id) {
    case SRTP_AEAD_AES_128_GCM: return SrtpProfile::aead_aes_128_gcm;
    case SRTP_AES128_CM_SHA1_80: return SrtpProfile::aes128_cm_sha1_80;
    default: return std::nullopt;
  }
}

}  // namespace

struct DtlsTransport::Impl {
  std::shared_ptr<DtlsContext> context;
  Role role;
  std::vector<uint8_t> peer_fingerprint;
  Callbacks callbacks;
  Config config;
  SSL* ssl = nullptr;

  State state = State::idle;
  std::string failure_reason;
  SrtpProfile profile = SrtpProfile::aead_aes_128_gcm;
  Stats stats;

  Nanos now = 0;  // the time of the call we are inside; read by the BIO and timer callbacks
  Nanos handshake_deadline = 0;
  bool retransmit_armed = false;
  Nanos retransmit_deadline = 0;
  Nanos retransmit_interval = 0;

  std::span<const uint8_t> incoming;  // the datagram OpenSSL may read next
  bool fingerprint_mismatch = false;
  bool peer_closed = false;
  std::string alert_reason;
  size_t max_record = kMaxRecordPlaintext;  // application data per record (the write buffer's size)

  // The flight being written, while it may turn out to be the final one (server role, release
  // configured): a 2-byte length and the datagram, back to back. The first write of an input
  // (handle_datagram, on_timer, start) starts a new flight.
  bool keep_final_flight = false;
  bool flight_open = false;
  std::vector<uint8_t> flight;
  std::vector<uint8_t>* capture = nullptr;  // while set, writes land here instead of the peer

  // What is left of the association once the SSL is freed.
  struct Released {
    DtlsRecordReader reader;
    std::vector<uint8_t> final_flight;  // as `flight`; empty for the client (see above)
    std::vector<uint8_t> close_notify;  // one record, ready to send
    unsigned repeated_finished = 0;
  };
  std::optional<Released> released;

  ~Impl() { SSL_free(ssl); }

  static Impl* from(const SSL* ssl) { return static_cast<Impl*>(SSL_get_app_data(ssl)); }

  // --- OpenSSL callbacks -----------------------------------------------------------------

  static int bio_write(BIO* bio, const char* data, int length) {
    auto* self = static_cast<Impl*>(BIO_get_data(bio));
    if (length <= 0) return 0;
    std::span<const uint8_t> datagram(reinterpret_cast<const uint8_t*>(data), static_cast<size_t>(length));
    if (self->capture != nullptr) {
      self->capture->insert(self->capture->end(), datagram.begin(), datagram.end());
      return length;
    }
    if (self->keep_final_flight && self->state == State::connecting) self->keep_flight_datagram(datagram);
    self->send(datagram);
    return length;
  }

  void send(std::span<const uint8_t> datagram) {
    stats.datagrams_sent++;
    if (callbacks.send) callbacks.send(datagram);
  }

  void keep_flight_datagram(std::span<const uint8_t> datagram) {
    if (!flight_open) {
      flight.clear();
      flight_open = true;
    }
    flight.push_back(static_cast<uint8_t>(datagram.size() >> 8));
    flight.push_back(static_cast<uint8_t>(datagram.size()));
    flight.insert(flight.end(), datagram.begin(), datagram.end());
  }

  static int bio_read(BIO* bio, char* out, int capacity) {
    auto* self = static_cast<Impl*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    if (self->incoming.empty()) {
      BIO_set_retry_read(bio);
      return -1;
    }
    // Like a UDP socket: what does not fit is lost (OpenSSL reads with a full-record buffer).
    size_t n = std::min(self->incoming.size(), static_cast<size_t>(std::max(capacity, 0)));
    std::memcpy(out, self->incoming.data(), n);
    self->incoming = {};
    return static_cast<int>(n);
  }

  static long bio_ctrl(BIO* bio, int command, long, void* pointer) {
    auto* self = static_cast<Impl*>(BIO_get_data(bio));
    switch (command) {
      case BIO_CTRL_FLUSH: return 1;
      case BIO_CTRL_PENDING: return static_cast<long>(self->incoming.size());
      case BIO_CTRL_WPENDING: return 0;
      case BIO_CTRL_DGRAM_QUERY_MTU:
      case BIO_CTRL_DGRAM_GET_FALLBACK_MTU: return static_cast<long>(self->config.mtu);
      case BIO_CTRL_DGRAM_GET_MTU_OVERHEAD: return 0;
      case BIO_CTRL_DGRAM_SET_NEXT_TIMEOUT:
        self->on_openssl_timer(static_cast<const timeval*>(pointer));
        return 1;
      default: return 0;
    }
  }

  static int bio_create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }

  static const BIO_METHOD* datagram_bio_method() {
    static BIO_METHOD* method = [] {
      BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rtce dtls datagram");
      if (m == nullptr || BIO_meth_set_write(m, bio_write) != 1 || BIO_meth_set_read(m, bio_read) != 1 ||
          BIO_meth_set_ctrl(m, bio_ctrl) != 1 || BIO_meth_set_create(m, bio_create) != 1) {
        throw std::runtime_error("cannot create the DTLS datagram BIO method");
      }
      return m;
    }();
    return method;
  }

  // OpenSSL asks how long to wait: 0 means a new flight, else this flight timed out again.
  static unsigned int timer_interval_us(SSL* ssl, unsigned int previous_us) {
    Impl* self = from(ssl);
    if (previous_us == 0) {
      self->retransmit_interval = self->config.initial_retransmit;
    } else {
      self->retransmit_interval = std::min(self->retransmit_interval * 2, self->config.max_retransmit);
    }
    return static_cast<unsigned int>(self->retransmit_interval / kNanosPerMicro);
  }

  void on_openssl_timer(const timeval* next) {
    if (next == nullptr || (next->tv_sec == 0 && next->tv_usec == 0)) {
      retransmit_armed = false;
      return;
    }
    retransmit_armed = true;
    retransmit_deadline = now + retransmit_interval;
  }

  static int verify_peer(int, X509_STORE_CTX* store) {
    // Peers present self-signed certificates; trust comes from the SDP fingerprint alone.
    if (X509_STORE_CTX_get_error_depth(store) != 0) return 1;
    auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
    Impl* self = ssl != nullptr ? from(ssl) : nullptr;
    if (self == nullptr) return 0;
    if (!self->fingerprint_matches(X509_STORE_CTX_get_current_cert(store))) {
      self->fingerprint_mismatch = true;
      X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);  // the peer sees bad_certificate
      return 0;
    }
    return 1;
  }

  static void on_info(const SSL* ssl, int where, int value) {
    Impl* self = from(ssl);
    if (self == nullptr || (where & SSL_CB_ALERT) == 0) return;
    const bool received = (where & SSL_CB_READ) != 0;
    const bool fatal = (value >> 8) == SSL3_AL_FATAL;
    if (received && (value & 0xff) == SSL3_AD_CLOSE_NOTIFY) {
      self->peer_closed = true;
    } else if (fatal && self->alert_reason.empty()) {
      self->alert_reason =
          std::string(received ? "received" : "sent") + " fatal alert: " + SSL_alert_desc_string_long(value);
    }
  }

  // --- state machine ---------------------------------------------------------------------

  bool fingerprint_matches(X509* cert) const {
    if (cert == nullptr) return false;
    uint8_t digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (X509_digest(cert, EVP_sha256(), digest, &length) != 1) return false;
    return length == peer_fingerprint.size() && CRYPTO_memcmp(digest, peer_fingerprint.data(), length) == 0;
  }

  void fail(std::string reason) {
    ERR_clear_error();
    if (state == State::failed || state == State::closed) return;
    state = State::failed;
    failure_reason = std::move(reason);
    retransmit_armed = false;
    if (callbacks.on_failed) callbacks.on_failed(failure_reason);
  }

  std::string handshake_failure_reason() {
    if (fingerprint_mismatch) return "fingerprint mismatch";
    if (!alert_reason.empty()) return alert_reason;
    return "handshake failed: " + openssl_error_text();
  }

  void drive_handshake() {
    ERR_clear_error();
    int result = SSL_do_handshake(ssl);
    if (result == 1) {
      finish_handshake();
      return;
    }
    int error = SSL_get_error(ssl, result);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return;
    fail(handshake_failure_reason());
  }

  void finish_handshake() {
    if (!fingerprint_matches(SSL_get0_peer_certificate(ssl))) {
      fail("fingerprint mismatch");
      return;
    }
    const SRTP_PROTECTION_PROFILE* selected = SSL_get_selected_srtp_profile(ssl);
    std::optional<SrtpProfile> negotiated = selected ? profile_from_openssl_id(selected->id) : std::nullopt;
    if (!negotiated) {
      fail("no common SRTP profile");
      return;
    }
    profile = *negotiated;

    // RFC 5764 4.2: client key | server key | client salt | server salt.
    const size_t key_length = srtp_master_key_length(profile);
    const size_t salt_length = srtp_master_salt_length(profile);
    uint8_t material[2 * (16 + 14)];
    const size_t material_length = 2 * (key_length + salt_length);
    if (SSL_export_keying_material(ssl, material, material_length, kSrtpExporterLabel,
                                   sizeof(kSrtpExporterLabel) - 1, nullptr, 0, 0) != 1) {
      fail("SRTP key export failed: " + openssl_error_text());
      return;
    }
    auto key_salt = [&](size_t key_offset, size_t salt_offset) {
      std::vector<uint8_t> out(material + key_offset, material + key_offset + key_length);
      out.insert(out.end(), material + salt_offset, material + salt_offset + salt_length);
      return out;
    };
    std::vector<uint8_t> client = key_salt(0, 2 * key_length);
    std::vector<uint8_t> server = key_salt(key_length, 2 * key_length + salt_length);
    OPENSSL_cleanse(material, sizeof(material));

    SrtpKeys keys{profile, {}, {}};
    if (role == Role::client) {
      keys.local_key_salt = std::move(client);
      keys.remote_key_salt = std::move(server);
    } else {
      keys.local_key_salt = std::move(server);
      keys.remote_key_salt = std::move(client);
    }
    state = State::connected;
    if (callbacks.on_connected) callbacks.on_connected(keys);
    OPENSSL_cleanse(keys.local_key_salt.data(), keys.local_key_salt.size());
    OPENSSL_cleanse(keys.remote_key_salt.data(), keys.remote_key_salt.size());
  }

  void read_application_data() {
    const std::span<uint8_t> buffer = read_scratch();
    while (state == State::connected) {
      ERR_clear_error();
      int result = SSL_read(ssl, buffer.data(), static_cast<int>(buffer.size()));
      if (result > 0) {
        if (callbacks.on_application_data) {
          callbacks.on_application_data(std::span<const uint8_t>(buffer.data(), static_cast<size_t>(result)));
        }
        continue;
      }
      int error = SSL_get_error(ssl, result);
      if (error == SSL_ERROR_ZERO_RETURN || peer_closed) {
        peer_closed_notify();
      } else if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        fail(alert_reason.empty() ? "DTLS read failed: " + openssl_error_text() : alert_reason);
      }
      return;
    }
  }

  void peer_closed_notify() {
    ERR_clear_error();
    if (state == State::closed || state == State::failed) return;
    state = State::closed;
    retransmit_armed = false;
    send_close_notify();  // the answer
    if (callbacks.on_closed) callbacks.on_closed();
  }

  void send_close_notify() {
    if (ssl != nullptr) {
      SSL_shutdown(ssl);
      ERR_clear_error();
    } else if (released && !released->close_notify.empty()) {
      send(released->close_notify);
    }
  }

  // --- after the release --------------------------------------------------------------

  // Connected with release configured: keep what the association still needs, free the SSL.
  // Once per transport; a CBC suite keeps its SSL.
  void release_ssl() {
    config.release_after_handshake = false;
    keep_final_flight = false;
    std::optional<DtlsRecordReader> reader = DtlsRecordReader::from_connected(ssl);
    if (!reader) {
      flight = {};
      return;
    }
    Released kept{std::move(*reader), std::move(flight), {}, 0};
    flight = {};
    // Our close_notify, written now (its record sequence number is the next one: nothing else
    // is ever written after this) and sent by close() or as an answer.
    capture = &kept.close_notify;
    ERR_clear_error();
    SSL_shutdown(ssl);
    ERR_clear_error();
    capture = nullptr;
    SSL_free(ssl);
    ssl = nullptr;
    retransmit_armed = false;
    released.emplace(std::move(kept));
  }

  void read_released(std::span<const uint8_t> datagram) {
    const std::span<uint8_t> plaintext = read_scratch();
    size_t offset = 0;  // is_dtls_record_sequence has checked the record lengths
    while (offset < datagram.size() && state == State::connected) {
      const size_t length = static_cast<size_t>(datagram[offset + 11]) << 8 | datagram[offset + 12];
      const std::span<const uint8_t> record = datagram.subspan(offset, kDtlsRecordHeaderLength + length);
      offset += record.size();
      // Another epoch (a stale handshake retransmission), forged or replayed: dropped.
      const auto opened = released->reader.open(record, plaintext);
      if (!opened) continue;
      switch (opened->type) {
        case SSL3_RT_ALERT: read_alert(opened->plaintext); break;
        case SSL3_RT_HANDSHAKE: read_handshake(opened->plaintext); break;
        case SSL3_RT_APPLICATION_DATA:
          if (callbacks.on_application_data) callbacks.on_application_data(opened->plaintext);
          break;
        default: break;
      }
    }
  }

  void read_alert(std::span<const uint8_t> alert) {
    if (alert.size() != 2) return fail("DTLS read failed: malformed alert");
    const int value = alert[0] << 8 | alert[1];
    if (alert[1] == SSL3_AD_CLOSE_NOTIFY) return peer_closed_notify();
    // Warnings other than close_notify change nothing for DTLS-SRTP, as with the SSL.
    if (alert[0] == SSL3_AL_FATAL)
      fail(std::string("received fatal alert: ") + SSL_alert_desc_string_long(value));
  }

  void read_handshake(std::span<const uint8_t> message) {
    // Only a repeated Finished is answered; anything else would be a renegotiation, which the
    // context refuses (SSL_OP_NO_RENEGOTIATION), and is dropped.
    if (message.size() < kHandshakeHeaderLength || message[0] != SSL3_MT_FINISHED) return;
    if (++released->repeated_finished > kMaxRepeatedFinished) {
      return fail("DTLS read failed: too many repeated Finished messages");
    }
    const std::vector<uint8_t>& kept = released->final_flight;
    if (kept.empty()) return;
    for (size_t i = 0; i + 2 <= kept.size();) {
      const size_t length = static_cast<size_t>(kept[i]) << 8 | kept[i + 1];
      send(std::span(kept).subspan(i + 2, length));
      i += 2 + length;
    }
    stats.final_flight_resends++;
  }
};

DtlsTransport::DtlsTransport(std::shared_ptr<DtlsContext> context, Role role,
                             std::vector<uint8_t> peer_sha256_fingerprint, Callbacks callbacks, Config config)
    : impl_(std::make_unique<Impl>()) {
  if (!context) throw std::invalid_argument("DtlsTransport needs a DtlsContext");
  if (config.mtu < 256 || config.mtu > 65507) throw std::invalid_argument("DTLS mtu must be 256..65507");
  if (config.srtp_profiles.empty()) throw std::invalid_argument("DTLS needs at least one SRTP profile");
  if (config.initial_retransmit < 1'000'000 || config.max_retransmit < config.initial_retransmit ||
      config.max_retransmit > 60'000'000'000) {
    throw std::invalid_argument("DTLS retransmit intervals must satisfy 1ms <= initial <= max <= 60s");
  }
  Impl& impl = *impl_;
  impl.context = std::move(context);
  impl.role = role;
  impl.peer_fingerprint = std::move(peer_sha256_fingerprint);
  impl.callbacks = std::move(callbacks);
  impl.config = std::move(config);

  std::string profiles;
  for (SrtpProfile profile : impl.config.srtp_profiles) {
    if (!profiles.empty()) profiles += ':';
    profiles += srtp_profile_name(profile);
  }

  ERR_clear_error();
  impl.ssl = SSL_new(impl.context->ssl_ctx());
  if (impl.ssl == nullptr) throw std::runtime_error("SSL_new failed: " + openssl_error_text());
  BIO* bio = BIO_new(Impl::datagram_bio_method());
  if (bio == nullptr) throw std::runtime_error("BIO_new failed: " + openssl_error_text());
  BIO_set_data(bio, &impl);
  SSL_set_bio(impl.ssl, bio, bio);  // one BIO, one reference, owned by the SSL
  SSL_set_app_data(impl.ssl, &impl);
  SSL_set_verify(impl.ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, Impl::verify_peer);
  // No record is larger than a datagram: OpenSSL sizes its write buffer (kept for the life
  // of the connection) by the largest fragment, 16 KiB unless told.
  impl.max_record = std::clamp(impl.config.mtu, kMinSendFragment, kMaxRecordPlaintext);
  SSL_set_max_send_fragment(impl.ssl, static_cast<long>(impl.max_record));
  impl.keep_final_flight = impl.config.release_after_handshake && role == Role::server;
  SSL_set_info_callback(impl.ssl, Impl::on_info);
  DTLS_set_timer_cb(impl.ssl, Impl::timer_interval_us);
  // SSL_set_tlsext_use_srtp returns 0 on success.
  if (SSL_set_mtu(impl.ssl, static_cast<long>(impl.config.mtu)) == 0 ||
      SSL_set_tlsext_use_srtp(impl.ssl, profiles.c_str()) != 0) {
    throw std::runtime_error("DTLS session setup failed: " + openssl_error_text());
  }
}

DtlsTransport::~DtlsTransport() = default;
DtlsTransport::DtlsTransport(DtlsTransport&&) noexcept = default;
DtlsTransport& DtlsTransport::operator=(DtlsTransport&&) noexcept = default;

void DtlsTransport::start(Nanos now) {
  Impl& impl = *impl_;
  if (impl.state != State::idle) return;
  impl.now = now;
  impl.flight_open = false;
  impl.state = State::connecting;
  impl.handshake_deadline = now + impl.config.handshake_timeout;
  if (impl.role == Role::client) {
    SSL_set_connect_state(impl.ssl);
    impl.drive_handshake();
  } else {
    SSL_set_accept_state(impl.ssl);
  }
}

void DtlsTransport::handle_datagram(std::span<const uint8_t> datagram, Nanos now) {
  Impl& impl = *impl_;
  impl.now = now;
  impl.stats.datagrams_received++;
  if (impl.state == State::idle && impl.role == Role::server) start(now);
  impl.flight_open = false;
  if (impl.state != State::connecting && impl.state != State::connected) return;
  if (!is_dtls_record_sequence(datagram)) {
    impl.stats.bad_datagrams++;
    return;
  }
  if (impl.released) return impl.read_released(datagram);
  impl.incoming = datagram;
  if (impl.state == State::connecting) impl.drive_handshake();
  // Application data may share the datagram that finished the handshake (read before a
  // release, with everything else in it).
  if (impl.state == State::connected) impl.read_application_data();
  impl.incoming = {};
  if (impl.state == State::connected && impl.config.release_after_handshake) impl.release_ssl();
}

void DtlsTransport::on_timer(Nanos now) {
  Impl& impl = *impl_;
  impl.now = now;
  impl.flight_open = false;
  if (impl.state == State::connecting && now >= impl.handshake_deadline) {
    impl.fail("handshake timeout");
    return;
  }
  if (!impl.retransmit_armed || now < impl.retransmit_deadline || impl.ssl == nullptr) return;
  if (impl.state != State::connecting && impl.state != State::connected) return;
  ERR_clear_error();
  int result = DTLSv1_handle_timeout(impl.ssl);
  if (result < 0) {
    impl.fail(impl.alert_reason.empty() ? "handshake failed: too many retransmissions" : impl.alert_reason);
    return;
  }
  if (result > 0) {
    impl.stats.retransmit_timeouts++;
    return;
  }
  // OpenSSL's wall clock has not reached its deadline yet (clock steps): ask again soon.
  timeval left{};
  if (DTLSv1_get_timeout(impl.ssl, &left) == 1) {
    Nanos remaining = static_cast<Nanos>(left.tv_sec) * 1'000'000'000 + left.tv_usec * kNanosPerMicro;
    impl.retransmit_deadline = now + std::clamp<Nanos>(remaining, 1'000'000, impl.retransmit_interval);
  } else {
    impl.retransmit_armed = false;
  }
}

std::optional<Nanos> DtlsTransport::next_timeout(Nanos) const {
  const Impl& impl = *impl_;
  std::optional<Nanos> next;
  if (impl.state == State::connecting) next = impl.handshake_deadline;
  if (impl.retransmit_armed && (impl.state == State::connecting || impl.state == State::connected)) {
    next = next ? std::min(*next, impl.retransmit_deadline) : impl.retransmit_deadline;
  }
  return next;
}

bool DtlsTransport::send_application_data(std::span<const uint8_t> data) {
  Impl& impl = *impl_;
  if (impl.state != State::connected || impl.ssl == nullptr || data.empty() || data.size() > impl.max_record)
    return false;
  ERR_clear_error();
  int result = SSL_write(impl.ssl, data.data(), static_cast<int>(data.size()));
  if (result <= 0) {
    ERR_clear_error();
    return false;
  }
  return true;
}

void DtlsTransport::close() {
  Impl& impl = *impl_;
  if (impl.state == State::closed || impl.state == State::failed) return;
  if (impl.state == State::connected) {
    ERR_clear_error();
    impl.send_close_notify();
  }
  impl.state = State::closed;
  impl.retransmit_armed = false;
}

DtlsTransport::State DtlsTransport::state() const { return impl_->state; }
std::string_view DtlsTransport::failure_reason() const { return impl_->failure_reason; }
SrtpProfile DtlsTransport::negotiated_profile() const { return impl_->profile; }
const DtlsTransport::Stats& DtlsTransport::stats() const { return impl_->stats; }
bool DtlsTransport::ssl_released() const { return impl_->released.has_value(); }

const char* dtls_state_name(DtlsTransport::State state) {
  static constexpr const char* kNames[] = {RTCE_DTLS_STATES(RTCE_VOCAB_LABEL)};
  return vocab_name(kNames, state);
}

}  // namespace rtce
