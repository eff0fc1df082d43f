// fuzz_sdp.cc — libFuzzer target for the SDP offer parser and answer builder. Beyond "no crash,
// no sanitizer report", it checks the answer of every accepted offer parses back and agrees
// with the offer on section count, accepted sections, Opus payload type and SCTP port.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "session_description.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // The input's length picks the policy, so text-only offers are explored as well as refused.
  rtce::sdp::OfferPolicy policy;
  policy.allow_text_only = (size & 1) != 0;
  auto parsed = rtce::sdp::parse_offer(text, {}, policy);
  auto* offer = std::get_if<rtce::sdp::ParsedOffer>(&parsed);
  if (offer == nullptr) {
    if (std::get<rtce::sdp::OfferError>(parsed).reason.empty()) std::abort();
    return 0;
  }
  rtce::sdp::AnswerParams params;
  params.ice_ufrag = "Fuzz";
  params.ice_pwd = "fuzzfuzzfuzzfuzzfuzzfuzz";
  params.fingerprint_sha256 =
      "00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF";
  params.candidates.push_back({"127.0.0.1", 3478, 2130706431, "1"});
  params.session_id = 1;
  params.ssrc = 1;
  params.cname = "fuzz";
  params.accept_audio_level_ext = true;
  std::string answer = rtce::sdp::build_answer(*offer, params);

  // The answer adds a c= line per section, so give it room beyond the offer's own limits.
  rtce::sdp::ParseLimits roomy;
  roomy.max_bytes = 2 * roomy.max_bytes;
  auto reparsed = rtce::sdp::parse_offer(answer, roomy, policy);
  auto* back = std::get_if<rtce::sdp::ParsedOffer>(&reparsed);
  if (back == nullptr || back->sections.size() != offer->sections.size() ||
      back->audio.has_value() != offer->audio.has_value() ||
      back->application.has_value() != offer->application.has_value() ||
      back->bundle_mids != offer->bundle_mids) {
    std::abort();
  }
  if (offer->audio && (back->audio->section_index != offer->audio->section_index ||
                       back->audio->opus_payload_type != offer->audio->opus_payload_type ||
                       back->audio->mid != offer->audio->mid)) {
    std::abort();
  }
  if (offer->application && (back->application->section_index != offer->application->section_index ||
                             back->application->mid != offer->application->mid ||
                             back->application->sctp_port != rtce::sdp::kDefaultSctpPort ||
                             back->application->max_message_size != params.sctp_max_message_size)) {
    std::abort();
  }
  return 0;
}
