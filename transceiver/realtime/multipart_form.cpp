// multipart_form.cpp — see multipart_form.h.
#include "multipart_form.h"

#include <array>
#include <string>

namespace rtce {
namespace {

constexpr const char* kErrorNames[] = {RTCE_MULTIPART_ERRORS(RTCE_VOCAB_MESSAGE_LABEL)};
constexpr const char* kErrorMessages[] = {RTCE_MULTIPART_ERRORS(RTCE_VOCAB_MESSAGE_TEXT)};

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 2046 §5.1.1 bchars.
bool is_boundary_char(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("'()+_,-./:=? ").find(c) != std::string_view::npos;
}

// Walks `;`-separated `name=value` parameters after the first item of a header value;
// values are tokens or quoted strings (which may hold `;`). Calls on_param(name, value)
// until it returns true. False if the syntax is broken.
template <typename OnParam>
bool for_each_param(std::string_view value, OnParam&& on_param) {
  size_t pos = value.find(';');
  while (pos != std::string_view::npos) {
    pos++;
    while (pos < value.size() && (value[pos] == ' ' || value[pos] == '\t')) pos++;
    if (pos >= value.size()) return true;  // a trailing ';' is harmless
    const size_t eq = value.find('=', pos);
    if (eq == std::string_view::npos) return false;
    const std::string_view name = trim(value.substr(pos, eq - pos));
    size_t vpos = eq + 1;
    while (vpos < value.size() && (value[vpos] == ' ' || value[vpos] == '\t')) vpos++;
    std::string_view param;
    size_t next;
    if (vpos < value.size() && value[vpos] == '"') {
      const size_t close = value.find('"', vpos + 1);
      if (close == std::string_view::npos) return false;
      param = value.substr(vpos + 1, close - vpos - 1);
      next = value.find(';', close + 1);
      if (!trim(value.substr(close + 1,
                             next == std::string_view::npos ? std::string_view::npos : next - close - 1))
               .empty())
        return false;
    } else {
      next = value.find(';', vpos);
      param = trim(value.substr(vpos, next == std::string_view::npos ? std::string_view::npos : next - vpos));
    }
    if (name.empty()) return false;
    if (on_param(name, param)) return true;
    pos = next;
  }
  return true;
}

// One line of `text` from `pos`, without its line break; advances pos past the break.
// nullopt when no line break is left.
std::optional<std::string_view> take_line(std::string_view text, size_t& pos) {
  const size_t lf = text.find('\n', pos);
  if (lf == std::string_view::npos) return std::nullopt;
  std::string_view line = text.substr(pos, lf - pos);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  pos = lf + 1;
  return line;
}

struct PartHeaders {
  std::string_view name, filename, content_type;
  bool has_disposition = false;
};

std::optional<MultipartError> parse_part_headers(std::string_view body, size_t& pos, PartHeaders& out) {
  const size_t start = pos;
  for (;;) {
    auto line = take_line(body, pos);
    if (pos - start > kMaxPartHeaderBytes) return MultipartError::part_headers_too_large;
    if (!line) return MultipartError::bad_part_headers;
    if (line->empty()) return std::nullopt;
    const size_t colon = line->find(':');
    if (colon == std::string_view::npos || colon == 0) return MultipartError::bad_part_headers;
    const std::string_view name = line->substr(0, colon);
    const std::string_view value = trim(line->substr(colon + 1));
    if (iequals(name, "content-disposition")) {
      const std::string_view kind = trim(value.substr(0, value.find(';')));
      if (!iequals(kind, "form-data")) return MultipartError::no_part_name;
      out.has_disposition = true;
      const bool ok = for_each_param(value, [&](std::string_view key, std::string_view v) {
        if (iequals(key, "name")) out.name = v;
        if (iequals(key, "filename")) out.filename = v;
        return false;
      });
      if (!ok) return MultipartError::bad_part_headers;
    } else if (iequals(name, "content-type")) {
      out.content_type = value;
    }
  }
}

}  // namespace

std::string_view multipart_error_name(MultipartError error) { return vocab_name(kErrorNames, error); }
std::string_view multipart_error_message(MultipartError error) { return vocab_name(kErrorMessages, error); }

const FormPart* MultipartForm::find(std::string_view name) const {
  for (const auto& part : parts)
    if (part.name == name) return &part;
  return nullptr;
}

std::optional<std::string_view> multipart_boundary(std::string_view content_type) {
  std::optional<std::string_view> boundary;
  const bool ok = for_each_param(content_type, [&](std::string_view name, std::string_view value) {
    if (!iequals(name, "boundary")) return false;
    boundary = value;
    return true;
  });
  if (!ok) return std::nullopt;
  return boundary;
}

MultipartResult parse_multipart_form(std::string_view content_type, std::string_view body,
                                     size_t max_part_bytes) {
  MultipartResult result;
  auto fail = [&](MultipartError error) {
    result.form.parts.clear();
    result.error = error;
    return result;
  };
  const auto boundary = multipart_boundary(content_type);
  if (!boundary) return fail(MultipartError::no_boundary);
  if (boundary->empty() || boundary->size() > kMaxBoundaryChars || boundary->back() == ' ')
    return fail(MultipartError::bad_boundary);
  for (char c : *boundary)
    if (!is_boundary_char(c)) return fail(MultipartError::bad_boundary);

  const std::string dash_boundary = "--" + std::string(*boundary);
  const std::string delimiter = "\n" + dash_boundary;  // the CR before it, if any, is stripped
  size_t pos;
  if (body.substr(0, dash_boundary.size()) == dash_boundary) {
    pos = dash_boundary.size();
  } else {
    const size_t found = body.find(delimiter);
    if (found == std::string_view::npos) return fail(MultipartError::no_opening_delimiter);
    pos = found + delimiter.size();
  }
  for (;;) {
    // After a delimiter: "--" closes the form; else optional padding and a line break.
    if (body.substr(pos, 2) == "--") return result;
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) pos++;
    if (body.substr(pos, 2) == "\r\n") {
      pos += 2;
    } else if (body.substr(pos, 1) == "\n") {
      pos += 1;
    } else {
      return fail(pos >= body.size() ? MultipartError::no_closing_delimiter
                                     : MultipartError::bad_delimiter_line);
    }
    if (result.form.parts.size() == kMaxFormParts) return fail(MultipartError::too_many_parts);
    PartHeaders headers;
    if (auto error = parse_part_headers(body, pos, headers)) return fail(*error);
    if (!headers.has_disposition || headers.name.empty()) return fail(MultipartError::no_part_name);
    if (result.form.find(headers.name)) return fail(MultipartError::duplicate_part);
    // The delimiter may directly follow the blank line when the content is empty. A
    // boundary string followed by anything but padding, a line break or "--" is content.
    size_t end = body.find(delimiter, pos - 1);
    while (end != std::string_view::npos) {
      const size_t after = end + delimiter.size();
      if (after >= body.size() || std::string_view(" \t\r\n-").find(body[after]) != std::string_view::npos)
        break;
      end = body.find(delimiter, end + 1);
    }
    if (end == std::string_view::npos) return fail(MultipartError::no_closing_delimiter);
    std::string_view content = end + 1 > pos ? body.substr(pos, end + 1 - pos - 1) : std::string_view();
    if (!content.empty() && content.back() == '\r') content.remove_suffix(1);
    if (content.size() > max_part_bytes) return fail(MultipartError::part_too_large);
    result.form.parts.push_back({headers.name, headers.filename, headers.content_type, content});
    pos = end + delimiter.size();
  }
}

}  // namespace rtce
