// media_stream.cpp — see media_stream.h.
#include "media_stream.h"

namespace rtce {
namespace {
constexpr const char* kRefusalNames[] = {RTCE_MEDIA_STREAM_REFUSALS(RTCE_VOCAB_MESSAGE_LABEL)};
constexpr const char* kRefusalMessages[] = {RTCE_MEDIA_STREAM_REFUSALS(RTCE_VOCAB_MESSAGE_TEXT)};
}  // namespace

std::string_view media_stream_refusal_name(MediaStreamRefusal value) {
  return vocab_name(kRefusalNames, value);
}
std::string_view media_stream_refusal_message(MediaStreamRefusal value) {
  return vocab_name(kRefusalMessages, value);
}

}  // namespace rtce
