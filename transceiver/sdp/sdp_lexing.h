// sdp_lexing.h — the character classes and the tokenizer SDP's grammar (RFC 4566/8866) and
// ICE's (RFC 8839) share, and the bounded walk over the lines, used by the offer parser and
// the sdpfrag parser alike, so that both accept exactly the same text. Internal to
// transceiver/sdp.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "session_description.h"

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

inline OfferError error_at(int line, std::string reason) { return OfferError{line, std::move(reason)}; }

// An empty body, or one over limits.max_bytes; `what` names it ("offer", "fragment").
inline std::optional<OfferError> check_size(std::string_view text, const ParseLimits& limits,
                                            std::string_view what) {
  if (text.empty()) return error_at(0, "empty " + std::string(what));
  if (text.size() > limits.max_bytes) {
    return error_at(0, std::string(what) + " is " + std::to_string(text.size()) + " bytes, more than the " +
                           std::to_string(limits.max_bytes) + "-byte limit");
  }
  return std::nullopt;
}

// Rejects bytes that have no business in SDP text: NUL and C0 controls other than tab.
inline std::optional<OfferError> check_characters(int line, std::string_view text) {
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c == 0) return error_at(line, "NUL byte in line");
    if ((c < 0x20 && c != '\t') || c == 0x7F) {
      static constexpr char kHex[] = "0123456789abcdef";
      return error_at(line, std::string("control character 0x") + kHex[c >> 4] + kHex[c & 15] + " in line");
    }
  }
  return std::nullopt;
}

// The lines of an SDP body, LF or CRLF ended, within limits.max_lines and
// limits.max_line_length. `while (!lines.done()) { if (auto bad = lines.next(line)) ... }`.
class Lines {
 public:
  Lines(std::string_view text, const ParseLimits& limits) : text_(text), limits_(limits) {}
  bool done() const { return pos_ >= text_.size(); }
  // The number of the line next() returned last, from 1.
  int number() const { return number_; }
  // The next line without its line end (it may be empty), or an error past the limits.
  std::optional<OfferError> next(std::string_view& line) {
    ++number_;
    const size_t newline = text_.find('\n', pos_);
    const size_t end = newline == std::string_view::npos ? text_.size() : newline;
    line = text_.substr(pos_, end - pos_);
    pos_ = newline == std::string_view::npos ? text_.size() : newline + 1;
    if (static_cast<size_t>(number_) > limits_.max_lines)
      return error_at(number_, "more than " + std::to_string(limits_.max_lines) + " lines");
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > limits_.max_line_length)
      return error_at(number_, "line is longer than " + std::to_string(limits_.max_line_length) + " bytes");
    return std::nullopt;
  }

 private:
  std::string_view text_;
  const ParseLimits& limits_;
  size_t pos_ = 0;
  int number_ = 0;
};

}  // namespace rtce::sdp::lexing
