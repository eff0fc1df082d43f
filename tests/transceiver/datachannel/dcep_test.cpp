// dcep_test.cpp — DCEP OPEN/ACK: an OPEN shaped as browsers send it for `oai-events`,
// round trips of every channel type, and hostile OPENs (lengths past the end, trailing
// bytes, unknown types, oversize labels) refused by name.
#include "dcep.h"

#include <gtest/gtest.h>

#include <vector>

namespace rtce {
namespace {

// An OPEN for createDataChannel('oai-events') with default options: reliable, ordered,
// priority 256 ("normal", RFC 8832 §6.4), label "oai-events", no protocol.
const std::vector<uint8_t> kDefaultOpen = {0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00,
                                           0x00, 'o',  'a',  'i',  '-',  'e',  'v',  'e',  'n',  't',  's'};

TEST(Dcep, ParsesTheDefaultOpenForOaiEvents) {
  auto m = parse_dcep(kDefaultOpen);
  ASSERT_FALSE(m.error) << dcep_error_name(*m.error);
  EXPECT_EQ(m.type, kDcepOpen);
  EXPECT_EQ(m.open.channel_type, DcepChannelType::reliable);
  EXPECT_TRUE(m.open.ordered());
  EXPECT_EQ(m.open.priority, 256);
  EXPECT_EQ(m.open.label, "oai-events");
  EXPECT_EQ(m.open.protocol, "");
}

TEST(Dcep, AckIsOneByte) {
  const uint8_t ack[] = {kDcepAck};
  auto m = parse_dcep(ack);
  ASSERT_FALSE(m.error);
  EXPECT_EQ(m.type, kDcepAck);
}

TEST(Dcep, EveryChannelTypeRoundTrips) {
  for (auto type : {DcepChannelType::reliable, DcepChannelType::partial_reliable_rexmit,
                    DcepChannelType::partial_reliable_timed, DcepChannelType::reliable_unordered,
                    DcepChannelType::partial_reliable_rexmit_unordered,
                    DcepChannelType::partial_reliable_timed_unordered}) {
    DcepOpen open;
    open.channel_type = type;
    open.priority = 512;
    open.reliability = 3000;
    open.label = "chat";
    open.protocol = "json";
    std::vector<uint8_t> buf(64);
    const size_t n = write_dcep_open(open, buf);
    ASSERT_EQ(n, kDcepOpenHeaderBytes + 8);
    auto m = parse_dcep(std::span(buf.data(), n));
    ASSERT_FALSE(m.error);
    EXPECT_EQ(m.open.channel_type, type);
    EXPECT_EQ(m.open.ordered(), (static_cast<uint8_t>(type) & 0x80) == 0);
    EXPECT_EQ(m.open.reliability, 3000u);
    EXPECT_EQ(m.open.label, "chat");
    EXPECT_EQ(m.open.protocol, "json");
  }
}

TEST(Dcep, HostileOpensAreRefusedByName) {
  EXPECT_EQ(parse_dcep({}).error, DcepError::empty);
  const uint8_t other[] = {0x07};
  EXPECT_EQ(parse_dcep(other).error, DcepError::unknown_message_type);
  // Every truncation of a valid OPEN.
  for (size_t cut = 1; cut < kDefaultOpen.size(); cut++)
    EXPECT_EQ(parse_dcep(std::span(kDefaultOpen.data(), cut)).error, DcepError::truncated) << cut;
  auto longer = kDefaultOpen;
  longer.push_back('x');
  EXPECT_EQ(parse_dcep(longer).error, DcepError::trailing_bytes);
  // Label length pointing far past the end.
  auto lying = kDefaultOpen;
  lying[8] = 0x03;
  lying[9] = 0xff;
  EXPECT_EQ(parse_dcep(lying).error, DcepError::truncated);
  auto huge = kDefaultOpen;
  huge[8] = 0xff;
  huge[9] = 0xff;
  EXPECT_EQ(parse_dcep(huge).error, DcepError::label_too_long);
  auto bad_type = kDefaultOpen;
  bad_type[1] = 0x03;
  EXPECT_EQ(parse_dcep(bad_type).error, DcepError::unknown_channel_type);
  bad_type[1] = 0x83;
  EXPECT_EQ(parse_dcep(bad_type).error, DcepError::unknown_channel_type);
}

TEST(Dcep, WriterRefusesSmallBuffersAndLongLabels) {
  DcepOpen open;
  open.label = "oai-events";
  std::vector<uint8_t> small(kDcepOpenHeaderBytes + 9);
  EXPECT_EQ(write_dcep_open(open, small), 0u);
  std::string long_label(kDcepMaxLabelBytes + 1, 'l');
  open.label = long_label;
  std::vector<uint8_t> big(4096);
  EXPECT_EQ(write_dcep_open(open, big), 0u);
}

TEST(Dcep, WriterTakesEmptyLabelAndProtocol) {
  // Default string_views have a null data(); the writer must not memcpy from it (UBSan).
  DcepOpen open;
  std::vector<uint8_t> out(kDcepOpenHeaderBytes);
  ASSERT_EQ(write_dcep_open(open, out), kDcepOpenHeaderBytes);
  const auto m = parse_dcep(out);
  ASSERT_FALSE(m.error);
  EXPECT_TRUE(m.open.label.empty());
  EXPECT_TRUE(m.open.protocol.empty());
}

}  // namespace
}  // namespace rtce
