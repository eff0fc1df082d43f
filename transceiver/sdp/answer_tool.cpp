// answer_tool.cpp — rtce_sdp_answer_tool: reads an SDP offer on stdin and prints the answer that
// build_answer() makes for it, so a real browser can judge the answer (see
// tests/transceiver/sdp/tools/browser_accepts_answer.mjs). Exit 1 with the OfferError on stderr
// when the offer is refused, 2 on bad usage.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "session_description.h"

namespace {

int usage(const char* message) {
  std::cerr
      << "error: " << message << "\n"
      << "usage: rtce_sdp_answer_tool [--setup active|passive] [--ufrag U] [--pwd P]\n"
         "                            [--candidate IP:PORT] [--audio-level] [--text-only] < offer.sdp\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  rtce::sdp::AnswerParams params;
  params.ice_ufrag = "rtce";
  params.ice_pwd = "rtcedgeanswertoolpassword";
  // Any well-formed digest: a browser only compares it with the DTLS certificate later.
  params.fingerprint_sha256 =
      "4A:AD:B9:B1:3F:82:18:3B:54:02:12:DF:3E:5D:49:6B:19:E5:7C:AB:3E:B5:24:8C:5F:4D:DC:1B:04:C5:02:A4";
  params.session_id = 4611686018427387904ULL;
  params.ssrc = 0x5EED0001;
  params.cname = "rtcedge-answer-tool";
  params.candidates.push_back({"127.0.0.1", 3478, 2130706431, "1"});
  rtce::sdp::OfferPolicy policy;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--audio-level") {
      params.accept_audio_level_ext = true;
      continue;
    }
    if (arg == "--text-only") {  // accept a data channel without audio
      policy.allow_text_only = true;
      continue;
    }
    const char* v = value();
    if (v == nullptr) return usage("option needs a value");
    std::string_view text = v;
    if (arg == "--setup") {
      if (text == "active")
        params.setup = rtce::sdp::Setup::active;
      else if (text == "passive")
        params.setup = rtce::sdp::Setup::passive;
      else
        return usage("--setup must be active or passive");
    } else if (arg == "--ufrag") {
      params.ice_ufrag = text;
    } else if (arg == "--pwd") {
      params.ice_pwd = text;
    } else if (arg == "--candidate") {
      size_t colon = text.rfind(':');
      if (colon == std::string_view::npos) return usage("--candidate must be IP:PORT");
      int port = std::atoi(std::string(text.substr(colon + 1)).c_str());
      if (port <= 0 || port > 65535) return usage("--candidate port must be 1..65535");
      params.candidates = {
          {std::string(text.substr(0, colon)), static_cast<uint16_t>(port), 2130706431, "1"}};
    } else {
      return usage("unknown option");
    }
  }

  rtce::sdp::ParseLimits limits;
  std::string offer;
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, stdin)) > 0 && offer.size() <= limits.max_bytes) {
    offer.append(buffer, got);
  }
  auto parsed = rtce::sdp::parse_offer(offer, limits, policy);
  if (auto* error = std::get_if<rtce::sdp::OfferError>(&parsed)) {
    std::cerr << "offer refused: " << error->to_string() << "\n";
    return 1;
  }
  std::cout << rtce::sdp::build_answer(std::get<rtce::sdp::ParsedOffer>(parsed), params);
  return 0;
}
