// fuzz_multipart.cc — libFuzzer over the multipart/form-data parser. The first input line
// is the Content-Type value (so boundaries are fuzzed too); the rest is the body. Asserts
// that every part is a view inside the body and within the size limit.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "multipart_form.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nl = input.find('\n');
  const std::string_view type = nl == std::string_view::npos ? input : input.substr(0, nl);
  const std::string_view body = nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1);
  constexpr size_t kLimit = 512;
  const auto result = rtce::parse_multipart_form(type, body, kLimit);
  if (result.error && !result.form.parts.empty()) abort();
  if (result.form.parts.size() > rtce::kMaxFormParts) abort();
  for (const auto& part : result.form.parts) {
    if (part.content.size() > kLimit) abort();
    if (!part.content.empty() && (part.content.data() < body.data() ||
                                  part.content.data() + part.content.size() > body.data() + body.size()))
      abort();
    if (part.name.empty()) abort();
  }
  return 0;
}
