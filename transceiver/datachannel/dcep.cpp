// dcep.cpp — see dcep.h.
#include "dcep.h"

#include <array>
#include <cstring>

#include "byte_order.h"

namespace rtce {
namespace {

constexpr const char* kErrorNames[] = {RTCE_DCEP_ERRORS(RTCE_VOCAB_MESSAGE_LABEL)};

bool known_channel_type(uint8_t t) { return (t & 0x7f) <= 0x02; }

}  // namespace

std::string_view dcep_error_name(DcepError error) { return vocab_name(kErrorNames, error); }

DcepMessage parse_dcep(std::span<const uint8_t> bytes) {
  DcepMessage m;
  if (bytes.empty()) {
    m.error = DcepError::empty;
    return m;
  }
  m.type = bytes[0];
  if (m.type == kDcepAck) return m;  // RFC 8832 §5.2: the ACK is one byte; more is ignored
  if (m.type != kDcepOpen) {
    m.error = DcepError::unknown_message_type;
    return m;
  }
  if (bytes.size() < kDcepOpenHeaderBytes) {
    m.error = DcepError::truncated;
    return m;
  }
  const uint8_t* p = bytes.data();
  if (!known_channel_type(p[1])) {
    m.error = DcepError::unknown_channel_type;
    return m;
  }
  const size_t label_len = load_be16(p + 8);
  const size_t protocol_len = load_be16(p + 10);
  if (label_len > kDcepMaxLabelBytes || protocol_len > kDcepMaxLabelBytes) {
    m.error = DcepError::label_too_long;
    return m;
  }
  const size_t total = kDcepOpenHeaderBytes + label_len + protocol_len;
  if (bytes.size() < total) {
    m.error = DcepError::truncated;
    return m;
  }
  if (bytes.size() > total) {
    m.error = DcepError::trailing_bytes;
    return m;
  }
  m.open.channel_type = static_cast<DcepChannelType>(p[1]);
  m.open.priority = load_be16(p + 2);
  m.open.reliability = load_be32(p + 4);
  m.open.label = std::string_view(reinterpret_cast<const char*>(p + kDcepOpenHeaderBytes), label_len);
  m.open.protocol =
      std::string_view(reinterpret_cast<const char*>(p + kDcepOpenHeaderBytes + label_len), protocol_len);
  return m;
}

size_t write_dcep_open(const DcepOpen& open, std::span<uint8_t> out) {
  if (open.label.size() > kDcepMaxLabelBytes || open.protocol.size() > kDcepMaxLabelBytes) return 0;
  const size_t total = kDcepOpenHeaderBytes + open.label.size() + open.protocol.size();
  if (out.size() < total) return 0;
  uint8_t* p = out.data();
  p[0] = kDcepOpen;
  p[1] = static_cast<uint8_t>(open.channel_type);
  store_be16(p + 2, open.priority);
  store_be32(p + 4, open.reliability);
  store_be16(p + 8, static_cast<uint16_t>(open.label.size()));
  store_be16(p + 10, static_cast<uint16_t>(open.protocol.size()));
  // An empty view may have a null data(), which memcpy must not be given even for 0 bytes.
  if (!open.label.empty()) std::memcpy(p + kDcepOpenHeaderBytes, open.label.data(), open.label.size());
  if (!open.protocol.empty()) {
    std::memcpy(p + kDcepOpenHeaderBytes + open.label.size(), open.protocol.data(), open.protocol.size());
  }
  return total;
}

}  // namespace rtce
