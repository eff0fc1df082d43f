// sdpfrag.cpp — parse_ice_fragment and build_ice_fragment. One bounded pass over the lines; every
// value is checked before it is stored, so a hostile fragment costs O(limits) and one error
// names its line.
#include "sdpfrag.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "sdp_lexing.h"

namespace rtce::sdp {
namespace {

using namespace lexing;  // the tokens, lines and errors both SDP parsers share

constexpr size_t kMaxMidLength = 64;  // as parse_offer
constexpr size_t kMaxAddressLength = 255;

bool is_digits(std::string_view s, size_t max_len) {
  return !s.empty() && s.size() <= max_len &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<uint64_t> number(std::string_view s, size_t max_len, uint64_t max) {
  if (!is_digits(s, max_len)) return std::nullopt;
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  if (v > max) return std::nullopt;
  return v;
}

// An IPv4/IPv6 literal or a host name (mDNS ".local" candidates): what an address can be made of.
bool is_address(std::string_view s) {
  return !s.empty() && s.size() <= kMaxAddressLength && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == ':' || c == '-' || c == '_';
  });
}

// RFC 8839 section 5.1 candidate-attribute, after "candidate:".
std::optional<std::string> candidate_problem(std::string_view value) {
  std::string_view rest = value;
  std::string_view foundation = next_token(rest);
  if (foundation.empty() || foundation.size() > 32 || !is_ice_chars(foundation))
    return "foundation must be 1..32 ice-chars";
  auto component = number(next_token(rest), 3, 256);
  if (!component || *component == 0) return "component-id must be 1..256";
  if (!is_token(next_token(rest))) return "transport must be a token (udp, tcp)";
  if (!number(next_token(rest), 10, UINT32_MAX)) return "priority must be 1..10 digits, at most 2^32-1";
  if (!is_address(next_token(rest))) return "connection-address must be an IP address or host name";
  if (!number(next_token(rest), 5, 65535)) return "port must be 0..65535";
  if (next_token(rest) != "typ") return "'typ' expected after the port";
  if (!is_token(next_token(rest))) return "candidate type must be a token (host, srflx, prflx, relay)";
  // raddr/rport/tcptype and extensions (generation, ufrag, network-id...): name value pairs.
  for (size_t pairs = 0;; ++pairs) {
    std::string_view name = next_token(rest);
    if (name.empty()) break;
    if (pairs == 32) return "more than 32 extension attributes";
    std::string_view val = next_token(rest);
    if (!is_token(name) || val.empty()) return "extension attributes must be 'name value' pairs";
  }
  return std::nullopt;
}

struct Credential {
  int line = 0;
  std::string_view value;
};

// a=ice-ufrag / a=ice-pwd: RFC 8839 lengths, and one value per fragment.
std::optional<OfferError> record_credential(std::optional<Credential>& slot, int line, std::string_view name,
                                            std::string_view value, size_t min_length) {
  if (value.size() < min_length || value.size() > 256 || !is_ice_chars(value)) {
    return error_at(line, "a=" + std::string(name) + " must be " + std::to_string(min_length) +
                              "..256 ice-chars [A-Za-z0-9+/], got " + std::to_string(value.size()) +
                              " characters");
  }
  if (slot && slot->value != value) {
    return error_at(line, "a second, different a=" + std::string(name) + " (first on line " +
                              std::to_string(slot->line) + "): a fragment carries one ICE generation");
  }
  if (!slot) slot = Credential{line, value};
  return std::nullopt;
}

}  // namespace

std::variant<IceFragment, OfferError> parse_ice_fragment(std::string_view body, const ParseLimits& limits) {
  if (auto bad = check_size(body, limits, "fragment")) return *bad;
  IceFragment fragment;
  std::optional<Credential> ufrag, pwd;
  int section_line = 0;  // the current m= line; 0 = session level
  bool section_mid = false;
  int blank_line = 0;
  for (Lines lines(body, limits); !lines.done();) {
    std::string_view line;
    if (auto bad = lines.next(line)) return *bad;
    const int number = lines.number();
    if (line.empty()) {
      if (blank_line == 0) blank_line = number;
      continue;
    }
    if (blank_line != 0) return error_at(blank_line, "empty line inside the fragment");
    if (auto bad = check_characters(number, line)) return *bad;
    if (line.size() < 2 || line[1] != '=')
      return error_at(number, "not an SDP line: expected '<letter>=<value>'");
    const std::string_view value = line.substr(2);
    switch (line[0]) {
      case 'v':
      case 'o':
      case 's':
      case 't':
      case 'c': continue;  // a whole offer sent as the fragment: its session lines say nothing of ICE
      case 'm': {
        if (section_line != 0 && !section_mid) return error_at(section_line, "m= section without a=mid");
        if (fragment.mids.size() >= limits.max_media_sections) {
          return error_at(number,
                          "more than " + std::to_string(limits.max_media_sections) + " media sections");
        }
        std::string_view rest = value;
        std::string_view kind = next_token(rest), port = next_token(rest), proto = next_token(rest);
        std::string_view format = next_token(rest);
        if (!is_token(kind) || !is_digits(port, 5) || proto.empty() || format.empty())
          return error_at(number, "m= line must be '<media> <port> <proto> <fmt>...'");
        section_line = number;
        section_mid = false;
        continue;
      }
      case 'a': break;
      default:
        return error_at(number, std::string("'") + line[0] +
                                    "=' lines do not belong in an ICE fragment (RFC 8840: a= and m= only)");
    }
    const size_t colon = value.find(':');
    const std::string_view name = value.substr(0, colon);
    const std::string_view arg =
        colon == std::string_view::npos ? std::string_view{} : value.substr(colon + 1);
    if (name == "ice-ufrag") {
      if (auto bad = record_credential(ufrag, number, name, arg, 4)) return *bad;
    } else if (name == "ice-pwd") {
      if (auto bad = record_credential(pwd, number, name, arg, 22)) return *bad;
    } else if (name == "mid") {
      if (section_line == 0) return error_at(number, "a=mid outside an m= section");
      if (section_mid)
        return error_at(number, "a second a=mid in the m= section of line " + std::to_string(section_line));
      if (arg.size() > kMaxMidLength || !is_token(arg))
        return error_at(number, "a=mid must be 1.." + std::to_string(kMaxMidLength) + " token characters");
      if (std::find(fragment.mids.begin(), fragment.mids.end(), arg) != fragment.mids.end())
        return error_at(number, "a=mid:" + std::string(arg) + " names two m= sections");
      fragment.mids.emplace_back(arg);
      section_mid = true;
    } else if (name == "candidate") {
      if (section_line == 0) return error_at(number, "a=candidate outside an m= section");
      if (fragment.candidates == kMaxFragmentCandidates)
        return error_at(number, "more than " + std::to_string(kMaxFragmentCandidates) + " candidates");
      if (auto problem = candidate_problem(arg)) return error_at(number, "a=candidate: " + *problem);
      ++fragment.candidates;
    } else if (name == "end-of-candidates") {
      fragment.end_of_candidates = true;
    } else if (name == "ice-options") {
      std::string_view rest = arg;
      for (std::string_view token = next_token(rest); !token.empty(); token = next_token(rest)) {
        if (!is_token(token)) return error_at(number, "a=ice-options tokens must be token characters");
        if (fragment.ice_options.size() == kMaxIceOptions)
          return error_at(number, "more than " + std::to_string(kMaxIceOptions) + " ice-options");
        fragment.ice_options.emplace_back(token);
      }
    }
    // Any other attribute (a=ice-lite, a=group, a whole offer's codecs) is ignored.
  }
  if (section_line != 0 && !section_mid) return error_at(section_line, "m= section without a=mid");
  if (ufrag.has_value() != pwd.has_value()) {
    return ufrag ? error_at(ufrag->line, "a=ice-ufrag without a=ice-pwd")
                 : error_at(pwd->line, "a=ice-pwd without a=ice-ufrag");
  }
  if (ufrag) {
    fragment.ufrag.emplace(ufrag->value);
    fragment.pwd.emplace(pwd->value);
  }
  return fragment;
}

std::string build_ice_fragment(const IceFragmentAnswer& answer) {
  std::string out;
  out.reserve(160 + 96 * answer.mids.size() + 96 * answer.candidates.size());
  auto line = [&out](auto... parts) {
    (out.append(parts), ...);
    out.append("\r\n");
  };
  if (answer.ice_lite) line("a=ice-lite");
  if (answer.mids.size() > 1) {
    std::string mids;
    for (const std::string& mid : answer.mids) mids.append(" ").append(mid);
    line("a=group:BUNDLE", mids);
  }
  if (answer.mids.empty()) {
    line("a=ice-ufrag:", answer.ufrag);
    line("a=ice-pwd:", answer.pwd);
    return out;
  }
  for (size_t i = 0; i < answer.mids.size(); ++i) {
    line("m=audio 9 UDP/TLS/RTP/SAVPF 0");
    line("a=mid:", answer.mids[i]);
    line("a=ice-ufrag:", answer.ufrag);
    line("a=ice-pwd:", answer.pwd);
    if (i != 0) continue;
    for (const AnswerCandidate& candidate : answer.candidates)
      line("a=candidate:", candidate_attribute(candidate));
    line("a=end-of-candidates");
  }
  return out;
}

}  // namespace rtce::sdp
