// rfc4571.h — RFC 4571 framing (a 16-bit big-endian length, then that many bytes), the
// framing of ICE-TCP (RFC 6544): pure functions over buffers, no sockets, so that the relay's
// connections (tcp_streams.h), the tests and the fuzzer share one definition.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace rtce {

inline constexpr size_t kRfc4571LengthBytes = 2;  // the length field in front of each frame

// RFC 4571 framing of one byte stream, receive side: a 16-bit big-endian length, then that
// many bytes. Sans-IO: the caller reads into space(), commits what it read and takes whole
// frames from next(); a length over max_frame makes the stream unusable (too_large()).
class FrameReader {
 public:
  explicit FrameReader(size_t max_frame);
  // Where the next read goes; never empty while !too_large() (a whole frame always fits).
  std::span<uint8_t> space();
  void commit(size_t n);
  // The next whole frame (valid until the next space() call), or nullopt.
  std::optional<std::span<uint8_t>> next();
  bool too_large() const { return too_large_; }
  size_t max_frame() const { return max_frame_; }

 private:
  size_t max_frame_;
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0, end_ = 0;  // unread bytes
  bool too_large_ = false;
};

// Writes one RFC 4571 frame (length + payload) at the end of `out`; false when it would pass
// `cap` bytes or the payload is over 65535 (nothing written).
bool append_frame(std::vector<uint8_t>& out, size_t cap, std::span<const uint8_t> payload);

}  // namespace rtce
