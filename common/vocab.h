// vocab.h — the one way this repository names an enum's values.
//
// A vocabulary (drop reasons, session ends, hint results ...) is one X-macro list, in wire/
// when C or the BPF program shares it. The enum, an array of labels indexed by the enum's
// value and, where code loops over it, an array of its values all expand from that list, so
// a value cannot exist without its label. Naming a value is an index into the labels.
#pragma once

#include <cstddef>
#include <string_view>

// For lists of X(name) (or X(name, ...), the rest ignored): the enumerator and its label.
#define RTCE_VOCAB_ENUMERATOR(name, ...) name,
#define RTCE_VOCAB_LABEL(name, ...) #name,

// For C++-only lists of X(name, message) (errors an API reports with a sentence): the
// enumerator, its label and its message.
#define RTCE_VOCAB_MESSAGE_ENUMERATOR(name, message) name,
#define RTCE_VOCAB_MESSAGE_LABEL(name, message) #name,
#define RTCE_VOCAB_MESSAGE_TEXT(name, message) message,
// Declares `enum class Type` from a list of X(name, message), and the lookups of its label
// and its sentence (defined where the list's arrays are).
#define RTCE_DECLARE_MESSAGE_VOCAB(Type, LIST, name_fn, message_fn) \
  enum class Type { LIST(RTCE_VOCAB_MESSAGE_ENUMERATOR) };          \
  std::string_view name_fn(Type value);                             \
  std::string_view message_fn(Type value)
// The same for a list whose second field is not a sentence (a wire spelling, say): one lookup.
#define RTCE_DECLARE_NAMED_VOCAB(Type, LIST, name_fn)      \
  enum class Type { LIST(RTCE_VOCAB_MESSAGE_ENUMERATOR) }; \
  std::string_view name_fn(Type value)

namespace rtce {

// The label of `e` in `names` (indexed by value); "unknown" for a value outside the list
// (a corrupt or future value read from a pinned map, say).
template <typename E, size_t N>
constexpr const char* vocab_name(const char* const (&names)[N], E e) {
  const auto i = static_cast<size_t>(e);
  return i < N ? names[i] : "unknown";
}

}  // namespace rtce
