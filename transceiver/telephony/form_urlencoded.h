// form_urlencoded.h — application/x-www-form-urlencoded bodies (WHATWG URL §5.1), the form
// in which Twilio POSTs its voice webhooks (CallSid, From, To ...). Socket-free and
// bounded: at most `max_fields` fields, else no result.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rtce {

struct FormField {
  std::string name;
  std::string value;
};

// The fields of `body` in order, duplicates kept (the webhook signature covers every one).
// Pairs split on '&' and at their first '='; a pair without '=' is a name with an empty
// value; empty pairs are skipped; '+' is a space and %XX a byte. Unlike WHATWG, which
// passes a malformed '%' escape through, one makes the whole body nullopt: a signed
// webhook has no reason to carry one. Decoded bytes are not checked to be UTF-8.
std::optional<std::vector<FormField>> parse_form_urlencoded(std::string_view body, size_t max_fields = 128);

}  // namespace rtce
