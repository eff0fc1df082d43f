// rfc4571.cpp — see rfc4571.h.
#include "rfc4571.h"

#include <algorithm>
#include <cstring>

#include "byte_order.h"

namespace rtce {
namespace {
constexpr size_t kLengthBytes = kRfc4571LengthBytes;
}  // namespace

FrameReader::FrameReader(size_t max_frame) : max_frame_(max_frame), buffer_(2 * (kLengthBytes + max_frame)) {}

std::span<uint8_t> FrameReader::space() {
  if (too_large_) return {};
  // Unread bytes move to the front only when the room behind them cannot hold a whole frame:
  // at most one partial frame is ever moved, and most reads start at once.
  if (buffer_.size() - end_ < kLengthBytes + max_frame_ && begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  return {buffer_.data() + end_, buffer_.size() - end_};
}

void FrameReader::commit(size_t n) { end_ += std::min(n, buffer_.size() - end_); }

std::optional<std::span<uint8_t>> FrameReader::next() {
  if (too_large_ || end_ - begin_ < kLengthBytes) return std::nullopt;
  const size_t len = load_be16(buffer_.data() + begin_);
  if (len > max_frame_) {
    too_large_ = true;
    return std::nullopt;
  }
  if (end_ - begin_ < kLengthBytes + len) return std::nullopt;
  uint8_t* frame = buffer_.data() + begin_ + kLengthBytes;
  begin_ += kLengthBytes + len;
  if (begin_ == end_) begin_ = end_ = 0;
  return std::span<uint8_t>(frame, len);
}

bool append_frame(std::vector<uint8_t>& out, size_t cap, std::span<const uint8_t> payload) {
  if (payload.size() > 0xffff || out.size() + kLengthBytes + payload.size() > cap) return false;
  const size_t at = out.size();
  out.resize(at + kLengthBytes + payload.size());  // within the capacity reserved at accept
  store_be16(out.data() + at, static_cast<uint16_t>(payload.size()));
  if (!payload.empty()) std::memcpy(out.data() + at + kLengthBytes, payload.data(), payload.size());
  return true;
}

}  // namespace rtce
