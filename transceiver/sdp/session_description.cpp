// session_description.cpp — parse_offer and build_answer. The parser makes one bounded pass that
// only records where each attribute is (string_views into the offer), then judges the audio and
// application sections and the one transport, so a hostile offer costs at most O(limits)
// memory and one error names its line.
#include "session_description.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>

#include "sdp_lexing.h"
#include "vocab.h"

namespace rtce::sdp {
namespace {

using namespace lexing;  // the tokens, lines and errors both SDP parsers share

constexpr std::string_view kAudioProtocol = "UDP/TLS/RTP/SAVPF";
constexpr std::string_view kDataChannelProtocol = "UDP/DTLS/SCTP";
constexpr std::string_view kLegacyDataChannelProtocol = "DTLS/SCTP";
constexpr std::string_view kDataChannelFormat = "webrtc-datachannel";
constexpr std::string_view kAudioLevelUri = "urn:ietf:params:rtp-hdrext:ssrc-audio-level";
constexpr size_t kMaxMidLength = 64;        // RFC 8843 gives no bound; browsers use 1..3 chars
constexpr size_t kMaxSessionIdLength = 64;  // o= sess-id, digits only

struct AttrRef {
  int line = 0;
  std::string_view value;
};

// Everything one section (or the session level) said, still unparsed.
struct SectionScan {
  int m_line = 0;
  std::string_view kind, protocol;
  uint16_t port = 0;
  std::vector<std::string_view> formats;
  std::optional<AttrRef> mid, ice_ufrag, ice_pwd, setup, direction, sctp_port, max_message_size;
  bool rtcp_mux = false;
  bool bundle_only = false;
  std::vector<AttrRef> fingerprints, rtpmaps, fmtps, ssrcs, extmaps, groups, sctpmaps;
};

char lower_ascii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower_ascii(x) == lower_ascii(y); });
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower_ascii(c);
  return out;
}

// Parses the whole of `text` as an unsigned decimal number no greater than `max`.
template <typename T>
std::optional<T> parse_number(std::string_view text, T max) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value > max) return std::nullopt;
  return static_cast<T>(value);
}

// RFC 4566 proto = token *("/" token).
bool is_protocol(std::string_view s) {
  for (size_t start = 0;;) {
    size_t slash = s.find('/', start);
    if (!is_token(s.substr(start, slash - start))) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = lower_ascii(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Digest sizes of the RFC 8122 hash names; 0 = a name we do not know (still syntax-checked).
size_t digest_size(std::string_view algorithm) {
  if (algorithm == "sha-256") return 32;
  if (algorithm == "sha-1") return 20;
  if (algorithm == "sha-224") return 28;
  if (algorithm == "sha-384") return 48;
  if (algorithm == "sha-512") return 64;
  if (algorithm == "md5" || algorithm == "md2") return 16;
  return 0;
}

struct Fingerprint {
  std::string algorithm;  // lowercased
  std::vector<uint8_t> digest;
};

std::variant<Fingerprint, OfferError> parse_fingerprint(const AttrRef& attr) {
  std::string_view rest = attr.value;
  std::string_view algorithm = next_token(rest);
  std::string_view hex = next_token(rest);
  if (algorithm.empty() || hex.empty() || !next_token(rest).empty() || !is_token(algorithm)) {
    return error_at(attr.line, "a=fingerprint must be '<hash> <hex>'");
  }
  Fingerprint fp{lowercase(algorithm), {}};
  // RFC 8122: 2UHEX *(":" 2UHEX); lowercase hex is accepted as browsers do.
  if ((hex.size() + 1) % 3 != 0 || hex.size() > 64 * 3) {
    return error_at(attr.line, "fingerprint hex malformed: expected XX:XX:... pairs");
  }
  fp.digest.reserve((hex.size() + 1) / 3);
  for (size_t i = 0; i < hex.size(); i += 3) {
    int high = hex_value(hex[i]), low = hex_value(hex[i + 1]);
    if (high < 0 || low < 0 || (i + 2 < hex.size() && hex[i + 2] != ':')) {
      return error_at(attr.line, "fingerprint hex malformed at character " + std::to_string(i + 1));
    }
    fp.digest.push_back(static_cast<uint8_t>(high * 16 + low));
  }
  size_t expected = digest_size(fp.algorithm);
  if (expected != 0 && fp.digest.size() != expected) {
    return error_at(attr.line, "fingerprint hex malformed: " + fp.algorithm + " needs " +
                                   std::to_string(expected) + " bytes, got " +
                                   std::to_string(fp.digest.size()));
  }
  return fp;
}

struct Rtpmap {
  uint8_t payload_type = 0;
  std::string_view encoding;
  uint32_t clock_rate = 0;
  int channels = 1;
};

std::optional<Rtpmap> parse_rtpmap(std::string_view value) {
  std::string_view rest = value;
  std::string_view pt_text = next_token(rest);
  std::string_view codec = next_token(rest);
  if (!next_token(rest).empty()) return std::nullopt;
  auto pt = parse_number<uint8_t>(pt_text, 127);
  if (!pt || codec.empty()) return std::nullopt;
  Rtpmap map;
  map.payload_type = *pt;
  size_t slash = codec.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  map.encoding = codec.substr(0, slash);
  std::string_view params = codec.substr(slash + 1);
  size_t slash2 = params.find('/');
  auto clock = parse_number<uint32_t>(params.substr(0, slash2), UINT32_MAX);
  if (!clock || map.encoding.empty()) return std::nullopt;
  map.clock_rate = *clock;
  if (slash2 != std::string_view::npos) {
    auto channels = parse_number<uint8_t>(params.substr(slash2 + 1), 255);
    if (!channels || *channels == 0) return std::nullopt;
    map.channels = *channels;
  }
  return map;
}

#define RTCE_SDP_SETUP_(name) Setup::name,
constexpr Setup kSetups[] = {RTCE_SDP_SETUPS(RTCE_SDP_SETUP_)};
#undef RTCE_SDP_SETUP_

std::variant<Setup, OfferError> parse_setup(const AttrRef& attr) {
  for (const Setup setup : kSetups)
    if (iequals(attr.value, to_string(setup))) return setup;
  if (iequals(attr.value, "holdconn")) return error_at(attr.line, "a=setup:holdconn not supported");
  return error_at(attr.line, "unknown a=setup value '" + std::string(attr.value.substr(0, 32)) + "'");
}

// Records a once-only attribute; a second copy is ambiguous and so refused.
std::optional<OfferError> set_once(std::optional<AttrRef>& slot, int line, std::string_view value,
                                   std::string_view name) {
  if (slot) {
    return error_at(
        line, "duplicate a=" + std::string(name) + " (first on line " + std::to_string(slot->line) + ")");
  }
  slot = AttrRef{line, value};
  return std::nullopt;
}

std::optional<OfferError> scan_attribute(SectionScan& scope, bool in_media, int line, std::string_view text) {
  size_t colon = text.find(':');
  std::string_view name = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  if (name == "mid") {
    if (!in_media) return error_at(line, "a=mid at session level");
    if (!is_token(value) || value.size() > kMaxMidLength) {
      return error_at(line, "a=mid must be 1.." + std::to_string(kMaxMidLength) + " token characters");
    }
    return set_once(scope.mid, line, value, name);
  }
  if (name == "ice-ufrag") return set_once(scope.ice_ufrag, line, value, name);
  if (name == "ice-pwd") return set_once(scope.ice_pwd, line, value, name);
  if (name == "setup") return set_once(scope.setup, line, value, name);
  if (in_media && name == "sctp-port") return set_once(scope.sctp_port, line, value, name);
  if (in_media && name == "max-message-size") return set_once(scope.max_message_size, line, value, name);
  if (name == "sendrecv" || name == "sendonly" || name == "recvonly" || name == "inactive") {
    if (scope.direction) {
      return error_at(line, "more than one direction attribute (first on line " +
                                std::to_string(scope.direction->line) + ")");
    }
    scope.direction = AttrRef{line, name};
    return std::nullopt;
  }
  if (name == "rtcp-mux")
    scope.rtcp_mux = true;
  else if (name == "bundle-only")
    scope.bundle_only = true;
  else if (name == "fingerprint")
    scope.fingerprints.push_back({line, value});
  else if (name == "rtpmap")
    scope.rtpmaps.push_back({line, value});
  else if (name == "fmtp")
    scope.fmtps.push_back({line, value});
  else if (name == "ssrc")
    scope.ssrcs.push_back({line, value});
  else if (name == "extmap")
    scope.extmaps.push_back({line, value});
  else if (name == "group" && !in_media)
    scope.groups.push_back({line, value});
  else if (name == "sctpmap" && in_media)
    scope.sctpmaps.push_back({line, value});
  return std::nullopt;  // every other attribute is irrelevant to the answer
}

std::optional<OfferError> scan_media_line(SectionScan& section, int line, std::string_view value) {
  std::string_view rest = value;
  section.m_line = line;
  section.kind = next_token(rest);
  std::string_view port_text = next_token(rest);
  section.protocol = next_token(rest);
  if (!is_token(section.kind) || port_text.empty() || !is_protocol(section.protocol)) {
    return error_at(line, "m= line must be '<media> <port> <proto> <fmt> ...'");
  }
  // RFC 4566 allows "<port>/<number of ports>"; WebRTC never uses it, the port alone matters.
  std::string_view port_only = port_text.substr(0, port_text.find('/'));
  auto port = parse_number<uint16_t>(port_only, 65535);
  if (!port || (port_only.size() < port_text.size() &&
                !parse_number<uint16_t>(port_text.substr(port_only.size() + 1), 65535))) {
    return error_at(line, "m= line port '" + std::string(port_text.substr(0, 16)) + "' is not 0..65535");
  }
  section.port = *port;
  for (std::string_view format = next_token(rest); !format.empty(); format = next_token(rest)) {
    if (!is_token(format)) return error_at(line, "m= line format is not a token");
    section.formats.push_back(format);
  }
  if (section.formats.empty()) return error_at(line, "m= line has no formats");
  return std::nullopt;
}

struct Scan {
  std::string_view session_id;
  SectionScan session;
  std::vector<SectionScan> sections;
};

std::variant<Scan, OfferError> scan_offer(std::string_view sdp, const ParseLimits& limits) {
  if (auto bad = check_size(sdp, limits, "offer")) return *bad;
  Scan scan;
  bool seen_o = false;
  int blank_line = 0;  // a blank line is only tolerated at the very end
  for (Lines lines(sdp, limits); !lines.done();) {
    std::string_view line;
    if (auto bad = lines.next(line)) return *bad;
    const int number = lines.number();
    if (number == 1 && !line.starts_with("v="))
      return error_at(1, "not an SDP offer: first line must be v=0");
    if (line.empty()) {
      if (blank_line == 0) blank_line = number;
      continue;
    }
    if (blank_line != 0) return error_at(blank_line, "empty line inside the offer");
    if (auto bad = check_characters(number, line)) return *bad;
    if (line.size() < 2 || line[0] < 'a' || line[0] > 'z' || line[1] != '=') {
      return error_at(number, "not an SDP line: expected '<letter>=<value>'");
    }
    const char type = line[0];
    std::string_view value = line.substr(2);
    const bool in_media = !scan.sections.empty();
    SectionScan& scope = in_media ? scan.sections.back() : scan.session;
    switch (type) {
      case 'v':
        if (number != 1) return error_at(number, "second v= line");
        if (value != "0")
          return error_at(number, "unsupported SDP version v=" + std::string(value.substr(0, 16)));
        break;
      case 'o': {
        if (in_media || seen_o) return error_at(number, "o= line out of place");
        seen_o = true;
        std::string_view rest = value;
        next_token(rest);  // username
        scan.session_id = next_token(rest);
        int remaining = 0;
        while (!next_token(rest).empty()) ++remaining;
        if (remaining != 4 || scan.session_id.empty() || scan.session_id.size() > kMaxSessionIdLength ||
            !std::all_of(scan.session_id.begin(), scan.session_id.end(),
                         [](char c) { return c >= '0' && c <= '9'; })) {
          return error_at(number,
                          "o= line must be '<user> <numeric sess-id> <version> IN <addrtype> <address>'");
        }
        break;
      }
      case 'm': {
        if (!seen_o) return error_at(number, "m= line before the o= line");
        if (scan.sections.size() >= limits.max_media_sections) {
          return error_at(number,
                          "more than " + std::to_string(limits.max_media_sections) + " media sections");
        }
        scan.sections.emplace_back();
        if (auto bad = scan_media_line(scan.sections.back(), number, value)) return *bad;
        break;
      }
      case 'a':
        if (auto bad = scan_attribute(scope, in_media, number, value)) return *bad;
        break;
      default: break;  // s=, t=, c=, b=, ... carry nothing the answer depends on
    }
  }
  if (!seen_o) return error_at(0, "no o= line");
  // Mids tie the answer's sections and BUNDLE group to the offer's, so they must be unique.
  for (size_t i = 0; i < scan.sections.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (scan.sections[i].mid && scan.sections[j].mid &&
          scan.sections[i].mid->value == scan.sections[j].mid->value) {
        return error_at(scan.sections[i].mid->line,
                        "duplicate mid '" + std::string(scan.sections[i].mid->value) + "'");
      }
    }
  }
  return scan;
}

// The BUNDLE group that lists `mid`, as its tokens; empty when there is none.
std::vector<std::string_view> bundle_group_of(const Scan& scan, std::string_view mid) {
  if (mid.empty()) return {};
  for (const AttrRef& group : scan.session.groups) {
    std::string_view rest = group.value;
    if (next_token(rest) != "BUNDLE") continue;
    std::vector<std::string_view> mids;
    for (std::string_view token = next_token(rest); !token.empty(); token = next_token(rest))
      mids.push_back(token);
    if (std::find(mids.begin(), mids.end(), mid) != mids.end()) return mids;
  }
  return {};
}

// The section whose transport a BUNDLE-d section shares (the group's first mid, RFC 8843 tag).
const SectionScan* bundle_tag_section(const Scan& scan, const std::vector<std::string_view>& group) {
  if (group.empty()) return nullptr;
  for (const SectionScan& section : scan.sections) {
    if (section.mid && section.mid->value == group.front()) return &section;
  }
  return nullptr;
}

// Media level first, then the BUNDLE tag section, then session level.
template <typename Getter>
auto inherited(const SectionScan& section, const SectionScan* tag, const SectionScan& session, Getter get)
    -> decltype(get(section)) {
  if (auto v = get(section); v) return v;
  if (tag != nullptr) {
    if (auto v = get(*tag); v) return v;
  }
  return get(session);
}

std::optional<OfferError> check_ice_credential(const AttrRef& attr, std::string_view name,
                                               size_t min_length) {
  if (attr.value.size() < min_length || attr.value.size() > 256 || !is_ice_chars(attr.value)) {
    return error_at(attr.line, std::string(name) + " must be " + std::to_string(min_length) +
                                   "..256 ice-chars [A-Za-z0-9+/], got " + std::to_string(attr.value.size()) +
                                   " characters");
  }
  return std::nullopt;
}

// RFC 5761 §4: with RTP and RTCP on one port, RTP payload types 64..95 are ambiguous.
bool collides_with_rtcp(uint8_t payload_type) { return payload_type >= 64 && payload_type <= 95; }

// The transport the section at `index` uses: its own attributes, else its BUNDLE tag
// section's, else the session level's.
std::variant<TransportOffer, OfferError> judge_transport(const Scan& scan, size_t index) {
  const SectionScan& section = scan.sections[index];
  const int m_line = section.m_line;
  const std::string_view mid = section.mid ? section.mid->value : std::string_view{};
  TransportOffer transport;
  const SectionScan* tag = bundle_tag_section(scan, bundle_group_of(scan, mid));
  auto ufrag = inherited(section, tag, scan.session, [](const SectionScan& s) { return s.ice_ufrag; });
  auto pwd = inherited(section, tag, scan.session, [](const SectionScan& s) { return s.ice_pwd; });
  if (!ufrag) return error_at(m_line, "no a=ice-ufrag (media or session level)");
  if (!pwd) return error_at(m_line, "no a=ice-pwd (media or session level)");
  if (auto bad = check_ice_credential(*ufrag, "ice-ufrag", 4)) return *bad;
  if (auto bad = check_ice_credential(*pwd, "ice-pwd", 22)) return *bad;
  transport.ice_ufrag = std::string(ufrag->value);
  transport.ice_pwd = std::string(pwd->value);

  const std::vector<AttrRef>* fingerprints = &scan.session.fingerprints;
  if (!section.fingerprints.empty())
    fingerprints = &section.fingerprints;
  else if (tag != nullptr && !tag->fingerprints.empty())
    fingerprints = &tag->fingerprints;
  if (fingerprints->empty()) return error_at(m_line, "no a=fingerprint (media or session level)");
  std::optional<Fingerprint> sha256;
  for (const AttrRef& attr : *fingerprints) {
    auto parsed = parse_fingerprint(attr);
    if (auto* bad = std::get_if<OfferError>(&parsed)) return *bad;
    auto& fp = std::get<Fingerprint>(parsed);
    if (!sha256 && fp.algorithm == "sha-256") sha256 = std::move(fp);
  }
  if (!sha256) {
    const AttrRef& first = fingerprints->front();
    std::string_view rest = first.value;
    return error_at(first.line,
                    "fingerprint hash " + lowercase(next_token(rest)) + " not supported, need sha-256");
  }
  transport.fingerprint_algorithm = std::move(sha256->algorithm);
  transport.fingerprint = std::move(sha256->digest);

  auto setup = inherited(section, tag, scan.session, [](const SectionScan& s) { return s.setup; });
  if (setup) {
    auto parsed = parse_setup(*setup);
    if (auto* bad = std::get_if<OfferError>(&parsed)) return *bad;
    transport.setup = std::get<Setup>(parsed);
    transport.setup_present = true;
  }

  return transport;
}

struct AudioJudgement {
  AudioOffer audio;
  TransportOffer transport;
};

std::variant<AudioJudgement, OfferError> judge_audio_section(const Scan& scan, size_t index) {
  const SectionScan& section = scan.sections[index];
  const int m_line = section.m_line;
  if (section.port == 0 && !section.bundle_only) {
    return error_at(m_line, "audio m-line has port 0 (the offerer rejected it)");
  }
  if (!iequals(section.protocol, kAudioProtocol)) {
    return error_at(m_line, "audio protocol " + std::string(section.protocol.substr(0, 64)) +
                                " not supported, need UDP/TLS/RTP/SAVPF");
  }
  AudioOffer audio;
  audio.section_index = index;
  audio.mid = section.mid ? std::string(section.mid->value) : std::string();

  // Opus: the first payload type in the m-line's preference order whose rtpmap is opus/48000/2
  // and that RTCP cannot be mistaken for. rtcp-mux is required, and with it RTP payload types
  // 64..95 put the second byte in 192..223, where RTCP packet types live (RFC 5761 §4): such
  // an Opus is passed over for another Opus payload type in the offer, else the offer fails.
  std::vector<Rtpmap> rtpmaps;
  rtpmaps.reserve(section.rtpmaps.size());
  for (const AttrRef& attr : section.rtpmaps) {
    auto map = parse_rtpmap(attr.value);
    if (!map) return error_at(attr.line, "malformed a=rtpmap (expected '<pt> <codec>/<rate>[/<channels>]')");
    rtpmaps.push_back(*map);
  }
  std::optional<Rtpmap> opus;
  std::optional<uint8_t> opus_colliding_with_rtcp;
  for (std::string_view format : section.formats) {
    auto pt = parse_number<uint8_t>(format, 127);
    if (!pt) continue;
    auto map =
        std::find_if(rtpmaps.begin(), rtpmaps.end(), [&](const Rtpmap& m) { return m.payload_type == *pt; });
    if (map != rtpmaps.end() && iequals(map->encoding, "opus") && map->clock_rate == 48000 &&
        map->channels == 2) {
      if (collides_with_rtcp(map->payload_type)) {
        if (!opus_colliding_with_rtcp) opus_colliding_with_rtcp = map->payload_type;
        continue;
      }
      opus = *map;
      break;
    }
  }
  if (!opus && opus_colliding_with_rtcp) {
    return error_at(m_line, "Opus payload type " + std::to_string(*opus_colliding_with_rtcp) +
                                " is in 64..95, which collides with RTCP packet types under rtcp-mux "
                                "(RFC 5761 section 4), and the offer has no other Opus payload type");
  }
  if (!opus) return error_at(m_line, "no Opus codec (opus/48000/2) in the audio section");
  audio.opus_payload_type = opus->payload_type;
  audio.opus_channels = opus->channels;
  const std::string opus_pt_text = std::to_string(opus->payload_type);
  for (const AttrRef& attr : section.fmtps) {
    std::string_view rest = attr.value;
    if (next_token(rest) == opus_pt_text) {
      size_t start = rest.find_first_not_of(' ');
      audio.opus_fmtp = start == std::string_view::npos ? std::string() : std::string(rest.substr(start));
      break;
    }
  }

  if (!section.rtcp_mux)
    return error_at(m_line, "no a=rtcp-mux in the audio section (RTP/RTCP mux is required)");
  audio.rtcp_mux = true;

  auto transport = judge_transport(scan, index);
  if (auto* bad = std::get_if<OfferError>(&transport)) return std::move(*bad);

  auto direction = section.direction ? section.direction : scan.session.direction;
  audio.direction = direction ? std::string(direction->value) : std::string("sendrecv");

  for (const AttrRef& attr : section.ssrcs) {
    std::string_view rest = attr.value;
    auto ssrc = parse_number<uint32_t>(next_token(rest), UINT32_MAX);
    if (!ssrc) return error_at(attr.line, "malformed a=ssrc (expected '<ssrc-id> <attribute>')");
    if (std::find(audio.ssrcs.begin(), audio.ssrcs.end(), *ssrc) == audio.ssrcs.end())
      audio.ssrcs.push_back(*ssrc);
  }

  for (const AttrRef& attr : section.extmaps) {
    std::string_view rest = attr.value;
    std::string_view id_text = next_token(rest);
    if (next_token(rest) != kAudioLevelUri) continue;
    // RFC 8285: ids 1..14 (one-byte form) or 16..255 (two-byte form), optional "/direction".
    auto id = parse_number<uint8_t>(id_text.substr(0, id_text.find('/')), 255);
    if (!id || *id == 0 || *id == 15) return error_at(attr.line, "a=extmap id must be 1..14 or 16..255");
    audio.audio_level_ext_id = *id;
    break;
  }
  return AudioJudgement{std::move(audio), std::move(std::get<TransportOffer>(transport))};
}

// RFC 8841: "UDP/DTLS/SCTP webrtc-datachannel" with a=sctp-port, or the pre-RFC
// "DTLS/SCTP <port>" with a=sctpmap:<port> webrtc-datachannel <streams>.
std::variant<ApplicationOffer, OfferError> judge_application_section(const Scan& scan, size_t index) {
  const SectionScan& section = scan.sections[index];
  const int m_line = section.m_line;
  if (section.port == 0 && !section.bundle_only) {
    return error_at(m_line, "application m-line has port 0 (the offerer rejected it)");
  }
  ApplicationOffer application;
  application.section_index = index;
  application.mid = section.mid ? std::string(section.mid->value) : std::string();
  if (iequals(section.protocol, kDataChannelProtocol)) {
    if (section.formats.size() != 1 || section.formats.front() != kDataChannelFormat) {
      return error_at(m_line, "UDP/DTLS/SCTP application m-line must have the one format webrtc-datachannel");
    }
    if (section.sctp_port) {
      auto port = parse_number<uint16_t>(section.sctp_port->value, 65535);
      if (!port || *port == 0) return error_at(section.sctp_port->line, "a=sctp-port must be 1..65535");
      application.sctp_port = *port;
    }
  } else if (iequals(section.protocol, kLegacyDataChannelProtocol)) {
    auto port =
        section.formats.size() == 1 ? parse_number<uint16_t>(section.formats.front(), 65535) : std::nullopt;
    if (!port || *port == 0)
      return error_at(m_line, "DTLS/SCTP application m-line must have one SCTP port 1..65535");
    const AttrRef* map = nullptr;
    for (const AttrRef& attr : section.sctpmaps) {
      std::string_view rest = attr.value;
      if (next_token(rest) == section.formats.front()) {
        if (next_token(rest) != kDataChannelFormat) {
          return error_at(attr.line, "a=sctpmap names another protocol than webrtc-datachannel");
        }
        map = &attr;
        break;
      }
    }
    if (map == nullptr)
      return error_at(m_line, "DTLS/SCTP application m-line without an a=sctpmap for its port");
    application.sctp_port = *port;
    application.legacy_sctpmap = true;
  } else {
    return error_at(m_line, "application protocol " + std::string(section.protocol.substr(0, 64)) +
                                " not supported, need UDP/DTLS/SCTP webrtc-datachannel");
  }
  if (section.max_message_size) {
    auto size = parse_number<uint64_t>(section.max_message_size->value, kMaxSctpMessageSizeAttribute);
    if (!size) {
      return error_at(section.max_message_size->line,
                      "a=max-message-size must be a decimal number of bytes up to 2^40");
    }
    application.max_message_size = *size;
  }
  return application;
}

}  // namespace

std::string OfferError::to_string() const {
  return line > 0 ? "line " + std::to_string(line) + ": " + reason : reason;
}

std::string_view to_string(Setup setup) {
  static constexpr const char* kNames[] = {RTCE_SDP_SETUPS(RTCE_VOCAB_LABEL)};
  return vocab_name(kNames, setup);
}

std::variant<ParsedOffer, OfferError> parse_offer(std::string_view sdp, const ParseLimits& limits,
                                                  const OfferPolicy& policy) {
  auto scanned = scan_offer(sdp, limits);
  if (auto* bad = std::get_if<OfferError>(&scanned)) return std::move(*bad);
  const Scan& scan = std::get<Scan>(scanned);

  // The first acceptable section of a kind wins. Failing that, the first live section's
  // reason is the useful one to report: a port-0 section was rejected by the client itself.
  auto first_acceptable = [&scan](std::string_view kind, auto judge) {
    using Judged = decltype(judge(scan, size_t{0}));
    using Accepted = std::variant_alternative_t<0, Judged>;
    std::optional<Accepted> accepted;
    std::optional<OfferError> first_error, port_zero_error;
    for (size_t i = 0; i < scan.sections.size() && !accepted; ++i) {
      if (scan.sections[i].kind != kind) continue;
      auto judged = judge(scan, i);
      if (auto* ok = std::get_if<Accepted>(&judged)) {
        accepted = std::move(*ok);
      } else {
        auto& slot =
            (scan.sections[i].port == 0 && !scan.sections[i].bundle_only) ? port_zero_error : first_error;
        if (!slot) slot = std::move(std::get<OfferError>(judged));
      }
    }
    return std::make_tuple(std::move(accepted), std::move(first_error), std::move(port_zero_error));
  };
  auto [audio, audio_error, audio_port_zero] = first_acceptable("audio", judge_audio_section);
  auto [application, application_error, application_port_zero] =
      first_acceptable("application", judge_application_section);
  // A broken live data-channel section fails the offer, as a broken audio one does: accepting
  // the audio alone would leave the client's channel waiting for an SCTP that never comes.
  if (!application && application_error) return std::move(*application_error);

  ParsedOffer offer;
  if (audio) {
    offer.transport = std::move(audio->transport);
    offer.audio = std::move(audio->audio);
  } else if (audio_error) {
    // Audio the client offered and we cannot take: a text-only session is not what it asked for.
    return std::move(*audio_error);
  } else if (!application || !policy.allow_text_only) {
    if (application)
      return error_at(0, "no audio section to accept, and text-only sessions are not allowed here");
    if (audio_port_zero) return std::move(*audio_port_zero);
    return error_at(0, "no audio m-line");
  } else {
    auto transport = judge_transport(scan, application->section_index);
    if (auto* bad = std::get_if<OfferError>(&transport)) return std::move(*bad);
    offer.transport = std::move(std::get<TransportOffer>(transport));
  }

  const std::string_view primary_mid = offer.audio ? std::string_view(offer.audio->mid) : application->mid;
  const std::vector<std::string_view> group = bundle_group_of(scan, primary_mid);
  if (offer.audio && application) {
    // One transport per session: the data channel must ride the audio's BUNDLE transport.
    if (group.empty() || application->mid.empty() ||
        std::find(group.begin(), group.end(), application->mid) == group.end()) {
      return error_at(scan.sections[application->section_index].m_line,
                      "the application section is not in the audio section's a=group:BUNDLE (one "
                      "transport per session)");
    }
  }
  offer.application = std::move(application);
  offer.session_id = std::string(scan.session_id);
  offer.sections.reserve(scan.sections.size());
  for (const SectionScan& scanned_section : scan.sections) {
    MediaSection section;
    section.kind = std::string(scanned_section.kind);
    section.mid = scanned_section.mid ? std::string(scanned_section.mid->value) : std::string();
    section.port = scanned_section.port;
    section.protocol = std::string(scanned_section.protocol);
    section.formats.assign(scanned_section.formats.begin(), scanned_section.formats.end());
    section.line = scanned_section.m_line;
    offer.sections.push_back(std::move(section));
  }
  if (offer.audio) offer.sections[offer.audio->section_index].accepted = true;
  if (offer.application) offer.sections[offer.application->section_index].accepted = true;
  offer.bundle_offered = !group.empty();
  for (std::string_view mid : group) {
    const bool accepted =
        (offer.audio && offer.audio->mid == mid) || (offer.application && offer.application->mid == mid);
    if (accepted &&
        std::find(offer.bundle_mids.begin(), offer.bundle_mids.end(), mid) == offer.bundle_mids.end())
      offer.bundle_mids.emplace_back(mid);
  }
  return offer;
}

Setup answer_setup(Setup offered, Setup preferred) {
  switch (offered) {
    case Setup::active: return Setup::passive;
    case Setup::passive: return Setup::active;
    case Setup::actpass: break;
  }
  return preferred == Setup::passive ? Setup::passive : Setup::active;
}

std::string_view answer_direction(std::string_view offered) {
  if (offered == "sendonly") return "recvonly";
  if (offered == "recvonly") return "sendonly";
  if (offered == "inactive") return "inactive";
  return "sendrecv";
}

std::string candidate_attribute(const AnswerCandidate& candidate) {
  return candidate.foundation + (candidate.tcp_passive ? " 1 tcp " : " 1 udp ") +
         std::to_string(candidate.priority) + " " + candidate.ip + " " + std::to_string(candidate.port) +
         (candidate.tcp_passive ? " typ host tcptype passive" : " typ host");
}

std::string build_answer(const ParsedOffer& offer, const AnswerParams& params) {
  std::string out;
  out.reserve(1536 + 64 * offer.sections.size() + 96 * params.candidates.size());
  auto line = [&out](auto... parts) {
    (out.append(parts), ...);
    out.append("\r\n");
  };
  const size_t audio_index = offer.audio ? offer.audio->section_index : SIZE_MAX;
  const size_t application_index = offer.application ? offer.application->section_index : SIZE_MAX;

  line("v=0");
  line("o=rtcedge ", std::to_string(params.session_id), " 2 IN IP4 127.0.0.1");
  line("s=-");
  line("t=0 0");
  line("a=ice-lite");
  if (offer.bundle_offered && !offer.bundle_mids.empty()) {
    std::string mids;
    for (const std::string& mid : offer.bundle_mids) mids.append(" ").append(mid);
    line("a=group:BUNDLE", mids);
  }
  line("a=msid-semantic: WMS");

  // Every accepted section repeats the one transport, as browsers write their own BUNDLE-d
  // answers; the candidates go in each too, so whichever section is the tag carries them.
  auto transport = [&](std::string_view mid) {
    if (!mid.empty()) line("a=mid:", mid);
    line("a=ice-ufrag:", params.ice_ufrag);
    line("a=ice-pwd:", params.ice_pwd);
    line("a=fingerprint:sha-256 ", params.fingerprint_sha256);
    line("a=setup:", to_string(answer_setup(offer.transport.setup, params.setup)));
  };
  auto candidates = [&] {
    for (const AnswerCandidate& candidate : params.candidates) {
      line("a=candidate:", candidate_attribute(candidate));
    }
    line("a=end-of-candidates");
  };

  for (size_t i = 0; i < offer.sections.size(); ++i) {
    const MediaSection& section = offer.sections[i];
    if (i == audio_index) {
      const AudioOffer& audio = *offer.audio;
      const std::string pt = std::to_string(audio.opus_payload_type);
      const std::string_view direction = answer_direction(audio.direction);
      line("m=audio 9 ", kAudioProtocol, " ", pt);
      line("c=IN IP4 0.0.0.0");
      transport(audio.mid);
      line("a=", direction);
      line("a=rtcp-mux");
      line("a=rtpmap:", pt, " opus/48000/2");
      line("a=fmtp:", pt, " minptime=10;useinbandfec=", params.opus_inband_fec ? "1" : "0",
           ";stereo=0;sprop-stereo=0");
      if (params.accept_audio_level_ext && audio.audio_level_ext_id) {
        line("a=extmap:", std::to_string(*audio.audio_level_ext_id), " ", kAudioLevelUri);
      }
      if (direction == "sendrecv" || direction == "sendonly") {
        line("a=msid:", params.msid_stream, " ", params.msid_track);
        line("a=ssrc:", std::to_string(params.ssrc), " cname:", params.cname);
      }
      candidates();
    } else if (i == application_index) {
      const ApplicationOffer& application = *offer.application;
      // Our SCTP port is the default one: nothing else shares the association to need another.
      const std::string port = std::to_string(kDefaultSctpPort);
      if (application.legacy_sctpmap) {
        line("m=application 9 ", kLegacyDataChannelProtocol, " ", port);
      } else {
        line("m=application 9 ", kDataChannelProtocol, " ", kDataChannelFormat);
      }
      line("c=IN IP4 0.0.0.0");
      transport(application.mid);
      if (application.legacy_sctpmap) {
        line("a=sctpmap:", port, " ", kDataChannelFormat, " 1024");
      } else {
        line("a=sctp-port:", port);
      }
      line("a=max-message-size:", std::to_string(params.sctp_max_message_size));
      candidates();
    } else {
      // Rejected (RFC 3264 6): port 0, formats echoed, mid kept so the answer lines up with the offer.
      std::string formats;
      for (const std::string& format : section.formats) formats.append(" ").append(format);
      line("m=", section.kind, " 0 ", section.protocol, formats);
      line("c=IN IP4 0.0.0.0");
      if (!section.mid.empty()) line("a=mid:", section.mid);
    }
  }
  return out;
}

}  // namespace rtce::sdp
