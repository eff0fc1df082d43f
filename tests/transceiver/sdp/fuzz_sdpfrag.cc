// fuzz_sdpfrag.cc — libFuzzer target for the trickle-ice-sdpfrag parser and builder. Beyond "no
// crash, no sanitizer report": every refusal has a reason, the bounds hold, and the fragment we
// would answer an accepted one with parses back with the same mids and our credentials.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sdpfrag.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = rtce::sdp::parse_ice_fragment(text);
  auto* fragment = std::get_if<rtce::sdp::IceFragment>(&parsed);
  if (fragment == nullptr) {
    if (std::get<rtce::sdp::OfferError>(parsed).reason.empty()) std::abort();
    return 0;
  }
  if (fragment->ufrag.has_value() != fragment->pwd.has_value() ||
      fragment->candidates > rtce::sdp::kMaxFragmentCandidates ||
      fragment->ice_options.size() > rtce::sdp::kMaxIceOptions)
    std::abort();
  if (fragment->ufrag && (fragment->ufrag->size() < 4 || fragment->pwd->size() < 22)) std::abort();
  rtce::sdp::IceFragmentAnswer answer;
  answer.ufrag = "Fuzz";
  answer.pwd = "fuzzfuzzfuzzfuzzfuzzfuzz";
  answer.mids = fragment->mids;
  answer.candidates.push_back({"127.0.0.1", 3478, 2130706431, "1"});
  auto back = rtce::sdp::parse_ice_fragment(rtce::sdp::build_ice_fragment(answer));
  auto* reparsed = std::get_if<rtce::sdp::IceFragment>(&back);
  if (reparsed == nullptr || reparsed->mids != fragment->mids || reparsed->ufrag != answer.ufrag ||
      reparsed->pwd != answer.pwd || reparsed->candidates != (fragment->mids.empty() ? 0u : 1u))
    std::abort();
  return 0;
}
