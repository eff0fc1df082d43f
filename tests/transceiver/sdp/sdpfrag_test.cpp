// sdpfrag_test.cpp — trickle-ice-sdpfrag (RFC 8840) parsing and building: the fragments WHIP
// clients send after Chromium's restartIce() (sdpfrag_corpus/), RFC 8840's own example, hostile
// fragments (each refusal names its line), and build -> parse round trips.
#include "sdpfrag.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace rtce::sdp {
namespace {

std::string corpus(const char* name) {
  std::ifstream in(std::string(RTCE_SDPFRAG_CORPUS) + "/" + name, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

IceFragment parse_ok(std::string_view body) {
  auto parsed = parse_ice_fragment(body);
  if (auto* e = std::get_if<OfferError>(&parsed)) {
    ADD_FAILURE() << e->to_string();
    return {};
  }
  return std::get<IceFragment>(parsed);
}

OfferError parse_error(std::string_view body, const ParseLimits& limits = {}) {
  auto parsed = parse_ice_fragment(body, limits);
  if (std::holds_alternative<IceFragment>(parsed)) {
    ADD_FAILURE() << "accepted: " << body;
    return {};
  }
  return std::get<OfferError>(parsed);
}

constexpr std::string_view kCreds = "a=ice-ufrag:Qk3R\r\na=ice-pwd:9vPtUG3xAfPW2rOl7ZuwHQHg\r\n";

TEST(SdpFrag, ChromeRestartAudio) {
  auto f = parse_ok(corpus("chrome_restart_audio.frag"));
  EXPECT_EQ(f.ufrag, "Qk3R");
  EXPECT_EQ(f.pwd, "9vPtUG3xAfPW2rOl7ZuwHQHg");
  EXPECT_EQ(f.mids, std::vector<std::string>{"0"});
  EXPECT_EQ(f.candidates, 2u);
  EXPECT_TRUE(f.end_of_candidates);
  EXPECT_EQ(f.ice_options, (std::vector<std::string>{"trickle", "ice2"}));
}

TEST(SdpFrag, ChromeRestartAudioDataChannelPerSectionCredentials) {
  auto f = parse_ok(corpus("chrome_restart_audio_datachannel.frag"));
  EXPECT_EQ(f.ufrag, "Qk3R");
  EXPECT_EQ(f.mids, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(f.candidates, 1u);  // an mDNS host candidate
  EXPECT_FALSE(f.end_of_candidates);
}

// whip-js (medooze) restart(): its new offer's ufrag/pwd at session level, and m= sections only
// for the mids of candidates it has gathered so far, so often none at all.
TEST(SdpFrag, WhipJsRestartWithoutCandidates) {
  auto f = parse_ok(corpus("whipjs_restart_no_candidates.frag"));
  EXPECT_EQ(f.ufrag, "Qk3R");
  EXPECT_EQ(f.pwd, "9vPtUG3xAfPW2rOl7ZuwHQHg");
  EXPECT_TRUE(f.mids.empty());
  EXPECT_EQ(f.candidates, 0u);
  // Our answer then carries the credentials at session level, which is where whip-js's
  // /a=ice-ufrag:(.*)\r\n/ finds them.
  auto back = parse_ok(build_ice_fragment({"srvR", "serverpassword0123456789", f.mids, {}}));
  EXPECT_EQ(back.ufrag, "srvR");
}

TEST(SdpFrag, Rfc8840Example) {
  auto f = parse_ok(corpus("rfc8840_example.frag"));
  EXPECT_EQ(f.ufrag, "8hhY");
  EXPECT_EQ(f.pwd, "asd88fgpdd777uzjYhagZg");
  EXPECT_EQ(f.mids, std::vector<std::string>{"1"});
  EXPECT_EQ(f.candidates, 2u);
  EXPECT_TRUE(f.end_of_candidates);
}

TEST(SdpFrag, WholeRestartedOfferIsTolerated) {
  auto f = parse_ok(corpus("chrome_restart_full_offer.sdp"));
  EXPECT_EQ(f.ufrag, "Qk3R");
  EXPECT_EQ(f.pwd, "9vPtUG3xAfPW2rOl7ZuwHQHg");
  EXPECT_EQ(f.mids, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(f.candidates, 0u);
}

TEST(SdpFrag, TrickleOnlyHasNoCredentials) {
  auto f = parse_ok("m=audio 9 UDP/TLS/RTP/SAVPF 0\na=mid:0\na=end-of-candidates\n");
  EXPECT_FALSE(f.ufrag);
  EXPECT_FALSE(f.pwd);
  EXPECT_TRUE(f.end_of_candidates);
  // Session-level credentials only, no sections: a restart without mids.
  f = parse_ok(kCreds);
  EXPECT_EQ(f.ufrag, "Qk3R");
  EXPECT_TRUE(f.mids.empty());
}

struct Hostile {
  const char* name;
  std::string body;
  int line;
  const char* reason_contains;
};

TEST(SdpFrag, HostileFragmentsAreRefusedNamingTheLine) {
  const std::string m0 = "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\n";
  const std::string c = "a=candidate:1 1 udp 2122260223 192.0.2.1 5000 typ host";
  const Hostile cases[] = {
      {"empty", "", 0, "empty"},
      {"ufrag without pwd", "a=ice-ufrag:Qk3R\r\n" + m0, 1, "without a=ice-pwd"},
      {"pwd without ufrag", m0 + "a=ice-pwd:9vPtUG3xAfPW2rOl7ZuwHQHg\r\n", 3, "without a=ice-ufrag"},
      {"short ufrag", "a=ice-ufrag:abc\r\na=ice-pwd:9vPtUG3xAfPW2rOl7ZuwHQHg\r\n", 1, "4..256"},
      {"long ufrag", "a=ice-ufrag:" + std::string(257, 'a') + "\r\na=ice-pwd:9vPtUG3xAfPW2rOl7ZuwHQHg\r\n", 1,
       "4..256"},
      {"short pwd", "a=ice-ufrag:Qk3R\r\na=ice-pwd:short\r\n", 2, "22..256"},
      {"ufrag not ice-chars", "a=ice-ufrag:Qk3R!\r\na=ice-pwd:9vPtUG3xAfPW2rOl7ZuwHQHg\r\n", 1, "ice-chars"},
      {"two ufrags", std::string(kCreds) + "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\na=ice-ufrag:Zz9z\r\n",
       5, "different a=ice-ufrag"},
      {"two pwds", std::string(kCreds) + "a=ice-pwd:AAAAAAAAAAAAAAAAAAAAAAAA\r\n", 3, "different a=ice-pwd"},
      {"bandwidth line", std::string(kCreds) + "b=AS:30\r\n", 3, "'b='"},
      {"not an SDP line", std::string(kCreds) + "hello\r\n", 3, "not an SDP line"},
      {"NUL", std::string(kCreds) + std::string("a=mid\0x\r\n", 9), 3, "NUL"},
      {"control character", std::string(kCreds) + "a=x\x01y\r\n", 3, "control character"},
      {"blank line inside", std::string(kCreds) + "\r\n" + m0, 3, "empty line"},
      {"section without mid", "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\n" + m0, 1, "without a=mid"},
      {"last section without mid", m0 + "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\n", 3, "without a=mid"},
      {"two mids in a section", m0 + "a=mid:1\r\n", 3, "second a=mid"},
      {"mid twice", m0 + m0, 4, "names two"},
      {"mid at session level", "a=mid:0\r\n", 1, "outside an m= section"},
      {"bad m= line", "m=audio\r\na=mid:0\r\n", 1, "m= line"},
      {"candidate at session level", c + "\r\n", 1, "outside an m= section"},
      {"candidate short", m0 + "a=candidate:1 1 udp 2122260223 192.0.2.1\r\n", 3, "port"},
      {"candidate no typ", m0 + "a=candidate:1 1 udp 2122260223 192.0.2.1 5000 host\r\n", 3, "'typ'"},
      {"candidate bad port", m0 + "a=candidate:1 1 udp 1 192.0.2.1 70000 typ host\r\n", 3, "port"},
      {"candidate bad priority", m0 + "a=candidate:1 1 udp 99999999999 192.0.2.1 5 typ host\r\n", 3,
       "priority"},
      {"candidate component 0", m0 + "a=candidate:1 0 udp 1 192.0.2.1 5 typ host\r\n", 3, "component"},
      {"candidate bad address", m0 + "a=candidate:1 1 udp 1 192.0.2.1/24 5 typ host\r\n", 3, "address"},
      {"candidate bad foundation", m0 + "a=candidate:f@o 1 udp 1 192.0.2.1 5 typ host\r\n", 3, "foundation"},
      {"candidate dangling extension", m0 + c + " generation\r\n", 3, "pairs"},
      {"ice-options not a token", "a=ice-options:trickle \"x\"\r\n", 1, "ice-options"},
  };
  for (const Hostile& h : cases) {
    SCOPED_TRACE(h.name);
    OfferError e = parse_error(h.body);
    EXPECT_EQ(e.line, h.line) << e.to_string();
    EXPECT_NE(e.reason.find(h.reason_contains), std::string::npos) << e.to_string();
  }
}

TEST(SdpFrag, BoundsHold) {
  ParseLimits limits;
  limits.max_bytes = 100;
  EXPECT_NE(parse_error(std::string(101, 'a'), limits).reason.find("100-byte limit"), std::string::npos);
  limits = {};
  limits.max_line_length = 50;
  EXPECT_EQ(parse_error("a=" + std::string(60, 'x') + "\r\n", limits).line, 1);
  limits = {};
  limits.max_lines = 10;
  std::string many;
  for (int i = 0; i < 11; ++i) many += "a=x\r\n";
  EXPECT_EQ(parse_error(many, limits).line, 11);
  limits = {};
  limits.max_media_sections = 2;
  std::string sections;
  for (int i = 0; i < 3; ++i) sections += "m=audio 9 X 0\r\na=mid:" + std::to_string(i) + "\r\n";
  EXPECT_EQ(parse_error(sections, limits).line, 5);

  std::string candidates = "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\n";
  for (size_t i = 0; i < kMaxFragmentCandidates; ++i)
    candidates += "a=candidate:" + std::to_string(i) + " 1 udp 1 192.0.2.1 " + std::to_string(1000 + i) +
                  " typ host\r\n";
  EXPECT_EQ(parse_ok(candidates).candidates, kMaxFragmentCandidates);
  candidates += "a=candidate:x 1 udp 1 192.0.2.1 1 typ host\r\n";
  EXPECT_EQ(parse_error(candidates).line, static_cast<int>(3 + kMaxFragmentCandidates));

  std::string options = "a=ice-options:";
  for (size_t i = 0; i <= kMaxIceOptions; ++i) options += " o" + std::to_string(i);
  EXPECT_NE(parse_error(options).reason.find("ice-options"), std::string::npos);
}

TEST(SdpFrag, LfOnlyAndTrailingBlankLinesAreAccepted) {
  auto f = parse_ok("a=ice-ufrag:Qk3R\na=ice-pwd:9vPtUG3xAfPW2rOl7ZuwHQHg\nm=audio 9 X 0\na=mid:a\n\n\n");
  EXPECT_EQ(f.mids, std::vector<std::string>{"a"});
}

TEST(SdpFrag, BuildWritesTheServerFragment) {
  IceFragmentAnswer answer{
      "srvR", "serverpassword0123456789", {"0", "1"}, {{"192.0.2.10", 3478, 2130706431, "1"}}};
  EXPECT_EQ(build_ice_fragment(answer),
            "a=ice-lite\r\n"
            "a=group:BUNDLE 0 1\r\n"
            "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\n"
            "a=mid:0\r\n"
            "a=ice-ufrag:srvR\r\n"
            "a=ice-pwd:serverpassword0123456789\r\n"
            "a=candidate:1 1 udp 2130706431 192.0.2.10 3478 typ host\r\n"
            "a=end-of-candidates\r\n"
            "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\n"
            "a=mid:1\r\n"
            "a=ice-ufrag:srvR\r\n"
            "a=ice-pwd:serverpassword0123456789\r\n");
  answer.mids = {"0"};
  std::string one = build_ice_fragment(answer);
  EXPECT_EQ(one.find("a=group"), std::string::npos);
  answer.mids.clear();
  answer.ice_lite = false;
  EXPECT_EQ(build_ice_fragment(answer), "a=ice-ufrag:srvR\r\na=ice-pwd:serverpassword0123456789\r\n");
}

// An ICE restart keeps ICE-TCP: the fragment names the passive TCP candidates as the answer
// did (a restart that wrote them as UDP left a caller whose network drops UDP with nothing).
TEST(SdpFrag, BuildKeepsTcpPassiveCandidates) {
  IceFragmentAnswer answer{
      "srvR",
      "serverpassword0123456789",
      {"0"},
      {{"192.0.2.10", 3478, 2130706431, "1"}, {"192.0.2.10", 443, 2122318079, "2", true}}};
  const std::string frag = build_ice_fragment(answer);
  EXPECT_NE(frag.find("a=candidate:1 1 udp 2130706431 192.0.2.10 3478 typ host\r\n"), std::string::npos)
      << frag;
  EXPECT_NE(frag.find("a=candidate:2 1 tcp 2122318079 192.0.2.10 443 typ host tcptype passive\r\n"),
            std::string::npos)
      << frag;
}

TEST(SdpFrag, RoundTrip) {
  for (const char* name : {"chrome_restart_audio.frag", "chrome_restart_audio_datachannel.frag",
                           "rfc8840_example.frag", "chrome_restart_full_offer.sdp"}) {
    SCOPED_TRACE(name);
    auto client = parse_ok(corpus(name));
    IceFragmentAnswer answer{
        "srvR+/9",
        "serverpassword0123456789",
        client.mids,
        {{"192.0.2.10", 3478, 2130706431, "1"}, {"2001:db8::10", 3478, 2130706175, "2"}}};
    auto back = parse_ok(build_ice_fragment(answer));
    EXPECT_EQ(back.ufrag, answer.ufrag);
    EXPECT_EQ(back.pwd, answer.pwd);
    EXPECT_EQ(back.mids, client.mids);
    EXPECT_EQ(back.candidates, 2u);
    EXPECT_TRUE(back.end_of_candidates);
  }
}

}  // namespace
}  // namespace rtce::sdp
