// multipart_form.h — multipart/form-data bodies (RFC 7578 over RFC 2046), the second form
// in which Realtime-style clients POST a call: a part `sdp` (application/sdp) and a part
// `session` (application/json), as the `openai` SDKs send it when given a session.
//
// Socket-free and bounded: the parts are views into the caller's body (no copies), at most
// kMaxFormParts of them, each with at most kMaxPartHeaderBytes of headers and at most the
// caller's part size limit of content. Anything else is an error that names what was wrong.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "vocab.h"

namespace rtce {

inline constexpr size_t kMaxFormParts = 8;
inline constexpr size_t kMaxPartHeaderBytes = 1024;
// RFC 2046 §5.1.1: a boundary is 1 to 70 characters.
inline constexpr size_t kMaxBoundaryChars = 70;

// What a form can be wrong with: the enum, and the message an HTTP 400 carries.
#define RTCE_MULTIPART_ERRORS(X)                                                                  \
  X(no_boundary, "the Content-Type has no boundary parameter")                                    \
  X(bad_boundary,                                                                                 \
    "the boundary is empty, longer than 70 characters or has a character RFC 2046 "               \
    "does not allow")                                                                             \
  X(no_opening_delimiter, "the body does not contain the boundary's opening delimiter")           \
  X(no_closing_delimiter, "a part is not followed by a delimiter (the body is cut short)")        \
  X(bad_delimiter_line, "a delimiter is followed by something other than a line break or \"--\"") \
  X(bad_part_headers, "a part's headers are not \"Name: value\" lines ended by an empty line")    \
  X(part_headers_too_large, "a part's headers are longer than 1024 bytes")                        \
  X(no_part_name, "a part has no Content-Disposition: form-data header with a name")              \
  X(duplicate_part, "two parts have the same name")                                               \
  X(too_many_parts, "the form has more than 8 parts")                                             \
  X(part_too_large, "a part is larger than the limit")

RTCE_DECLARE_MESSAGE_VOCAB(MultipartError, RTCE_MULTIPART_ERRORS, multipart_error_name,
                           multipart_error_message);

struct FormPart {
  std::string_view name;
  std::string_view filename;      // empty when the part has none
  std::string_view content_type;  // empty when the part has none (text/plain by RFC 7578)
  std::string_view content;
};

struct MultipartForm {
  std::vector<FormPart> parts;
  // The part named `name`, or nullptr.
  const FormPart* find(std::string_view name) const;
};

struct MultipartResult {
  MultipartForm form;
  std::optional<MultipartError> error;
};

// The boundary parameter of a multipart Content-Type value (token or quoted string,
// parameter name case-insensitive), or nullopt. Does not check the media type itself.
std::optional<std::string_view> multipart_boundary(std::string_view content_type);

// Splits `body` by the boundary of `content_type`. A preamble before the first delimiter
// and an epilogue after the closing one are ignored, as RFC 2046 says. Line breaks are
// CRLF; a bare LF is accepted as well, since some hand-written clients send it.
MultipartResult parse_multipart_form(std::string_view content_type, std::string_view body,
                                     size_t max_part_bytes);

}  // namespace rtce
