// session_description.h — the transceiver's SDP offer/answer: parse a browser's offer into the
// few facts a session needs (the one transport's ICE credentials, DTLS fingerprint and role;
// the audio section's Opus payload type, direction, SSRCs; the data-channel section's SCTP
// port and message size) and build the ICE-lite answer that accepts one audio section and one
// application section over one BUNDLE transport and rejects every other one. Pure functions:
// no sockets, no globals, bounded allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "vocab.h"

namespace rtce::sdp {

// Hostile offers arrive over HTTP before anything is authenticated, so every dimension is capped
// before anything is stored.
struct ParseLimits {
  size_t max_bytes = 64 * 1024;  // the transceiver passes http.max_body_bytes: one size limit
  size_t max_lines = 2000;
  size_t max_media_sections = 16;
  size_t max_line_length = 4096;
};

// What the caller allows beyond the limits.
struct OfferPolicy {
  // Accept an offer with a data channel and no audio (sessions.allow_text_only).
  bool allow_text_only = false;
};

struct OfferError {
  int line = 0;  // 1-based; 0 = the offer as a whole
  std::string reason;
  // "line 12: no Opus codec in the audio section", or just the reason when line is 0.
  std::string to_string() const;
};

// The DTLS role attribute (RFC 4145 / RFC 8842): X(value of a=setup). holdconn is refused by
// the parser.
#define RTCE_SDP_SETUPS(X) X(actpass) X(active) X(passive)
enum class Setup { RTCE_SDP_SETUPS(RTCE_VOCAB_ENUMERATOR) };
std::string_view to_string(Setup setup);

struct MediaSection {
  std::string kind;  // audio|video|application|...
  std::string mid;   // empty when the offer has no a=mid for this section
  uint16_t port = 0;
  std::string protocol;
  std::vector<std::string> formats;
  bool accepted = false;  // true only for the audio and application sections the answer accepts
  int line = 0;           // the m= line's number, for diagnostics
};

// ICE and DTLS are properties of the one transport every accepted section shares (BUNDLE):
// taken from the first accepted section, else its BUNDLE tag section, else the session level.
struct TransportOffer {
  std::string ice_ufrag, ice_pwd;
  std::string fingerprint_algorithm;  // lowercased, e.g. "sha-256"
  std::vector<uint8_t> fingerprint;   // raw digest bytes
  Setup setup = Setup::actpass;
  bool setup_present = false;  // false: no a=setup anywhere, treated as actpass
};

struct AudioOffer {
  size_t section_index = 0;  // index in ParsedOffer::sections
  std::string mid;
  uint8_t opus_payload_type = 0;
  int opus_channels = 2;  // from rtpmap (2 for WebRTC)
  bool rtcp_mux = false;
  std::string direction;                      // sendrecv|sendonly|recvonly|inactive
  std::vector<uint32_t> ssrcs;                // distinct, in order of first appearance
  std::optional<uint8_t> audio_level_ext_id;  // urn:ietf:params:rtp-hdrext:ssrc-audio-level
  std::string opus_fmtp;  // the offer's a=fmtp parameters for the Opus payload type, verbatim
};

inline constexpr uint16_t kDefaultSctpPort = 5000;                    // RFC 8841 §5
inline constexpr uint64_t kDefaultMaxMessageSize = 64 * 1024;         // RFC 8841 §6: when absent
inline constexpr uint64_t kMaxSctpMessageSizeAttribute = 1ULL << 40;  // larger: refused as nonsense

// An m=application section carrying WebRTC data channels (SCTP over DTLS, RFC 8841).
struct ApplicationOffer {
  size_t section_index = 0;  // index in ParsedOffer::sections
  std::string mid;
  uint16_t sctp_port = kDefaultSctpPort;
  // What the offerer can receive; 0 = it set no limit (RFC 8841 §6), so ours applies.
  uint64_t max_message_size = kDefaultMaxMessageSize;
  // The pre-RFC form "DTLS/SCTP <port>" + a=sctpmap, which the answer must echo.
  bool legacy_sctpmap = false;
};

struct ParsedOffer {
  std::string session_id;  // the o= line's sess-id, verbatim
  std::vector<MediaSection> sections;
  TransportOffer transport;
  std::optional<AudioOffer> audio;              // absent only in a text-only offer
  std::optional<ApplicationOffer> application;  // absent when the offer has no data channel
  bool bundle_offered = false;                  // a=group:BUNDLE lists the accepted sections' mids
  // The accepted sections' mids in the order the offer's BUNDLE group lists them.
  std::vector<std::string> bundle_mids;
};

// The first acceptable audio section and the first acceptable application section (which
// must share the audio's BUNDLE group) are accepted. An offer without an acceptable audio
// section fails unless policy.allow_text_only and it has an acceptable application section.
std::variant<ParsedOffer, OfferError> parse_offer(std::string_view sdp, const ParseLimits& limits = {},
                                                  const OfferPolicy& policy = {});

struct AnswerCandidate {  // host candidates: UDP, or ICE-TCP passive (RFC 6544)
  std::string ip;
  uint16_t port = 0;
  uint32_t priority = 0;
  std::string foundation = "1";
  bool tcp_passive = false;  // "tcp ... typ host tcptype passive" (Firefox ignores TCP without a tcptype)
};

// The candidate-attribute value (RFC 8839 section 5.1; RFC 6544 section 4.5 for TCP) after
// "a=candidate:", as the answer and an ICE restart's answer fragment both write it.
std::string candidate_attribute(const AnswerCandidate& candidate);

struct AnswerParams {
  std::string ice_ufrag, ice_pwd;  // server's
  std::string fingerprint_sha256;  // "AB:CD:..." uppercase hex with colons
  Setup setup = Setup::active;     // what the server prefers; answer_setup() has the final say
  std::vector<AnswerCandidate> candidates;
  uint64_t session_id = 0;  // o= line
  uint32_t ssrc = 0;
  std::string cname;
  std::string msid_stream = "rtcedge", msid_track = "audio";
  bool opus_inband_fec = true;
  // Accept the client's ssrc-audio-level header extension (same id) so its RTP carries the
  // voice activity level; off by default to keep the negotiated RTP header minimal.
  bool accept_audio_level_ext = false;
  // What our data-channel endpoint can receive in one message (a=max-message-size).
  uint64_t sctp_max_message_size = 256 * 1024;
};

// The DTLS role the answer takes: the opposite of an active/passive offer, else `preferred`
// (actpass as a preference means active, the role browsers pick as answerers).
Setup answer_setup(Setup offered, Setup preferred);

// The direction the answer takes for an offered one: sendonly<->recvonly, others unchanged.
std::string_view answer_direction(std::string_view offered);

// An ICE-lite answer, CRLF line endings, same m-line count and order as the offer (RFC 3264).
std::string build_answer(const ParsedOffer& offer, const AnswerParams& params);

}  // namespace rtce::sdp
