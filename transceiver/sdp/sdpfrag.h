// sdpfrag.h — the trickle-ice-sdpfrag bodies (RFC 8840) of an ICE restart or trickle PATCH
// (RFC 9725 section 4.4): parse what a client sends into its ICE credentials, mids and candidate
// count, and build the fragment we answer with (our new credentials and host candidates). Pure
// functions: no sockets, no globals, bounded allocation; errors name the line like parse_offer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "session_description.h"

namespace rtce::sdp {

// Bounds beyond ParseLimits: an ICE-lite server ignores the client's candidates, so a fragment
// with more than a browser ever gathers is hostile, not useful.
inline constexpr size_t kMaxFragmentCandidates = 64;
inline constexpr size_t kMaxIceOptions = 16;

struct IceFragment {
  // Session-level or in any m= section, every copy equal (one BUNDLE transport, one ICE
  // generation); both or neither. Present = an ICE restart when they differ from the current
  // ones; absent = a trickle-only fragment.
  std::optional<std::string> ufrag, pwd;
  std::vector<std::string> mids;         // the a=mid of each m= section, in order
  size_t candidates = 0;                 // a=candidate lines: shape-checked, then ignored (ICE-lite)
  bool end_of_candidates = false;        // a=end-of-candidates anywhere
  std::vector<std::string> ice_options;  // a=ice-options tokens, in order
};

// RFC 8840 section 9: lines are a= and m=. v=, o=, s=, t= and c= lines are tolerated and
// ignored, since some clients send their whole new offer; every other line type is refused.
// Attributes other than ice-ufrag, ice-pwd, mid, candidate, end-of-candidates and ice-options
// are ignored (RFC 8866 section 5.13). Refused, naming the line: a ufrag or pwd outside
// RFC 8839's 4..256 / 22..256 ice-chars, one without the other, two different ones, an m=
// section without a=mid or with two, a mid seen twice, a candidate outside an m= section or not
// shaped "foundation component transport priority address port typ type [name value]...", more
// than kMaxFragmentCandidates candidates or kMaxIceOptions options, and the limits' sizes.
std::variant<IceFragment, OfferError> parse_ice_fragment(std::string_view body,
                                                         const ParseLimits& limits = {});

struct IceFragmentAnswer {
  std::string ufrag, pwd;                   // the server's new credentials
  std::vector<std::string> mids;            // the client's m= sections, echoed in order
  std::vector<AnswerCandidate> candidates;  // host candidates, as in the answer
  bool ice_lite = true;
};

// CRLF lines: a=ice-lite, a=group:BUNDLE when more than one mid, then per mid a placeholder
// "m=audio 9 UDP/TLS/RTP/SAVPF 0" (RFC 8840 section 4.4: only the mid identifies the section,
// whatever its media; this is the line WHIP servers and whip-js write) with a=mid and our
// ufrag/pwd; the candidates and a=end-of-candidates go in the first section only, the BUNDLE
// tag's (RFC 8843 section 10). Without mids, ufrag and pwd are session-level and no candidates
// are written (there is no section to carry them; the client has them from the answer).
std::string build_ice_fragment(const IceFragmentAnswer& answer);

}  // namespace rtce::sdp
