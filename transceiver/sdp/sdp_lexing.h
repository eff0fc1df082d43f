// sdp_lexing.h — the character classes and the tokenizer SDP's grammar (RFC 4566/8866) and
// ICE's (RFC 8839) share, used by the offer parser and the sdpfrag parser alike, so that both
// accept exactly the same tokens. Internal to transceiver/sdp.
#pragma once

#include <algorithm>
#include <string_view>

namespace rtce::sdp::lexing {

// RFC 4566 token-char: visible ASCII minus the separators SDP reserves.
inline bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c == 0x21 || (c >= 0x23 && c <= 0x27) || c == 0x2A || c == 0x2B || c == 0x2D || c == 0x2E ||
           (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x5E && c <= 0x7E);
  });
}

// RFC 8839 ice-char = ALPHA / DIGIT / "+" / "/".
inline bool is_ice_chars(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
  });
}

// Splits off the first space-separated token; leading spaces are skipped.
inline std::string_view next_token(std::string_view& rest) {
  const size_t start = rest.find_first_not_of(' ');
  if (start == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(start);
  const size_t end = rest.find(' ');
  const std::string_view token = rest.substr(0, end);
  rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
  return token;
}

}  // namespace rtce::sdp::lexing
