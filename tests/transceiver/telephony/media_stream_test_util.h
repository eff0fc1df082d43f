// media_stream_test_util.h — what the media-stream codec tests (twilio_stream_test.cpp,
// telnyx_stream_test.cpp) share, because it holds for every provider's codec alike: μ-law
// frames and their base64, a reader past its start, the refusal one message draws, and the
// assertion blocks of the refusals every dialect makes the same way (text that is not an
// event, messages before the start, bad starts, payloads that are not whole frames, DTMF
// digits, the reused payload buffer). Each provider's message shapes (its JSON) stay in its
// own test file and come in here as strings or as builders.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "media_stream.h"
#include "realtime_dialect.h"  // base64_append

namespace rtce {

// `count` 20 ms μ-law frames whose bytes count up from `first`.
inline std::vector<uint8_t> frames(size_t count, uint8_t first = 0) {
  std::vector<uint8_t> bytes(count * kTwilioFrameBytes);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(first + i);
  return bytes;
}

inline std::string base64(std::span<const uint8_t> bytes) {
  std::string out;
  base64_append(bytes, out);
  return out;
}

inline std::string s(std::string_view text) { return std::string(text); }

// `"p0":"v","p1":"v",...`: the members of a custom-parameters object with `count` of them.
inline std::string numbered_custom_parameters(size_t count) {
  std::string members;
  for (size_t i = 0; i < count; ++i)
    members += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\":\"v\"";
  return members;
}

// A Codec that has read the provider's connected and start messages.
template <class Codec>
Codec read_past_start(const std::string& connected, const std::string& start) {
  Codec reader;
  EXPECT_TRUE(reader.read(connected).event);
  EXPECT_TRUE(reader.read(start).event);
  return reader;
}

// The refusal `text` draws (nullopt when it is read as an event); exactly one of the two is set.
template <class Codec>
std::optional<MediaStreamRefusal> refusal_of(Codec& reader, const std::string& text) {
  const MediaStreamReadResult r = reader.read(text);
  EXPECT_NE(r.event.has_value(), r.refusal.has_value()) << text;
  return r.refusal;
}

// For ASSERT_TRUE: `r` is an event of `kind` (else what it was: the refusal, or another kind).
inline ::testing::AssertionResult is_event(const MediaStreamReadResult& r, MediaStreamEventKind kind) {
  if (!r.event) {
    return ::testing::AssertionFailure()
           << "refused: "
           << (r.refusal ? media_stream_refusal_name(*r.refusal) : "neither event nor refusal");
  }
  if (r.event->kind != kind) {
    return ::testing::AssertionFailure()
           << "an event of kind " << static_cast<int>(r.event->kind) << ", not " << static_cast<int>(kind);
  }
  return ::testing::AssertionSuccess();
}

// `r` is the media event of `chunk` at `timestamp_ms` carrying `audio` (wrap the call in
// ASSERT_NO_FATAL_FAILURE: it stops at a refusal).
inline void expect_media(const MediaStreamReadResult& r, uint64_t chunk, uint64_t timestamp_ms,
                         const std::vector<uint8_t>& audio) {
  ASSERT_TRUE(r.event) << media_stream_refusal_name(*r.refusal);
  EXPECT_EQ(r.event->kind, MediaStreamEventKind::media);
  EXPECT_EQ(r.event->chunk, chunk);
  EXPECT_EQ(r.event->timestamp_ms, timestamp_ms);
  EXPECT_EQ(std::vector<uint8_t>(r.event->ulaw.begin(), r.event->ulaw.end()), audio);
}

// The refusals of text that is no provider's event, the same in every dialect; last, a
// message (the provider's `connected`, padded) of exactly the size limit is read.
template <class Codec>
void expect_refuses_text_that_is_not_an_event(Codec& reader, const std::string& connected) {
  using R = MediaStreamRefusal;
  EXPECT_EQ(refusal_of(reader, std::string(kTwilioMaxMessageBytes + 1, ' ')), R::too_large);
  EXPECT_EQ(refusal_of(reader, std::string(9, '[') + std::string(9, ']')), R::too_deep);
  EXPECT_EQ(refusal_of(reader, "{\"event\":\"\xFF\"}"), R::not_json);  // not UTF-8
  EXPECT_EQ(refusal_of(reader, R"(["event","start"])"), R::not_an_event);
  EXPECT_EQ(refusal_of(reader, R"({"event":"Media"})"), R::unknown_event);
  std::string padded = connected;
  padded.append(kTwilioMaxMessageBytes - padded.size(), ' ');
  EXPECT_TRUE(reader.read(padded).event);
}

// A reader that has not read a start refuses the provider's media, dtmf and mark messages.
template <class Codec>
void expect_refuses_before_start(Codec& reader, const std::string& media, const std::string& dtmf,
                                 const std::string& mark) {
  EXPECT_EQ(refusal_of(reader, media), MediaStreamRefusal::before_start);
  EXPECT_EQ(refusal_of(reader, dtmf), MediaStreamRefusal::before_start);
  EXPECT_EQ(refusal_of(reader, mark), MediaStreamRefusal::before_start);
  EXPECT_FALSE(reader.started());
}

// Each of `bad`, read by a fresh Codec, is bad_start and leaves it unstarted.
template <class Codec>
void expect_bad_starts(const std::vector<std::string>& bad) {
  for (const std::string& text : bad) {
    Codec reader;
    EXPECT_EQ(refusal_of(reader, text), MediaStreamRefusal::bad_start) << text;
    EXPECT_FALSE(reader.started()) << text;
    EXPECT_TRUE(reader.start().stream_sid.empty());
  }
}

// A started reader refuses payloads (put in the provider's media message by `media_message`)
// that are empty, not whole frames or more than kMaxMediaFrames (too long even to decode),
// and reads kMaxMediaFrames.
template <class Codec, class MediaMessage>
void expect_refuses_payloads_that_are_not_whole_frames(Codec& reader, const MediaMessage& media_message) {
  using R = MediaStreamRefusal;
  EXPECT_EQ(refusal_of(reader, media_message("")), R::bad_payload_size);
  EXPECT_EQ(refusal_of(reader, media_message(base64(std::vector<uint8_t>(kTwilioFrameBytes - 1)))),
            R::bad_payload_size);
  EXPECT_EQ(refusal_of(reader, media_message(base64(std::vector<uint8_t>(kTwilioFrameBytes + 1)))),
            R::bad_payload_size);
  EXPECT_EQ(refusal_of(reader, media_message(base64(frames(kMaxMediaFrames + 1)))), R::bad_payload_size);
  EXPECT_EQ(refusal_of(reader, media_message(std::string(4000, 'A'))),
            R::bad_payload_size);  // before decoding
  EXPECT_TRUE(reader.read(media_message(base64(frames(kMaxMediaFrames)))).event);
}

// Once it has held the largest payload, a started reader decodes into the same buffer.
template <class Codec, class MediaMessage>
void expect_reuses_its_payload_buffer(Codec& reader, const MediaMessage& media_message) {
  const auto largest = reader.read(media_message(base64(frames(kMaxMediaFrames))));
  ASSERT_TRUE(largest.event);
  const uint8_t* first = largest.event->ulaw.data();
  for (size_t i = 0; i < 5; ++i) {
    const auto r = reader.read(media_message(base64(frames(1 + i))));
    ASSERT_TRUE(r.event);
    EXPECT_EQ(r.event->ulaw.data(), first);  // no reallocation
  }
}

// A started reader reads every DTMF digit (0-9 * # A-D) in the provider's dtmf message and
// refuses the digits no provider sends.
template <class Codec, class DtmfMessage>
void expect_dtmf_digits(Codec& reader, const DtmfMessage& dtmf_message) {
  for (char digit : std::string_view("0123456789*#ABCD")) {
    const auto r = reader.read(dtmf_message(std::string(1, digit)));
    ASSERT_TRUE(r.event) << digit;
    EXPECT_EQ(r.event->digit, digit);
  }
  for (const char* digit : {"", "12", "E", "a"})
    EXPECT_EQ(refusal_of(reader, dtmf_message(digit)), MediaStreamRefusal::bad_dtmf) << digit;
}

}  // namespace rtce
