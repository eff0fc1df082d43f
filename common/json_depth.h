// json_depth.h — a byte scan that bounds how deep JSON text nests, run before parsing, so
// that hostile text never builds (or makes a recursive serializer walk) a deep tree.
#pragma once

#include <cstddef>
#include <string_view>

namespace rtce {

// True when arrays/objects in `text` nest deeper than `limit`. Strings are skipped, escapes
// included; the text need not be valid JSON (the parser judges that afterwards).
inline bool json_nests_deeper_than(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limit) return true;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace rtce
