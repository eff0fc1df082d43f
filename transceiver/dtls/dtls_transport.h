// dtls_transport.h — one DTLS 1.2 association for DTLS-SRTP (RFC 5763/5764), socket-free:
// datagrams come in through handle_datagram, go out through Callbacks::send, and time only
// advances through the `now` passed in. Owns the SSL object; the certificate and SSL_CTX are
// shared (DtlsContext). On success it exports the SRTP master keys for both directions.
//
// Memory: an SSL object holds ~70 KiB after the handshake (OpenSSL keeps the handshake buffer
// and the record buffers of a DTLS connection for its lifetime). A session that carries no
// application data (audio only: no m=application) needs none of it once the SRTP keys are
// exported, so with Config::release_after_handshake the transport frees the SSL right after
// connecting and keeps only what the association can still be asked for: the final flight it
// sent (as the server: a client whose copy of it was lost retransmits its own flight and must
// get ours again), a pre-built close_notify for close(), and a DtlsRecordReader that
// authenticates the peer's close_notify, alerts, repeated Finished and stray application data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/vocab.h"
#include "transceiver/dtls/dtls_certificate.h"
#include "transceiver/srtp/srtp_session.h"

namespace rtce {

// local = what WE protect outbound packets with; remote = what we unprotect inbound with.
struct SrtpKeys {
  SrtpProfile profile;
  std::vector<uint8_t> local_key_salt, remote_key_salt;
};

class DtlsTransport {
 public:
  enum class Role { client, server };
#define RTCE_DTLS_STATES(X) X(idle) X(connecting) X(connected) X(failed) X(closed)
  enum class State { RTCE_DTLS_STATES(RTCE_VOCAB_ENUMERATOR) };

  // Called from inside the transport's methods; they must not destroy the transport.
  struct Callbacks {
    std::function<void(std::span<const uint8_t> datagram)> send;  // one UDP payload, <= mtu
    std::function<void(const SrtpKeys&)> on_connected;
    std::function<void(std::string_view reason)> on_failed;
    std::function<void()> on_closed;                                    // peer close_notify
    std::function<void(std::span<const uint8_t>)> on_application_data;  // for SCTP
  };

  struct Config {
    size_t mtu = 1200;  // largest datagram handed to send
    Nanos handshake_timeout = 10'000'000'000;
    // Flight retransmission: first after initial_retransmit, doubling up to max_retransmit.
    Nanos initial_retransmit = 100'000'000;
    Nanos max_retransmit = 4'000'000'000;
    // Offered (client) or accepted (server) in preference order; the server's order wins.
    std::vector<SrtpProfile> srtp_profiles = {SrtpProfile::aead_aes_128_gcm, SrtpProfile::aes128_cm_sha1_80};
    // Free the SSL once connected (see above): for sessions that never send or expect
    // application data. Only with an AEAD suite; after a CBC suite the SSL stays.
    bool release_after_handshake = false;
  };

  struct Stats {
    uint64_t datagrams_received = 0;
    uint64_t datagrams_sent = 0;
    uint64_t bad_datagrams = 0;  // not a well-formed sequence of DTLS records: dropped
    uint64_t retransmit_timeouts = 0;
    uint64_t final_flight_resends = 0;  // after a release: our final flight, for a repeated Finished
  };

  // Throws std::invalid_argument on an unusable config (mtu, empty profile list) and
  // std::runtime_error if OpenSSL cannot create the session.
  DtlsTransport(std::shared_ptr<DtlsContext> context, Role role, std::vector<uint8_t> peer_sha256_fingerprint,
                Callbacks callbacks, Config config);
  DtlsTransport(std::shared_ptr<DtlsContext> context, Role role, std::vector<uint8_t> peer_sha256_fingerprint,
                Callbacks callbacks)
      : DtlsTransport(std::move(context), role, std::move(peer_sha256_fingerprint), std::move(callbacks),
                      Config{}) {}
  ~DtlsTransport();
  DtlsTransport(DtlsTransport&&) noexcept;
  DtlsTransport& operator=(DtlsTransport&&) noexcept;

  // Client: sends the ClientHello flight. Server: waits for one. Starts the handshake deadline.
  void start(Nanos now);
  // A UDP payload whose first byte is 20..63 (RFC 7983 demultiplexing).
  void handle_datagram(std::span<const uint8_t> datagram, Nanos now);
  // Retransmits the last flight when due and fails the handshake at its deadline.
  void on_timer(Nanos now);
  // When on_timer should next run; nullopt while nothing is pending.
  std::optional<Nanos> next_timeout(Nanos now) const;
  // One DTLS record of at most max(mtu, 512) bytes (larger records would not fit a datagram;
  // OpenSSL's write buffer is sized for it); returns false unless connected with the SSL kept,
  // or if OpenSSL refuses the write.
  bool send_application_data(std::span<const uint8_t> data);
  // Sends close_notify (when connected) and moves to closed; no callback fires.
  void close();

  State state() const;
  std::string_view failure_reason() const;
  // Valid once connected.
  SrtpProfile negotiated_profile() const;
  const Stats& stats() const;
  // Whether the SSL object was freed after the handshake (Config::release_after_handshake).
  bool ssl_released() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

const char* dtls_state_name(DtlsTransport::State state);

}  // namespace rtce
