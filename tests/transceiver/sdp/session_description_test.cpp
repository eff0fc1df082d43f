// session_description_test.cpp — parse_offer and build_answer against real offers (Chromium and
// aiortc captures, a Firefox reconstruction), data-channel offers (with and without audio, the
// legacy sctpmap form), hostile offers that must be refused on the right line for the right
// reason, and the answer checked line by line and parsed back.
#include "session_description.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

namespace rtce::sdp {
namespace {

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(RTCE_SDP_FIXTURES) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in) << "missing fixture " << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

ParsedOffer parse_ok(const std::string& sdp, const OfferPolicy& policy = {}) {
  auto parsed = parse_offer(sdp, {}, policy);
  if (auto* error = std::get_if<OfferError>(&parsed)) {
    ADD_FAILURE() << "offer refused: " << error->to_string();
    return {};
  }
  return std::get<ParsedOffer>(std::move(parsed));
}

OfferError parse_error(const std::string& sdp, const ParseLimits& limits = {},
                       const OfferPolicy& policy = {}) {
  auto parsed = parse_offer(sdp, limits, policy);
  if (auto* offer = std::get_if<ParsedOffer>(&parsed)) {
    ADD_FAILURE() << "offer accepted, " << offer->sections.size() << " section(s)";
    return {};
  }
  return std::get<OfferError>(std::move(parsed));
}

#define EXPECT_OFFER_ERROR(sdp, expected_line, reason_part)                              \
  do {                                                                                   \
    OfferError error_ = parse_error(sdp);                                                \
    EXPECT_EQ(error_.line, expected_line) << error_.to_string();                         \
    EXPECT_NE(error_.reason.find(reason_part), std::string::npos) << error_.to_string(); \
  } while (0)

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\r\n", pos);
    EXPECT_NE(end, std::string::npos) << "answer line without CRLF at byte " << pos;
    if (end == std::string::npos) break;
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 2;
  }
  return lines;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\r\n";
  return out;
}

bool has_line(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

std::vector<std::string> lines_starting(const std::vector<std::string>& lines, const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& line : lines) {
    if (line.starts_with(prefix)) out.push_back(line);
  }
  return out;
}

// The lines of each section of an answer: [0] = session level, [i] = the i-th m= section.
std::vector<std::vector<std::string>> sections_of(const std::vector<std::string>& lines) {
  std::vector<std::vector<std::string>> sections(1);
  for (const std::string& line : lines) {
    if (line.starts_with("m=")) sections.emplace_back();
    sections.back().push_back(line);
  }
  return sections;
}

constexpr const char* kSha256 =
    "8C:4D:EB:F6:91:CF:7D:96:09:C0:A2:CE:89:D1:4D:05:50:2B:E9:96:F2:E7:96:40:B4:25:4E:B9:A4:15:F1:C2";

// A minimal valid offer whose line numbers the hostile tests name (1-based, see comments).
std::vector<std::string> base_lines() {
  return {
      "v=0",                                            // 1
      "o=- 1234 2 IN IP4 127.0.0.1",                    // 2
      "s=-",                                            // 3
      "t=0 0",                                          // 4
      "a=group:BUNDLE 0",                               // 5
      std::string("a=fingerprint:sha-256 ") + kSha256,  // 6
      "m=audio 9 UDP/TLS/RTP/SAVPF 111 0",              // 7
      "c=IN IP4 0.0.0.0",                               // 8
      "a=mid:0",                                        // 9
      "a=ice-ufrag:abcd",                               // 10
      "a=ice-pwd:abcdefghijklmnopqrstuv",               // 11 (22 chars)
      "a=setup:actpass",                                // 12
      "a=sendrecv",                                     // 13
      "a=rtcp-mux",                                     // 14
      "a=rtpmap:111 opus/48000/2",                      // 15
      "a=rtpmap:0 PCMU/8000",                           // 16
      "a=ssrc:1234 cname:x",                            // 17
  };
}

std::string with_line(int number, const std::string& replacement) {
  auto lines = base_lines();
  lines.at(number - 1) = replacement;
  return join(lines);
}

std::string without_line(int number) {
  auto lines = base_lines();
  lines.erase(lines.begin() + (number - 1));
  return join(lines);
}

AnswerParams test_params() {
  AnswerParams params;
  params.ice_ufrag = "Srv1";
  params.ice_pwd = "serverpasswordserverpw";
  params.fingerprint_sha256 =
      "4A:AD:B9:B1:3F:82:18:3B:54:02:12:DF:3E:5D:49:6B:19:E5:7C:AB:3E:B5:24:8C:5F:4D:DC:1B:04:C5:02:A4";
  params.candidates = {{"203.0.113.7", 3478, 2130706431, "1"}, {"2001:db8::7", 3478, 2130706175, "2"}};
  params.session_id = 42;
  params.ssrc = 0x01020304;
  params.cname = "rtcedge-cname";
  return params;
}

// ------------------------------------------------------------------ real offers

TEST(SdpRealOffers, ChromeAudioOffer) {
  ParsedOffer offer = parse_ok(read_fixture("chrome_audio_offer.sdp"));
  EXPECT_EQ(offer.session_id, "5889071083832631807");
  ASSERT_EQ(offer.sections.size(), 1u);
  EXPECT_EQ(offer.sections[0].kind, "audio");
  EXPECT_EQ(offer.sections[0].port, 54254);
  EXPECT_EQ(offer.sections[0].formats,
            (std::vector<std::string>{"111", "63", "9", "0", "8", "13", "110", "126"}));
  EXPECT_TRUE(offer.sections[0].accepted);
  const AudioOffer& audio = *offer.audio;
  EXPECT_EQ(audio.section_index, 0u);
  EXPECT_EQ(audio.mid, "0");
  EXPECT_EQ(audio.opus_payload_type, 111);
  EXPECT_EQ(audio.opus_channels, 2);
  EXPECT_EQ(audio.opus_fmtp, "minptime=10;useinbandfec=1");
  EXPECT_EQ(offer.transport.ice_ufrag, "XAM7");
  EXPECT_EQ(offer.transport.ice_pwd, "G/HvAs3PiJWZsHZ5eEqp6QH5");
  EXPECT_EQ(offer.transport.fingerprint_algorithm, "sha-256");
  ASSERT_EQ(offer.transport.fingerprint.size(), 32u);
  EXPECT_EQ(offer.transport.fingerprint.front(), 0xE0);
  EXPECT_EQ(offer.transport.fingerprint.back(), 0x07);
  EXPECT_EQ(offer.transport.setup, Setup::actpass);
  EXPECT_TRUE(offer.transport.setup_present);
  EXPECT_TRUE(audio.rtcp_mux);
  EXPECT_EQ(audio.direction, "sendrecv");
  EXPECT_EQ(audio.ssrcs, (std::vector<uint32_t>{3407648928u}));
  EXPECT_EQ(audio.audio_level_ext_id, std::optional<uint8_t>(1));
  EXPECT_TRUE(offer.bundle_offered);
}

TEST(SdpRealOffers, ChromeAudioVideoDataOffer) {
  ParsedOffer offer = parse_ok(read_fixture("chrome_audio_video_data_offer.sdp"));
  ASSERT_EQ(offer.sections.size(), 3u);
  EXPECT_EQ(offer.sections[0].kind, "audio");
  EXPECT_EQ(offer.sections[1].kind, "video");
  EXPECT_EQ(offer.sections[2].kind, "application");
  EXPECT_EQ(offer.sections[1].mid, "1");
  EXPECT_EQ(offer.sections[2].mid, "2");
  EXPECT_EQ(offer.sections[2].protocol, "UDP/DTLS/SCTP");
  EXPECT_EQ(offer.sections[2].formats, std::vector<std::string>{"webrtc-datachannel"});
  EXPECT_EQ(offer.sections[1].formats.size(), 34u);
  EXPECT_TRUE(offer.sections[0].accepted);
  EXPECT_FALSE(offer.sections[1].accepted);
  EXPECT_TRUE(offer.sections[2].accepted);
  EXPECT_EQ(offer.audio->opus_payload_type, 111);
  EXPECT_EQ(offer.transport.ice_ufrag, "NBw5");
  ASSERT_TRUE(offer.application);
  EXPECT_EQ(offer.application->section_index, 2u);
  EXPECT_EQ(offer.application->mid, "2");
  EXPECT_EQ(offer.application->sctp_port, 5000);
  EXPECT_EQ(offer.application->max_message_size, 262144u);
  EXPECT_FALSE(offer.application->legacy_sctpmap);
  EXPECT_TRUE(offer.bundle_offered);
  EXPECT_EQ(offer.bundle_mids, (std::vector<std::string>{"0", "2"}));
}

TEST(SdpRealOffers, FirefoxOfferTakesSessionLevelFingerprint) {
  ParsedOffer offer = parse_ok(read_fixture("firefox128_audio_offer.sdp"));
  EXPECT_EQ(offer.session_id, "7518439328296738496");
  const AudioOffer& audio = *offer.audio;
  EXPECT_EQ(audio.opus_payload_type, 109);
  EXPECT_EQ(audio.opus_fmtp, "maxplaybackrate=48000;stereo=1;useinbandfec=1");
  EXPECT_EQ(offer.transport.ice_ufrag, "8f2c1a7e");
  EXPECT_EQ(offer.transport.ice_pwd, "d1f3b5c0a8e24f6b9c7d2e1a0b3c4d5e");
  ASSERT_EQ(offer.transport.fingerprint.size(), 32u);
  EXPECT_EQ(offer.transport.fingerprint.front(), 0x5B);
  EXPECT_EQ(offer.transport.setup, Setup::actpass);
  EXPECT_EQ(audio.direction, "sendrecv");
  EXPECT_EQ(audio.ssrcs, (std::vector<uint32_t>{3735928559u}));
  EXPECT_EQ(audio.audio_level_ext_id, std::optional<uint8_t>(1));
  EXPECT_TRUE(offer.bundle_offered);
}

TEST(SdpRealOffers, AiortcOffer) {
  ParsedOffer offer = parse_ok(read_fixture("aiortc_audio_offer.sdp"));
  const AudioOffer& audio = *offer.audio;
  EXPECT_EQ(audio.opus_payload_type, 96);
  EXPECT_EQ(offer.transport.ice_ufrag, "hWfp");
  EXPECT_EQ(offer.transport.fingerprint_algorithm, "sha-256");
  EXPECT_EQ(offer.transport.fingerprint.front(), 0xB7);
  EXPECT_EQ(offer.transport.setup, Setup::actpass);
  EXPECT_EQ(audio.ssrcs, (std::vector<uint32_t>{1736528772u}));
  EXPECT_EQ(audio.audio_level_ext_id, std::optional<uint8_t>(2));
  EXPECT_TRUE(offer.bundle_offered);
}

TEST(SdpRealOffers, LineFeedOnlyOfferParsesTheSame) {
  std::string crlf = read_fixture("chrome_audio_video_data_offer.sdp");
  std::string lf;
  for (char c : crlf) {
    if (c != '\r') lf += c;
  }
  ASSERT_NE(lf.size(), crlf.size());
  ParsedOffer a = parse_ok(crlf), b = parse_ok(lf);
  EXPECT_EQ(a.transport.ice_pwd, b.transport.ice_pwd);
  EXPECT_EQ(a.transport.fingerprint, b.transport.fingerprint);
  EXPECT_EQ(a.sections.size(), b.sections.size());
  EXPECT_EQ(build_answer(a, test_params()), build_answer(b, test_params()));
}

// ------------------------------------------------------------------ accepted variations

// ICE-TCP (RFC 6544): a passive TCP host candidate says so, in the grammar every browser
// parses (Firefox ignores a TCP candidate without tcptype).
TEST(SdpRealOffers, TcpPassiveCandidatesFollowTheUdpOnes) {
  ParsedOffer offer = parse_ok(read_fixture("chrome_audio_offer.sdp"));
  AnswerParams params = test_params();
  params.candidates.push_back({"203.0.113.7", 443, 2122318079, "3", /*tcp_passive=*/true});
  const auto lines = split_lines(build_answer(offer, params));
  EXPECT_TRUE(has_line(lines, "a=candidate:1 1 udp 2130706431 203.0.113.7 3478 typ host"));
  EXPECT_TRUE(has_line(lines, "a=candidate:3 1 tcp 2122318079 203.0.113.7 443 typ host tcptype passive"));
}

TEST(SdpOfferVariations, BaseOfferIsAccepted) {
  ParsedOffer offer = parse_ok(join(base_lines()));
  EXPECT_EQ(offer.audio->opus_payload_type, 111);
  EXPECT_EQ(offer.transport.fingerprint.size(), 32u);
}

TEST(SdpOfferVariations, MissingSetupIsActpass) {
  ParsedOffer offer = parse_ok(without_line(12));
  EXPECT_EQ(offer.transport.setup, Setup::actpass);
  EXPECT_FALSE(offer.transport.setup_present);
}

TEST(SdpOfferVariations, SetupActiveAndPassiveAreRead) {
  EXPECT_EQ(parse_ok(with_line(12, "a=setup:active")).transport.setup, Setup::active);
  EXPECT_EQ(parse_ok(with_line(12, "a=setup:passive")).transport.setup, Setup::passive);
}

TEST(SdpOfferVariations, OpusNameIsCaseInsensitive) {
  EXPECT_EQ(parse_ok(with_line(15, "a=rtpmap:111 OPUS/48000/2")).audio->opus_payload_type, 111);
}

TEST(SdpOfferVariations, FirstOpusInPreferenceOrderWins) {
  auto lines = base_lines();
  lines[6] = "m=audio 9 UDP/TLS/RTP/SAVPF 0 120 111";
  lines.push_back("a=rtpmap:120 opus/48000/2");
  EXPECT_EQ(parse_ok(join(lines)).audio->opus_payload_type, 120);
}

TEST(SdpOfferVariations, OpusInTheRtcpRangeGivesWayToAnotherOpus) {
  // RFC 5761 §4: under rtcp-mux, payload types 64..95 look like RTCP; a later Opus is taken.
  auto lines = base_lines();
  lines[6] = "m=audio 9 UDP/TLS/RTP/SAVPF 64 0 111";
  lines[14] = "a=rtpmap:64 opus/48000/2";
  lines.push_back("a=rtpmap:111 opus/48000/2");
  const ParsedOffer offer = parse_ok(join(lines));
  EXPECT_EQ(offer.audio->opus_payload_type, 111);
  EXPECT_TRUE(has_line(split_lines(build_answer(offer, test_params())), "m=audio 9 UDP/TLS/RTP/SAVPF 111"));
}

TEST(SdpOfferVariations, OpusJustOutsideTheRtcpRangeIsKept) {
  for (int pt : {63, 96}) {
    auto lines = base_lines();
    lines[6] = "m=audio 9 UDP/TLS/RTP/SAVPF " + std::to_string(pt) + " 0";
    lines[14] = "a=rtpmap:" + std::to_string(pt) + " opus/48000/2";
    EXPECT_EQ(parse_ok(join(lines)).audio->opus_payload_type, pt);
  }
}

TEST(SdpOfferVariations, MediaLevelIceOverridesSessionLevel) {
  auto lines = base_lines();
  lines.insert(lines.begin() + 5, {"a=ice-ufrag:sess", "a=ice-pwd:sessionsessionsessionses"});
  ParsedOffer offer = parse_ok(join(lines));
  EXPECT_EQ(offer.transport.ice_ufrag, "abcd");
  EXPECT_EQ(offer.transport.ice_pwd, "abcdefghijklmnopqrstuv");
}

TEST(SdpOfferVariations, SessionLevelIceAndDirectionAreInherited) {
  auto lines = base_lines();
  lines.erase(lines.begin() + 9, lines.begin() + 11);  // media-level ufrag and pwd
  lines.erase(lines.begin() + 10);                     // a=sendrecv (now line 11 of the list)
  lines.insert(lines.begin() + 4, {"a=ice-ufrag:sess", "a=ice-pwd:sessionsessionsessionses", "a=recvonly"});
  ParsedOffer offer = parse_ok(join(lines));
  EXPECT_EQ(offer.transport.ice_ufrag, "sess");
  EXPECT_EQ(offer.audio->direction, "recvonly");
}

TEST(SdpOfferVariations, BundledSectionInheritsTheTagSectionsTransport) {
  // Audio is second in the BUNDLE group and carries no ICE/DTLS attributes of its own.
  std::string sdp = join({"v=0", "o=- 1 2 IN IP4 0.0.0.0", "s=-", "t=0 0", "a=group:BUNDLE v a",
                          "m=video 9 UDP/TLS/RTP/SAVPF 96", "a=mid:v", "a=ice-ufrag:tagU",
                          "a=ice-pwd:tagpasswordtagpassword", std::string("a=fingerprint:sha-256 ") + kSha256,
                          "a=setup:passive", "a=rtpmap:96 VP8/90000", "m=audio 0 UDP/TLS/RTP/SAVPF 111",
                          "a=bundle-only", "a=mid:a", "a=rtcp-mux", "a=rtpmap:111 opus/48000/2"});
  ParsedOffer offer = parse_ok(sdp);
  EXPECT_EQ(offer.audio->section_index, 1u);
  EXPECT_EQ(offer.transport.ice_ufrag, "tagU");
  EXPECT_EQ(offer.transport.setup, Setup::passive);
  EXPECT_EQ(offer.transport.fingerprint.size(), 32u);
  EXPECT_TRUE(offer.bundle_offered);
}

TEST(SdpOfferVariations, SecondAudioSectionAcceptedWhenFirstIsUnusable) {
  auto lines = base_lines();
  lines.insert(lines.begin() + 6,
               {"m=audio 9 UDP/TLS/RTP/SAVPF 0", "a=mid:pcmu", "a=rtcp-mux", "a=rtpmap:0 PCMU/8000"});
  ParsedOffer offer = parse_ok(join(lines));
  ASSERT_EQ(offer.sections.size(), 2u);
  EXPECT_EQ(offer.audio->section_index, 1u);
  EXPECT_EQ(offer.audio->mid, "0");
  EXPECT_FALSE(offer.sections[0].accepted);
  EXPECT_TRUE(offer.sections[1].accepted);
}

TEST(SdpOfferVariations, Sha256IsPickedAmongSeveralFingerprints) {
  auto lines = base_lines();
  lines[5] = "a=fingerprint:sha-1 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33";
  lines.insert(lines.begin() + 6, std::string("a=fingerprint:SHA-256 ") + kSha256);
  ParsedOffer offer = parse_ok(join(lines));
  EXPECT_EQ(offer.transport.fingerprint_algorithm, "sha-256");
  EXPECT_EQ(offer.transport.fingerprint.front(), 0x8C);
}

TEST(SdpOfferVariations, DuplicateSsrcsAreCollapsed) {
  auto lines = base_lines();
  lines.push_back("a=ssrc:1234 msid:s t");
  lines.push_back("a=ssrc:99 cname:x");
  EXPECT_EQ(parse_ok(join(lines)).audio->ssrcs, (std::vector<uint32_t>{1234u, 99u}));
}

TEST(SdpOfferVariations, NoBundleGroupMeansNoBundle) {
  EXPECT_FALSE(parse_ok(without_line(5)).bundle_offered);
}

TEST(SdpOfferVariations, TrailingBlankLinesAreTolerated) {
  EXPECT_EQ(parse_ok(join(base_lines()) + "\r\n\r\n").audio->opus_payload_type, 111);
}

// ------------------------------------------------------------------ hostile offers

TEST(SdpHostileOffers, EmptyOffer) { EXPECT_OFFER_ERROR("", 0, "empty offer"); }

TEST(SdpHostileOffers, GarbageBytes) {
  std::string garbage;
  for (int i = 0; i < 512; ++i) garbage += static_cast<char>((i * 131 + 7) & 0xFF);
  EXPECT_OFFER_ERROR(garbage, 1, "not an SDP offer");
}

TEST(SdpHostileOffers, JsonIsNotSdp) {
  EXPECT_OFFER_ERROR("{\"type\":\"offer\",\"sdp\":\"v=0\"}", 1, "not an SDP offer");
}

TEST(SdpHostileOffers, MissingVersionLine) {
  EXPECT_OFFER_ERROR(without_line(1), 1, "first line must be v=0");
}

TEST(SdpHostileOffers, WrongVersion) {
  EXPECT_OFFER_ERROR(with_line(1, "v=1"), 1, "unsupported SDP version");
}

TEST(SdpHostileOffers, SecondVersionLine) { EXPECT_OFFER_ERROR(with_line(3, "v=0"), 3, "second v= line"); }

TEST(SdpHostileOffers, MissingOriginLine) {
  EXPECT_OFFER_ERROR(without_line(2), 6, "m= line before the o= line");
}

TEST(SdpHostileOffers, MalformedOriginLine) {
  EXPECT_OFFER_ERROR(with_line(2, "o=- notanumber 2 IN IP4 127.0.0.1"), 2, "numeric sess-id");
  EXPECT_OFFER_ERROR(with_line(2, "o=- 1 2 IN IP4"), 2, "o= line must be");
}

TEST(SdpHostileOffers, TwoMegabytesOfEmptyAttributes) {
  std::string sdp = "v=0\r\n";
  while (sdp.size() < 2 * 1024 * 1024) sdp += "a=\r\n";
  EXPECT_OFFER_ERROR(sdp, 0, "more than the 65536-byte limit");
}

TEST(SdpHostileOffers, TooManyLines) {
  auto lines = base_lines();
  while (lines.size() < 2100) lines.push_back("a=x");
  EXPECT_OFFER_ERROR(join(lines), 2001, "more than 2000 lines");
}

TEST(SdpHostileOffers, LineTooLong) {
  EXPECT_OFFER_ERROR(with_line(3, "s=" + std::string(5000, 'x')), 3, "longer than 4096 bytes");
}

TEST(SdpHostileOffers, AMillionMediaLinesStopAtTheSectionLimit) {
  std::string sdp = join(base_lines());
  const std::string m_line = "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\n";
  sdp.reserve(sdp.size() + m_line.size() * 1000000);
  for (int i = 0; i < 1000000; ++i) sdp += m_line;
  // Default limits: refused by size before any line is looked at.
  EXPECT_OFFER_ERROR(sdp, 0, "more than the 65536-byte limit");
  // Limits opened wide: the section cap still stops the scan at the 17th m= line.
  ParseLimits wide;
  wide.max_bytes = sdp.size();
  wide.max_lines = 2000000;
  OfferError error = parse_error(sdp, wide);
  EXPECT_EQ(error.line, 17 + 16);  // base has 17 lines and one m= section; 16 more fit
  EXPECT_NE(error.reason.find("more than 16 media sections"), std::string::npos) << error.to_string();
}

TEST(SdpHostileOffers, NulByteInLine) {
  EXPECT_OFFER_ERROR(with_line(9, std::string("a=mid:0\0x", 9)), 9, "NUL byte");
}

TEST(SdpHostileOffers, ControlCharacterInLine) {
  EXPECT_OFFER_ERROR(with_line(3, "s=\x1b[31m"), 3, "control character 0x1b");
}

TEST(SdpHostileOffers, LineThatIsNotTypeEqualsValue) {
  EXPECT_OFFER_ERROR(with_line(8, "hello world"), 8, "not an SDP line");
  EXPECT_OFFER_ERROR(with_line(8, "A=uppercase"), 8, "not an SDP line");
  EXPECT_OFFER_ERROR(with_line(8, "a"), 8, "not an SDP line");
}

TEST(SdpHostileOffers, BlankLineInTheMiddle) { EXPECT_OFFER_ERROR(with_line(8, ""), 8, "empty line"); }

TEST(SdpHostileOffers, NoAudioSection) {
  auto lines = base_lines();
  lines[6] = "m=video 9 UDP/TLS/RTP/SAVPF 96";
  EXPECT_OFFER_ERROR(join(lines), 0, "no audio m-line");
}

TEST(SdpHostileOffers, NoSectionsAtAll) {
  EXPECT_OFFER_ERROR(join({"v=0", "o=- 1 2 IN IP4 0.0.0.0", "s=-", "t=0 0"}), 0, "no audio m-line");
}

TEST(SdpHostileOffers, NoOpus) {
  auto lines = base_lines();
  lines[6] = "m=audio 9 UDP/TLS/RTP/SAVPF 0";
  lines.erase(lines.begin() + 14);  // a=rtpmap:111 opus
  EXPECT_OFFER_ERROR(join(lines), 7, "no Opus codec");
}

TEST(SdpHostileOffers, OnlyOpusCollidesWithRtcp) {
  for (int pt : {64, 72, 95}) {
    auto lines = base_lines();
    lines[6] = "m=audio 9 UDP/TLS/RTP/SAVPF " + std::to_string(pt) + " 0";
    lines[14] = "a=rtpmap:" + std::to_string(pt) + " opus/48000/2";
    EXPECT_OFFER_ERROR(join(lines), 7, "collides with RTCP packet types under rtcp-mux");
  }
}

TEST(SdpHostileOffers, OpusMono) {
  EXPECT_OFFER_ERROR(with_line(15, "a=rtpmap:111 opus/48000/1"), 7, "no Opus codec");
}

TEST(SdpHostileOffers, OpusRtpmapForAnUnlistedPayloadType) {
  EXPECT_OFFER_ERROR(with_line(15, "a=rtpmap:112 opus/48000/2"), 7, "no Opus codec");
}

TEST(SdpHostileOffers, MalformedRtpmap) {
  EXPECT_OFFER_ERROR(with_line(16, "a=rtpmap:300 PCMU/8000"), 16, "malformed a=rtpmap");
  EXPECT_OFFER_ERROR(with_line(16, "a=rtpmap:0 PCMU"), 16, "malformed a=rtpmap");
  EXPECT_OFFER_ERROR(with_line(16, "a=rtpmap:0 PCMU/99999999999"), 16, "malformed a=rtpmap");
}

TEST(SdpHostileOffers, NoRtcpMux) { EXPECT_OFFER_ERROR(without_line(14), 7, "no a=rtcp-mux"); }

TEST(SdpHostileOffers, NoFingerprint) { EXPECT_OFFER_ERROR(without_line(6), 6, "no a=fingerprint"); }

TEST(SdpHostileOffers, Sha1FingerprintOnly) {
  EXPECT_OFFER_ERROR(
      with_line(6, "a=fingerprint:sha-1 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33"), 6,
      "fingerprint hash sha-1 not supported, need sha-256");
}

TEST(SdpHostileOffers, Sha512FingerprintOnly) {
  std::string hex;
  for (int i = 0; i < 64; ++i) hex += (i ? ":" : "") + std::string("AB");
  EXPECT_OFFER_ERROR(with_line(6, "a=fingerprint:sha-512 " + hex), 6,
                     "fingerprint hash sha-512 not supported");
}

TEST(SdpHostileOffers, FingerprintBadHex) {
  std::string bad = std::string("a=fingerprint:sha-256 ZZ") + (kSha256 + 2);
  EXPECT_OFFER_ERROR(with_line(6, bad), 6, "fingerprint hex malformed");
  EXPECT_OFFER_ERROR(with_line(6, "a=fingerprint:sha-256 8C4DEBF6"), 6, "fingerprint hex malformed");
  EXPECT_OFFER_ERROR(with_line(6, "a=fingerprint:sha-256 8C:4D:EB"), 6, "needs 32 bytes, got 3");
  EXPECT_OFFER_ERROR(with_line(6, "a=fingerprint:sha-256"), 6, "a=fingerprint must be");
}

TEST(SdpHostileOffers, IcePasswordTooShort) {
  EXPECT_OFFER_ERROR(with_line(11, "a=ice-pwd:abcdefghijklmnopqrstu"), 11, "ice-pwd must be 22..256");
}

TEST(SdpHostileOffers, IcePasswordTooLong) {
  EXPECT_OFFER_ERROR(with_line(11, "a=ice-pwd:" + std::string(257, 'p')), 11, "ice-pwd must be 22..256");
}

TEST(SdpHostileOffers, IceUfragTooShortOrNotIceChars) {
  EXPECT_OFFER_ERROR(with_line(10, "a=ice-ufrag:abc"), 10, "ice-ufrag must be 4..256");
  EXPECT_OFFER_ERROR(with_line(10, "a=ice-ufrag:ab-cd"), 10, "ice-chars");
}

TEST(SdpHostileOffers, NoIceCredentials) {
  EXPECT_OFFER_ERROR(without_line(10), 7, "no a=ice-ufrag");
  EXPECT_OFFER_ERROR(without_line(11), 7, "no a=ice-pwd");
}

TEST(SdpHostileOffers, NonSrtpAudioProtocol) {
  EXPECT_OFFER_ERROR(with_line(7, "m=audio 9 RTP/AVP 111 0"), 7,
                     "audio protocol RTP/AVP not supported, need UDP/TLS/RTP/SAVPF");
}

TEST(SdpHostileOffers, BadMediaLines) {
  EXPECT_OFFER_ERROR(with_line(7, "m=audio 70000 UDP/TLS/RTP/SAVPF 111"), 7, "not 0..65535");
  EXPECT_OFFER_ERROR(with_line(7, "m=audio -1 UDP/TLS/RTP/SAVPF 111"), 7, "not 0..65535");
  EXPECT_OFFER_ERROR(with_line(7, "m=audio 9 UDP/TLS/RTP/SAVPF"), 7, "m= line has no formats");
  EXPECT_OFFER_ERROR(with_line(7, "m=audio 9"), 7, "m= line must be");
}

TEST(SdpHostileOffers, AudioRejectedByTheOfferer) {
  EXPECT_OFFER_ERROR(with_line(7, "m=audio 0 UDP/TLS/RTP/SAVPF 111 0"), 7, "port 0");
}

TEST(SdpHostileOffers, SetupHoldconnOrUnknown) {
  EXPECT_OFFER_ERROR(with_line(12, "a=setup:holdconn"), 12, "holdconn not supported");
  EXPECT_OFFER_ERROR(with_line(12, "a=setup:sideways"), 12, "unknown a=setup value");
}

TEST(SdpHostileOffers, DuplicateOnceOnlyAttributes) {
  auto lines = base_lines();
  lines.push_back("a=ice-ufrag:efgh");
  EXPECT_OFFER_ERROR(join(lines), 18, "duplicate a=ice-ufrag (first on line 10)");
  lines.back() = "a=recvonly";
  EXPECT_OFFER_ERROR(join(lines), 18, "more than one direction attribute");
}

TEST(SdpHostileOffers, BadOrDuplicateMid) {
  EXPECT_OFFER_ERROR(with_line(9, "a=mid:"), 9, "a=mid must be");
  EXPECT_OFFER_ERROR(with_line(9, "a=mid:" + std::string(65, 'm')), 9, "a=mid must be");
  auto lines = base_lines();
  lines.insert(lines.begin() + 6, {"m=video 9 UDP/TLS/RTP/SAVPF 96", "a=mid:0"});
  EXPECT_OFFER_ERROR(join(lines), 11, "duplicate mid '0'");
}

TEST(SdpHostileOffers, MalformedSsrcAndExtmap) {
  EXPECT_OFFER_ERROR(with_line(17, "a=ssrc:4294967296 cname:x"), 17, "malformed a=ssrc");
  EXPECT_OFFER_ERROR(with_line(17, "a=extmap:15 urn:ietf:params:rtp-hdrext:ssrc-audio-level"), 17,
                     "a=extmap id must be");
}

TEST(SdpHostileOffers, ToStringNamesTheLine) {
  OfferError error = parse_error(with_line(7, "m=audio 9 UDP/TLS/RTP/SAVPF 0"));
  EXPECT_EQ(error.to_string(), "line 7: no Opus codec (opus/48000/2) in the audio section");
  EXPECT_EQ((OfferError{0, "no audio m-line"}.to_string()), "no audio m-line");
}

// ------------------------------------------------------------------ answers

TEST(SdpAnswer, ChromeAudioAnswerExactly) {
  ParsedOffer offer = parse_ok(read_fixture("chrome_audio_offer.sdp"));
  const std::string expected =
      "v=0\r\n"
      "o=rtcedge 42 2 IN IP4 127.0.0.1\r\n"
      "s=-\r\n"
      "t=0 0\r\n"
      "a=ice-lite\r\n"
      "a=group:BUNDLE 0\r\n"
      "a=msid-semantic: WMS\r\n"
      "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
      "c=IN IP4 0.0.0.0\r\n"
      "a=mid:0\r\n"
      "a=ice-ufrag:Srv1\r\n"
      "a=ice-pwd:serverpasswordserverpw\r\n"
      "a=fingerprint:sha-256 "
      "4A:AD:B9:B1:3F:82:18:3B:54:02:12:DF:3E:5D:49:6B:19:E5:7C:AB:3E:B5:24:8C:5F:4D:DC:1B:04:C5:02:A4\r\n"
      "a=setup:active\r\n"
      "a=sendrecv\r\n"
      "a=rtcp-mux\r\n"
      "a=rtpmap:111 opus/48000/2\r\n"
      "a=fmtp:111 minptime=10;useinbandfec=1;stereo=0;sprop-stereo=0\r\n"
      "a=msid:rtcedge audio\r\n"
      "a=ssrc:16909060 cname:rtcedge-cname\r\n"
      "a=candidate:1 1 udp 2130706431 203.0.113.7 3478 typ host\r\n"
      "a=candidate:2 1 udp 2130706175 2001:db8::7 3478 typ host\r\n"
      "a=end-of-candidates\r\n";
  EXPECT_EQ(build_answer(offer, test_params()), expected);
}

TEST(SdpAnswer, VideoIsRejectedAndTheDataChannelAcceptedInOrder) {
  ParsedOffer offer = parse_ok(read_fixture("chrome_audio_video_data_offer.sdp"));
  auto lines = split_lines(build_answer(offer, test_params()));
  auto m_lines = lines_starting(lines, "m=");
  ASSERT_EQ(m_lines.size(), 3u);
  EXPECT_EQ(m_lines[0], "m=audio 9 UDP/TLS/RTP/SAVPF 111");
  std::string video_formats;
  for (const std::string& f : offer.sections[1].formats) video_formats += " " + f;
  EXPECT_EQ(m_lines[1], "m=video 0 UDP/TLS/RTP/SAVPF" + video_formats);
  EXPECT_EQ(m_lines[2], "m=application 9 UDP/DTLS/SCTP webrtc-datachannel");
  auto sections = sections_of(lines);
  ASSERT_EQ(sections.size(), 4u);
  // Rejected sections: m=, c= and a=mid, nothing else.
  EXPECT_EQ(sections[2], (std::vector<std::string>{m_lines[1], "c=IN IP4 0.0.0.0", "a=mid:1"}));
  // The data channel: the same transport as the audio, our SCTP port and message size.
  EXPECT_EQ(
      sections[3],
      (std::vector<std::string>{
          m_lines[2], "c=IN IP4 0.0.0.0", "a=mid:2", "a=ice-ufrag:Srv1", "a=ice-pwd:serverpasswordserverpw",
          "a=fingerprint:sha-256 " + test_params().fingerprint_sha256, "a=setup:active", "a=sctp-port:5000",
          "a=max-message-size:262144", "a=candidate:1 1 udp 2130706431 203.0.113.7 3478 typ host",
          "a=candidate:2 1 udp 2130706175 2001:db8::7 3478 typ host", "a=end-of-candidates"}));
  EXPECT_EQ(lines_starting(lines, "a=group:"), std::vector<std::string>{"a=group:BUNDLE 0 2"});
  EXPECT_TRUE(has_line(sections[0], "a=ice-lite"));
  EXPECT_EQ(lines_starting(sections[1], "a=candidate:").size(), 2u);
  for (const std::string& attr : {"a=ice-ufrag:", "a=ice-pwd:", "a=fingerprint:", "a=setup:"}) {
    EXPECT_EQ(lines_starting(sections[1], attr), lines_starting(sections[3], attr)) << attr;
  }
}

TEST(SdpAnswer, FirefoxAnswerEchoesPayloadType109) {
  ParsedOffer offer = parse_ok(read_fixture("firefox128_audio_offer.sdp"));
  auto lines = split_lines(build_answer(offer, test_params()));
  EXPECT_TRUE(has_line(lines, "m=audio 9 UDP/TLS/RTP/SAVPF 109"));
  EXPECT_TRUE(has_line(lines, "a=rtpmap:109 opus/48000/2"));
  EXPECT_TRUE(has_line(lines, "a=fmtp:109 minptime=10;useinbandfec=1;stereo=0;sprop-stereo=0"));
  EXPECT_TRUE(has_line(lines, "a=group:BUNDLE 0"));
  EXPECT_TRUE(has_line(lines, "a=setup:active"));
  EXPECT_TRUE(has_line(lines, "a=mid:0"));
}

TEST(SdpAnswer, AiortcAnswerEchoesPayloadType96) {
  ParsedOffer offer = parse_ok(read_fixture("aiortc_audio_offer.sdp"));
  auto lines = split_lines(build_answer(offer, test_params()));
  EXPECT_TRUE(has_line(lines, "m=audio 9 UDP/TLS/RTP/SAVPF 96"));
  EXPECT_TRUE(has_line(lines, "a=rtpmap:96 opus/48000/2"));
  EXPECT_EQ(lines_starting(lines, "m=").size(), 1u);
}

TEST(SdpAnswer, SetupResolutionTable) {
  EXPECT_EQ(answer_setup(Setup::actpass, Setup::active), Setup::active);
  EXPECT_EQ(answer_setup(Setup::actpass, Setup::passive), Setup::passive);
  EXPECT_EQ(answer_setup(Setup::actpass, Setup::actpass), Setup::active);
  EXPECT_EQ(answer_setup(Setup::active, Setup::active), Setup::passive);
  EXPECT_EQ(answer_setup(Setup::active, Setup::passive), Setup::passive);
  EXPECT_EQ(answer_setup(Setup::passive, Setup::active), Setup::active);
  EXPECT_EQ(answer_setup(Setup::passive, Setup::passive), Setup::active);

  struct Case {
    const char* offer_setup;  // nullptr = no a=setup line
    rtce::sdp::Setup preferred;
    const char* answer_line;
  };
  for (const Case& c :
       {Case{"actpass", Setup::active, "a=setup:active"}, Case{"actpass", Setup::passive, "a=setup:passive"},
        Case{"active", Setup::active, "a=setup:passive"}, Case{"passive", Setup::passive, "a=setup:active"},
        Case{nullptr, Setup::passive, "a=setup:passive"}}) {
    std::string sdp =
        c.offer_setup ? with_line(12, std::string("a=setup:") + c.offer_setup) : without_line(12);
    AnswerParams params = test_params();
    params.setup = c.preferred;
    auto lines = split_lines(build_answer(parse_ok(sdp), params));
    EXPECT_EQ(lines_starting(lines, "a=setup:"), std::vector<std::string>{c.answer_line})
        << "offer setup " << (c.offer_setup ? c.offer_setup : "(none)");
  }
}

TEST(SdpAnswer, DirectionMirror) {
  struct Case {
    const char* offered;
    const char* answered;
    bool sends;  // the answer carries our a=ssrc / a=msid only when it sends
  };
  for (const Case& c : {Case{"sendrecv", "sendrecv", true}, Case{"sendonly", "recvonly", false},
                        Case{"recvonly", "sendonly", true}, Case{"inactive", "inactive", false}}) {
    auto lines =
        split_lines(build_answer(parse_ok(with_line(13, std::string("a=") + c.offered)), test_params()));
    EXPECT_TRUE(has_line(lines, std::string("a=") + c.answered)) << c.offered;
    EXPECT_EQ(has_line(lines, "a=ssrc:16909060 cname:rtcedge-cname"), c.sends) << c.offered;
    EXPECT_EQ(has_line(lines, "a=msid:rtcedge audio"), c.sends) << c.offered;
  }
  EXPECT_EQ(answer_direction("sendonly"), "recvonly");
  EXPECT_EQ(answer_direction("recvonly"), "sendonly");
}

TEST(SdpAnswer, NoBundleInOfferMeansNoGroupInAnswer) {
  auto lines = split_lines(build_answer(parse_ok(without_line(5)), test_params()));
  EXPECT_TRUE(lines_starting(lines, "a=group:").empty());
  EXPECT_TRUE(has_line(lines, "a=mid:0"));
}

TEST(SdpAnswer, FecAndAudioLevelOptions) {
  auto lines_base = base_lines();
  lines_base.push_back("a=extmap:5 urn:ietf:params:rtp-hdrext:ssrc-audio-level");
  ParsedOffer offer = parse_ok(join(lines_base));
  AnswerParams params = test_params();
  auto plain = split_lines(build_answer(offer, params));
  EXPECT_TRUE(lines_starting(plain, "a=extmap:").empty());
  params.opus_inband_fec = false;
  params.accept_audio_level_ext = true;
  auto lines = split_lines(build_answer(offer, params));
  EXPECT_TRUE(has_line(lines, "a=fmtp:111 minptime=10;useinbandfec=0;stereo=0;sprop-stereo=0"));
  EXPECT_TRUE(has_line(lines, "a=extmap:5 urn:ietf:params:rtp-hdrext:ssrc-audio-level"));
}

TEST(SdpAnswer, RejectedFirstAudioKeepsItsPlace) {
  auto lines = base_lines();
  lines.insert(lines.begin() + 6,
               {"m=audio 9 UDP/TLS/RTP/SAVPF 0", "a=mid:pcmu", "a=rtcp-mux", "a=rtpmap:0 PCMU/8000"});
  auto answer = split_lines(build_answer(parse_ok(join(lines)), test_params()));
  auto m_lines = lines_starting(answer, "m=");
  EXPECT_EQ(m_lines,
            (std::vector<std::string>{"m=audio 0 UDP/TLS/RTP/SAVPF 0", "m=audio 9 UDP/TLS/RTP/SAVPF 111"}));
  EXPECT_EQ(lines_starting(answer, "a=mid:"), (std::vector<std::string>{"a=mid:pcmu", "a=mid:0"}));
}

TEST(SdpAnswer, EveryAnswerParsesBackAndAgreesWithItsOffer) {
  for (const char* name : {"chrome_audio_offer.sdp", "chrome_audio_video_data_offer.sdp",
                           "firefox128_audio_offer.sdp", "aiortc_audio_offer.sdp"}) {
    SCOPED_TRACE(name);
    ParsedOffer offer = parse_ok(read_fixture(name));
    AnswerParams params = test_params();
    params.setup = Setup::passive;
    std::string answer = build_answer(offer, params);
    EXPECT_EQ(answer.find('\n'), answer.find("\r\n") + 1) << "bare LF in answer";
    ParsedOffer back = parse_ok(answer);
    ASSERT_EQ(back.sections.size(), offer.sections.size());
    for (size_t i = 0; i < offer.sections.size(); ++i) {
      EXPECT_EQ(back.sections[i].kind, offer.sections[i].kind);
      EXPECT_EQ(back.sections[i].mid, offer.sections[i].mid);
      EXPECT_EQ(back.sections[i].protocol, offer.sections[i].protocol);
      EXPECT_EQ(back.sections[i].port, offer.sections[i].accepted ? 9 : 0);
      if (!offer.sections[i].accepted) EXPECT_EQ(back.sections[i].formats, offer.sections[i].formats);
    }
    EXPECT_EQ(back.audio->section_index, offer.audio->section_index);
    EXPECT_EQ(back.audio->opus_payload_type, offer.audio->opus_payload_type);
    EXPECT_EQ(back.transport.ice_ufrag, params.ice_ufrag);
    EXPECT_EQ(back.transport.ice_pwd, params.ice_pwd);
    EXPECT_EQ(back.transport.fingerprint.front(), 0x4A);
    EXPECT_EQ(back.transport.setup, Setup::passive);
    EXPECT_EQ(back.audio->direction, "sendrecv");
    EXPECT_EQ(back.audio->ssrcs, std::vector<uint32_t>{params.ssrc});
    EXPECT_EQ(back.bundle_offered, offer.bundle_offered);
    EXPECT_EQ(back.bundle_mids, offer.bundle_mids);
    EXPECT_EQ(back.application.has_value(), offer.application.has_value());
    EXPECT_EQ(back.session_id, "42");
  }
}

// ------------------------------------------------------------------ data channels

// What @openai/agents-realtime offers: audio and the oai-events channel, BUNDLE-d, no candidates.
std::vector<std::string> audio_data_lines() {
  auto lines = base_lines();
  lines[4] = "a=group:BUNDLE 0 1";
  for (const char* line : {"m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "c=IN IP4 0.0.0.0", "a=mid:1",
                           "a=ice-ufrag:abcd", "a=ice-pwd:abcdefghijklmnopqrstuv", "a=setup:actpass",
                           "a=sctp-port:5000", "a=max-message-size:262144"})
    lines.emplace_back(line);  // lines 18..25
  return lines;
}

// The same with no audio section: a text-only session.
std::vector<std::string> data_only_lines() {
  auto lines = audio_data_lines();
  lines.erase(lines.begin() + 6, lines.begin() + 17);
  lines[4] = "a=group:BUNDLE 1";
  return lines;
}

OfferPolicy text_only_allowed() {
  OfferPolicy policy;
  policy.allow_text_only = true;
  return policy;
}

TEST(SdpDataChannel, AudioAndDataChannelAreBothAccepted) {
  ParsedOffer offer = parse_ok(join(audio_data_lines()));
  ASSERT_TRUE(offer.audio);
  ASSERT_TRUE(offer.application);
  EXPECT_EQ(offer.application->section_index, 1u);
  EXPECT_EQ(offer.application->mid, "1");
  EXPECT_EQ(offer.application->sctp_port, 5000);
  EXPECT_EQ(offer.application->max_message_size, 262144u);
  EXPECT_TRUE(offer.sections[0].accepted);
  EXPECT_TRUE(offer.sections[1].accepted);
  EXPECT_EQ(offer.bundle_mids, (std::vector<std::string>{"0", "1"}));
  auto lines = split_lines(build_answer(offer, test_params()));
  EXPECT_EQ(lines_starting(lines, "a=group:"), std::vector<std::string>{"a=group:BUNDLE 0 1"});
  auto sections = sections_of(lines);
  ASSERT_EQ(sections.size(), 3u);
  EXPECT_EQ(sections[2].front(), "m=application 9 UDP/DTLS/SCTP webrtc-datachannel");
  EXPECT_TRUE(has_line(sections[2], "a=sctp-port:5000"));
  EXPECT_TRUE(has_line(sections[2], "a=max-message-size:262144"));
  EXPECT_FALSE(has_line(sections[2], "a=rtcp-mux"));
}

TEST(SdpDataChannel, BundleOrderFollowsTheOffer) {
  // The data channel first, as a client that created it before adding the track offers.
  auto lines = audio_data_lines();
  std::vector<std::string> reordered(lines.begin(), lines.begin() + 6);
  reordered[4] = "a=group:BUNDLE 1 0";
  reordered.insert(reordered.end(), lines.begin() + 17, lines.end());
  reordered.insert(reordered.end(), lines.begin() + 6, lines.begin() + 17);
  ParsedOffer offer = parse_ok(join(reordered));
  ASSERT_TRUE(offer.application);
  EXPECT_EQ(offer.application->section_index, 0u);
  EXPECT_EQ(offer.audio->section_index, 1u);
  auto answer = split_lines(build_answer(offer, test_params()));
  EXPECT_TRUE(has_line(answer, "a=group:BUNDLE 1 0"));
  auto m_lines = lines_starting(answer, "m=");
  EXPECT_EQ(m_lines, (std::vector<std::string>{"m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
                                               "m=audio 9 UDP/TLS/RTP/SAVPF 111"}));
}

TEST(SdpDataChannel, SctpPortAndMaxMessageSizeDefaults) {
  auto lines = audio_data_lines();
  lines.erase(lines.begin() + 23, lines.end());  // no a=sctp-port, no a=max-message-size
  ParsedOffer offer = parse_ok(join(lines));
  ASSERT_TRUE(offer.application);
  EXPECT_EQ(offer.application->sctp_port, kDefaultSctpPort);
  EXPECT_EQ(offer.application->max_message_size, kDefaultMaxMessageSize);  // RFC 8841 §6: 64 KiB
  lines.push_back("a=sctp-port:5001");
  lines.push_back("a=max-message-size:0");
  offer = parse_ok(join(lines));
  EXPECT_EQ(offer.application->sctp_port, 5001);
  EXPECT_EQ(offer.application->max_message_size, 0u);  // unlimited: the caller applies its own
  // Our answer always names our own port and limit.
  AnswerParams params = test_params();
  params.sctp_max_message_size = 1234;
  auto answer = split_lines(build_answer(offer, params));
  EXPECT_TRUE(has_line(answer, "a=sctp-port:5000"));
  EXPECT_TRUE(has_line(answer, "a=max-message-size:1234"));
}

TEST(SdpDataChannel, LegacySctpmapFormIsAcceptedAndEchoed) {
  auto lines = audio_data_lines();
  lines[17] = "m=application 9 DTLS/SCTP 5000";
  lines[23] = "a=sctpmap:5000 webrtc-datachannel 1024";
  lines.pop_back();  // no a=max-message-size
  ParsedOffer offer = parse_ok(join(lines));
  ASSERT_TRUE(offer.application);
  EXPECT_TRUE(offer.application->legacy_sctpmap);
  EXPECT_EQ(offer.application->sctp_port, 5000);
  auto answer = split_lines(build_answer(offer, test_params()));
  EXPECT_TRUE(has_line(answer, "m=application 9 DTLS/SCTP 5000"));
  EXPECT_TRUE(has_line(answer, "a=sctpmap:5000 webrtc-datachannel 1024"));
  EXPECT_FALSE(has_line(answer, "a=sctp-port:5000"));
}

TEST(SdpDataChannel, TextOnlyOfferNeedsThePolicy) {
  const std::string sdp = join(data_only_lines());
  OfferError refused = parse_error(sdp);
  EXPECT_EQ(refused.line, 0);
  EXPECT_NE(refused.reason.find("text-only sessions are not allowed"), std::string::npos) << refused.reason;

  ParsedOffer offer = parse_ok(sdp, text_only_allowed());
  EXPECT_FALSE(offer.audio);
  ASSERT_TRUE(offer.application);
  EXPECT_EQ(offer.application->section_index, 0u);
  EXPECT_EQ(offer.transport.ice_ufrag, "abcd");
  EXPECT_EQ(offer.transport.fingerprint.size(), 32u);  // session level
  auto answer = split_lines(build_answer(offer, test_params()));
  EXPECT_TRUE(has_line(answer, "a=group:BUNDLE 1"));
  EXPECT_EQ(lines_starting(answer, "m="),
            std::vector<std::string>{"m=application 9 UDP/DTLS/SCTP webrtc-datachannel"});
  EXPECT_EQ(lines_starting(answer, "a=candidate:").size(), 2u);
  ParsedOffer back = parse_ok(join(answer), text_only_allowed());
  EXPECT_EQ(back.transport.ice_ufrag, "Srv1");
}

TEST(SdpDataChannel, TextOnlyPolicyDoesNotHideUnusableAudio) {
  auto lines = audio_data_lines();
  lines[6] = "m=audio 9 UDP/TLS/RTP/SAVPF 0";  // PCMU only
  OfferError error = parse_error(join(lines), {}, text_only_allowed());
  EXPECT_EQ(error.line, 7);
  EXPECT_NE(error.reason.find("no Opus codec"), std::string::npos) << error.reason;
  // Audio the client rejected itself (port 0) leaves a text-only session.
  lines[6] = "m=audio 0 UDP/TLS/RTP/SAVPF 111";
  ParsedOffer offer = parse_ok(join(lines), text_only_allowed());
  EXPECT_FALSE(offer.audio);
  ASSERT_TRUE(offer.application);
  EXPECT_EQ(offer.bundle_mids, std::vector<std::string>{"1"});
  // ... and without the policy names it.
  EXPECT_NE(parse_error(join(lines)).reason.find("text-only sessions are not allowed"), std::string::npos);
}

TEST(SdpDataChannel, TextOnlyPolicyDoesNotAcceptAnOfferWithNothingUsable) {
  auto lines = data_only_lines();
  lines[6] = "m=video 9 UDP/TLS/RTP/SAVPF 96";
  EXPECT_NE(parse_error(join(lines), {}, text_only_allowed()).reason.find("no audio m-line"),
            std::string::npos);
}

TEST(SdpDataChannel, SecondApplicationSectionIsRejected) {
  auto lines = audio_data_lines();
  lines[4] = "a=group:BUNDLE 0 1 2";
  for (const char* line : {"m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "a=mid:2", "a=sctp-port:6000"})
    lines.emplace_back(line);
  ParsedOffer offer = parse_ok(join(lines));
  EXPECT_EQ(offer.application->section_index, 1u);
  EXPECT_FALSE(offer.sections[2].accepted);
  EXPECT_EQ(offer.bundle_mids, (std::vector<std::string>{"0", "1"}));
  auto answer = split_lines(build_answer(offer, test_params()));
  EXPECT_TRUE(has_line(answer, "m=application 0 UDP/DTLS/SCTP webrtc-datachannel"));
  EXPECT_TRUE(has_line(answer, "a=group:BUNDLE 0 1"));
}

TEST(SdpDataChannel, ApplicationRejectedByTheOffererLeavesAudioAlone) {
  auto lines = audio_data_lines();
  lines[17] = "m=application 0 UDP/DTLS/SCTP webrtc-datachannel";
  ParsedOffer offer = parse_ok(join(lines));
  EXPECT_FALSE(offer.application);
  EXPECT_EQ(offer.bundle_mids, std::vector<std::string>{"0"});
}

TEST(SdpDataChannel, HostileApplicationSections) {
  auto with = [](int number, const std::string& replacement) {
    auto lines = audio_data_lines();
    lines.at(number - 1) = replacement;
    return join(lines);
  };
  EXPECT_OFFER_ERROR(with(24, "a=sctp-port:0"), 24, "a=sctp-port must be 1..65535");
  EXPECT_OFFER_ERROR(with(24, "a=sctp-port:65536"), 24, "a=sctp-port must be 1..65535");
  EXPECT_OFFER_ERROR(with(24, "a=sctp-port:50x0"), 24, "a=sctp-port must be 1..65535");
  EXPECT_OFFER_ERROR(with(24, "a=sctp-port:"), 24, "a=sctp-port must be 1..65535");
  EXPECT_OFFER_ERROR(with(25, "a=max-message-size:-1"), 25, "a=max-message-size must be");
  EXPECT_OFFER_ERROR(with(25, "a=max-message-size:99999999999999999999999"), 25,
                     "a=max-message-size must be");
  EXPECT_OFFER_ERROR(with(25, "a=max-message-size:1099511627777"), 25, "a=max-message-size must be");
  EXPECT_OFFER_ERROR(with(25, "a=sctp-port:5000"), 25, "duplicate a=sctp-port");
  EXPECT_OFFER_ERROR(with(18, "m=application 9 UDP/DTLS/SCTP webrtc-datachannel extra"), 18,
                     "must have the one format webrtc-datachannel");
  EXPECT_OFFER_ERROR(with(18, "m=application 9 TCP/DTLS/SCTP webrtc-datachannel"), 18,
                     "application protocol TCP/DTLS/SCTP not supported");
  EXPECT_OFFER_ERROR(with(18, "m=application 9 DTLS/SCTP 5000"), 18, "without an a=sctpmap");
  EXPECT_OFFER_ERROR(with(18, "m=application 9 DTLS/SCTP 0"), 18, "one SCTP port 1..65535");
  {
    auto lines = audio_data_lines();
    lines[17] = "m=application 9 DTLS/SCTP 5000";
    lines[23] = "a=sctpmap:5000 bfcp 1024";
    EXPECT_OFFER_ERROR(join(lines), 24, "another protocol than webrtc-datachannel");
  }
  // Not BUNDLE-d with the audio: it would need a second transport.
  EXPECT_OFFER_ERROR(with(5, "a=group:BUNDLE 0"), 18, "not in the audio section's a=group:BUNDLE");
  {
    auto lines = audio_data_lines();
    lines.erase(lines.begin() + 19);  // the application's a=mid
    lines[4] = "a=group:BUNDLE 0";
    EXPECT_OFFER_ERROR(join(lines), 18, "not in the audio section's a=group:BUNDLE");
  }
  // Text-only with a broken transport names the transport problem.
  {
    auto lines = data_only_lines();
    lines.erase(lines.begin() + 5);  // the session-level fingerprint
    EXPECT_NE(parse_error(join(lines), {}, text_only_allowed()).reason.find("no a=fingerprint"),
              std::string::npos);
  }
  // A session-level a=sctp-port means nothing and cannot override the section's.
  {
    auto lines = audio_data_lines();
    lines.insert(lines.begin() + 4, "a=sctp-port:1");
    EXPECT_EQ(parse_ok(join(lines)).application->sctp_port, 5000);
  }
}

}  // namespace
}  // namespace rtce::sdp
