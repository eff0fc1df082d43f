// form_urlencoded.cpp — see form_urlencoded.h.
#include "form_urlencoded.h"

namespace rtce {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends the decoded `text` to `out`; false on a '%' not followed by two hex digits.
bool percent_decode(std::string_view text, std::string& out) {
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+') {
      out.push_back(' ');
    } else if (c != '%') {
      out.push_back(c);
    } else {
      const int high = i + 1 < text.size() ? hex_digit(text[i + 1]) : -1;
      const int low = i + 2 < text.size() ? hex_digit(text[i + 2]) : -1;
      if (high < 0 || low < 0) return false;
      out.push_back(static_cast<char>(high << 4 | low));
      i += 2;
    }
  }
  return true;
}

}  // namespace

std::optional<std::vector<FormField>> parse_form_urlencoded(std::string_view body, size_t max_fields) {
  std::vector<FormField> fields;
  while (!body.empty()) {
    const size_t amp = body.find('&');
    const std::string_view pair = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
    if (pair.empty()) continue;
    // Counted before decoding, so that a body of a million '&x' costs nothing to refuse.
    if (fields.size() == max_fields) return std::nullopt;
    const size_t eq = pair.find('=');
    FormField& field = fields.emplace_back();
    if (!percent_decode(pair.substr(0, eq), field.name)) return std::nullopt;
    if (eq != std::string_view::npos && !percent_decode(pair.substr(eq + 1), field.value))
      return std::nullopt;
  }
  return fields;
}

}  // namespace rtce
