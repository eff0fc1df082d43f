// data_channel_endpoint_test.cpp — two DataChannelEndpoints over an in-memory link: DCEP
// open/ACK, text and binary both ways, empty messages, a 200 KiB message reassembled, an
// oversize message dropped while the association lives on, stream reset, SHUTDOWN, ABORT,
// hostile packets and hostile DCEP as counted drops, and the packets usrsctp writes passing
// our own pre-check.
#include "data_channel_endpoint.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>

#include "data_channel_test_link.h"
#include "dcep.h"
#include "doc_tables.h"
#include "sctp_packet.h"
#include "sctp_stack.h"

namespace rtce {
namespace {

using testing::Link;
using State = DataChannelEndpoint::State;
using Drop = DataChannelDrop;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(DataChannelEndpoint, OpensAChannelAndCarriesTextBothWays) {
  Link link;
  ASSERT_TRUE(link.connect());
  auto stream = link.open("oai-events", "json");
  ASSERT_TRUE(stream);
  EXPECT_EQ(*stream % 2, 0) << "the DTLS client opens even stream ids";
  ASSERT_EQ(link.b.opened.size(), 1u);
  EXPECT_EQ(link.b.opened[0], std::make_tuple(*stream, std::string("oai-events"), std::string("json")));
  ASSERT_TRUE(link.b.ep->send_text(*stream, R"({"type":"session.created"})"));
  ASSERT_TRUE(link.a.ep->send_text(*stream, R"({"type":"session.update"})"));
  ASSERT_TRUE(link.run_until([&] { return !link.a.messages.empty() && !link.b.messages.empty(); }));
  EXPECT_EQ(link.a.messages[0].text(), R"({"type":"session.created"})");
  EXPECT_FALSE(link.a.messages[0].binary);
  EXPECT_EQ(link.b.messages[0].text(), R"({"type":"session.update"})");
  EXPECT_EQ(link.b.messages[0].stream, *stream);
  EXPECT_EQ(link.a.ep->stats().messages_out, 1u);
  EXPECT_EQ(link.b.ep->stats().messages_in, 1u);
  EXPECT_EQ(link.b.ep->stats().channels_opened, 1u);
  EXPECT_LE(link.a.largest_packet, DataChannelEndpoint::Config{}.mtu);
  for (auto d : link.b.ep->stats().drops) EXPECT_EQ(d, 0u);
}

TEST(DataChannelEndpoint, EmptyAndBinaryMessagesKeepTheirKind) {
  Link link;
  ASSERT_TRUE(link.connect());
  auto s = link.open("x");
  ASSERT_TRUE(s);
  const std::vector<uint8_t> bin = {0, 1, 2, 255};
  ASSERT_TRUE(link.a.ep->send_text(*s, ""));
  ASSERT_TRUE(link.a.ep->send_binary(*s, {}));
  ASSERT_TRUE(link.a.ep->send_binary(*s, bin));
  ASSERT_TRUE(link.run_until([&] { return link.b.messages.size() == 3; }));
  EXPECT_TRUE(link.b.messages[0].bytes.empty());
  EXPECT_FALSE(link.b.messages[0].binary);
  EXPECT_TRUE(link.b.messages[1].bytes.empty());
  EXPECT_TRUE(link.b.messages[1].binary);
  EXPECT_EQ(link.b.messages[2].bytes, bin);
  EXPECT_TRUE(link.b.messages[2].binary);
}

TEST(DataChannelEndpoint, LargeMessageRoundTripsByteIdentical) {
  DataChannelEndpoint::Config config;
  config.remote_max_message_size = 262144;
  Link link(config, config);
  ASSERT_TRUE(link.connect());
  auto s = link.open("big");
  ASSERT_TRUE(s);
  const auto big = random_bytes(200 * 1024, 7);
  ASSERT_TRUE(link.a.ep->send_binary(*s, big));
  ASSERT_TRUE(link.run_until([&] { return !link.b.messages.empty(); }));
  ASSERT_EQ(link.b.messages[0].bytes.size(), big.size());
  EXPECT_TRUE(link.b.messages[0].bytes == big);
  ASSERT_TRUE(link.b.ep->send_binary(*s, link.b.messages[0].bytes));
  ASSERT_TRUE(link.run_until([&] { return !link.a.messages.empty(); }));
  EXPECT_TRUE(link.a.messages[0].bytes == big);
  EXPECT_GT(link.a.ep->stats().packets_out, big.size() / 1200) << "SCTP fragmented it";
  EXPECT_LE(link.a.largest_packet, config.mtu);
}

TEST(DataChannelEndpoint, SendsLargerThanThePeersLimitAreRefused) {
  Link link;  // remote_max_message_size 65536 by default
  ASSERT_TRUE(link.connect());
  auto s = link.open("x");
  ASSERT_TRUE(s);
  EXPECT_FALSE(link.a.ep->send_binary(*s, random_bytes(65537, 1)));
  EXPECT_EQ(link.a.ep->stats().refused(DataChannelSendRefusal::too_large), 1u);
  EXPECT_TRUE(link.a.ep->send_binary(*s, random_bytes(65536, 1)));
  EXPECT_FALSE(link.a.ep->send_text(*s + 2, "no such channel"));
  EXPECT_EQ(link.a.ep->stats().refused(DataChannelSendRefusal::no_channel), 1u);
}

TEST(DataChannelEndpoint, OversizeInboundMessageIsDroppedAndTheAssociationStaysUp) {
  DataChannelEndpoint::Config sender, receiver;
  sender.remote_max_message_size = 262144;  // the sender ignores what we announce
  receiver.max_message_size = 65536;
  Link link(sender, receiver);
  ASSERT_TRUE(link.connect());
  auto s = link.open("x");
  ASSERT_TRUE(s);
  ASSERT_TRUE(link.a.ep->send_binary(*s, random_bytes(100 * 1024, 3)));
  ASSERT_TRUE(link.run_until([&] { return link.b.ep->stats().drop(Drop::message_too_large) == 1; }));
  ASSERT_TRUE(link.a.ep->send_text(*s, "still here"));
  ASSERT_TRUE(link.run_until([&] { return !link.b.messages.empty(); }));
  EXPECT_EQ(link.b.messages.size(), 1u);
  EXPECT_EQ(link.b.messages[0].text(), "still here");
  EXPECT_EQ(link.b.ep->state(), State::open);
}

TEST(DataChannelEndpoint, StreamResetClosesTheChannelOnBothSides) {
  Link link;
  ASSERT_TRUE(link.connect());
  auto s1 = link.open("one");
  auto s2 = link.open("two");
  ASSERT_TRUE(s1 && s2);
  EXPECT_NE(*s1, *s2);
  link.a.ep->close_channel(*s1);
  ASSERT_TRUE(link.run_until([&] { return link.b.closed.size() == 1 && link.a.closed.size() == 1; }));
  EXPECT_EQ(link.b.closed[0], *s1);
  EXPECT_EQ(link.a.closed[0], *s1);
  EXPECT_FALSE(link.b.ep->send_text(*s1, "gone"));
  ASSERT_TRUE(link.b.ep->send_text(*s2, "other channel lives"));
  ASSERT_TRUE(link.run_until([&] { return !link.a.messages.empty(); }));
  EXPECT_EQ(link.a.messages[0].stream, *s2);
  // The id is free again: the next open reuses it.
  auto s3 = link.open("three");
  ASSERT_TRUE(s3);
  EXPECT_EQ(*s3, *s1);
}

TEST(DataChannelEndpoint, PeerCloseIsAShutdownAndNoMoreCallbacksOnTheCloser) {
  Link link;
  ASSERT_TRUE(link.connect());
  auto s = link.open("x");
  ASSERT_TRUE(s);
  link.a.ep->close();
  EXPECT_EQ(link.a.ep->state(), State::closed);
  ASSERT_TRUE(link.run_until([&] { return link.b.ep->state() == State::closed; }));
  EXPECT_EQ(link.b.closed, std::vector<uint16_t>{*s});
  EXPECT_TRUE(link.a.closed.empty());
  EXPECT_TRUE(link.a.failures.empty());
  EXPECT_TRUE(link.b.failures.empty());
  EXPECT_FALSE(link.b.ep->send_text(*s, "late"));
}

TEST(DataChannelEndpoint, AbortFailsThePeer) {
  Link link;
  ASSERT_TRUE(link.connect());
  ASSERT_TRUE(link.open("x"));
  link.a.ep->abort();
  ASSERT_TRUE(link.run_until([&] { return !link.b.failures.empty(); }));
  EXPECT_EQ(link.b.ep->state(), State::failed);
  EXPECT_EQ(link.b.failures.size(), 1u);
  EXPECT_TRUE(link.a.failures.empty());
  // Packets after the failure are counted, not fed to usrsctp.
  link.b.ep->handle_packet(std::vector<uint8_t>(16, 1), monotonic_now());
  EXPECT_EQ(link.b.ep->stats().drop(Drop::after_close), 1u);
}

TEST(DataChannelEndpoint, PacketsArrivingBeforeStartStartTheAssociation) {
  Link link;
  link.a.ep->start(monotonic_now());  // b never sees start(): its DTLS callback came late
  ASSERT_TRUE(
      link.run_until([&] { return link.a.ep->state() == State::open && link.b.ep->state() == State::open; }));
}

// The owner's counters (a worker's metrics) see every drop, refusal and packet error that
// stats() counts: those counted on the owning thread and those usrsctp's callbacks count
// under the stack lock (message_too_large on reassembly).
TEST(DataChannelEndpoint, CountsReachTheOwnersCounters) {
  DataChannelCounters a_counters, b_counters;
  DataChannelEndpoint::Config sender, receiver;
  sender.remote_max_message_size = 262144;
  sender.counters = &a_counters;
  receiver.max_message_size = 65536;
  receiver.counters = &b_counters;
  Link link(sender, receiver);
  ASSERT_TRUE(link.connect());
  auto s = link.open("x");
  ASSERT_TRUE(s);
  EXPECT_FALSE(link.a.ep->send_binary(*s, random_bytes(262145, 1)));
  EXPECT_FALSE(link.a.ep->send_text(*s + 2, "no such channel"));
  ASSERT_TRUE(link.a.ep->send_binary(*s, random_bytes(100 * 1024, 3)));
  ASSERT_TRUE(link.run_until([&] { return link.b.ep->stats().drop(Drop::message_too_large) == 1; }));
  link.b.ep->handle_packet(random_bytes(7, 1), monotonic_now());  // shorter than a common header
  for (size_t i = 0; i < kDataChannelSendRefusalCount; ++i)
    EXPECT_EQ(a_counters.send_refused[i].get(), link.a.ep->stats().send_refused[i]) << i;
  EXPECT_EQ(a_counters.send_refused[static_cast<size_t>(DataChannelSendRefusal::too_large)].get(), 1u);
  EXPECT_EQ(a_counters.send_refused[static_cast<size_t>(DataChannelSendRefusal::no_channel)].get(), 1u);
  for (size_t i = 0; i < kDataChannelDropCount; ++i)
    EXPECT_EQ(b_counters.drops[i].get(), link.b.ep->stats().drops[i]) << i;
  EXPECT_EQ(b_counters.drops[static_cast<size_t>(Drop::message_too_large)].get(), 1u);
  EXPECT_EQ(b_counters.drops[static_cast<size_t>(Drop::malformed_packet)].get(), 1u);
  for (size_t i = 0; i < kSctpPacketErrorCount; ++i)
    EXPECT_EQ(b_counters.packet_errors[i].get(), link.b.ep->stats().packet_errors[i]) << i;
  EXPECT_EQ(b_counters.packet_errors[static_cast<size_t>(SctpPacketError::too_short)].get(), 1u);
}

// docs/data-channels.md lists exactly the labels the metrics export.
TEST(DataChannelEndpoint, TheDocListsEveryLabel) {
  const std::string doc = RTCE_SOURCE_DIR "/docs/data-channels.md";
  auto labels = [](const auto& names) { return std::set<std::string>(std::begin(names), std::end(names)); };
  EXPECT_EQ(test::doc_table_codes(doc, "Data-channel drop reasons"), labels(kDataChannelDropLabels));
  EXPECT_EQ(test::doc_table_codes(doc, "Send refusals"), labels(kDataChannelSendRefusalLabels));
  EXPECT_EQ(test::doc_table_codes(doc, "SCTP packet errors"), labels(kSctpPacketErrorLabels));
}

TEST(DataChannelEndpoint, HostilePacketsAreCountedDropsAndTheAssociationLivesOn) {
  Link link;
  ASSERT_TRUE(link.connect());
  auto s = link.open("x");
  ASSERT_TRUE(s);
  auto& b = *link.b.ep;
  const uint64_t before = b.stats().drop(Drop::malformed_packet);
  for (uint32_t seed = 0; seed < 200; ++seed)
    b.handle_packet(random_bytes(1 + seed % 300, seed), monotonic_now());
  // A truncated chunk with a correct checksum: only the framing is wrong.
  std::vector<uint8_t> truncated = {0x13, 0x88, 0x13, 0x88, 1, 2, 3, 4, 0, 0, 0, 0, 0, 3, 0, 40, 1, 2};
  set_sctp_checksum(truncated);
  b.handle_packet(truncated, monotonic_now());
  EXPECT_EQ(b.stats().drop(Drop::malformed_packet), before + 201);
  EXPECT_GE(b.stats().packet_errors[static_cast<size_t>(SctpPacketError::chunk_overruns_packet)], 1u);
  // Framing-valid garbage with a valid checksum reaches usrsctp, which ignores it.
  std::vector<uint8_t> garbage = {0x13, 0x88, 0x13, 0x88, 9, 9, 9, 9, 0, 0, 0, 0, 0, 3, 0, 8, 1, 2, 3, 4};
  set_sctp_checksum(garbage);
  b.handle_packet(garbage, monotonic_now());
  ASSERT_TRUE(link.a.ep->send_text(*s, "alive"));
  ASSERT_TRUE(link.run_until([&] { return !link.b.messages.empty(); }));
  EXPECT_EQ(b.state(), State::open);
}

TEST(DataChannelEndpoint, HostileDcepIsCountedAndIgnored) {
  DataChannelEndpoint::Config b_config;
  b_config.max_channels = 2;
  Link link({}, b_config);
  ASSERT_TRUE(link.connect());
  auto& a = *link.a.ep;
  const uint8_t junk[] = {0x03, 0x00};  // a truncated OPEN
  ASSERT_TRUE(a.send_raw_for_testing(0, kPpidDcep, junk));
  const uint8_t unknown[] = {0x07};
  ASSERT_TRUE(a.send_raw_for_testing(0, kPpidDcep, unknown));
  const uint8_t stray_ack[] = {kDcepAck};
  ASSERT_TRUE(a.send_raw_for_testing(0, kPpidDcep, stray_ack));
  ASSERT_TRUE(link.run_until([&] { return link.b.ep->stats().drop(Drop::bad_dcep) == 3; }));
  // An OPEN on b's own parity (odd: b is the DTLS server).
  uint8_t open[64];
  DcepOpen o;
  o.label = "odd";
  const size_t n = write_dcep_open(o, open);
  ASSERT_TRUE(a.send_raw_for_testing(1, kPpidDcep, std::span(open, n)));
  ASSERT_TRUE(link.run_until([&] { return link.b.ep->stats().drop(Drop::wrong_stream_parity) == 1; }));
  // Data on a stream nobody opened, and a PPID data channels do not use.
  ASSERT_TRUE(a.send_raw_for_testing(4, kPpidString, as_bytes("who?")));
  ASSERT_TRUE(a.send_raw_for_testing(4, 52, as_bytes("partial string, deprecated")));
  ASSERT_TRUE(link.run_until([&] {
    return link.b.ep->stats().drop(Drop::unknown_stream) == 1 &&
           link.b.ep->stats().drop(Drop::unknown_ppid) == 1;
  }));
  EXPECT_TRUE(link.b.opened.empty());
  EXPECT_TRUE(link.b.messages.empty());
  // Channels beyond max_channels: the third OPEN is refused with a stream reset.
  ASSERT_TRUE(link.open("1"));
  ASSERT_TRUE(link.open("2"));
  auto third = a.open_channel("3", "");
  ASSERT_TRUE(third);
  ASSERT_TRUE(link.run_until([&] { return link.a.closed.size() == 1; }));
  EXPECT_EQ(link.a.closed[0], *third);
  EXPECT_EQ(link.b.ep->stats().drop(Drop::too_many_channels), 1u);
  EXPECT_EQ(link.b.opened.size(), 2u);
  EXPECT_EQ(link.b.ep->state(), State::open);
}

TEST(DataChannelEndpoint, UsrsctpPacketsPassOurPreCheck) {
  Link link;
  ASSERT_TRUE(link.connect());
  auto s = link.open("x");
  ASSERT_TRUE(s);
  ASSERT_TRUE(link.a.ep->send_text(*s, "hello"));
  ASSERT_TRUE(link.run_until([&] { return !link.b.messages.empty(); }));
  ASSERT_GT(link.a.captured.size(), 4u);
  for (const auto* side : {&link.a, &link.b}) {
    for (const auto& p : side->captured) {
      auto c = check_sctp_packet(p);
      EXPECT_FALSE(c.error) << sctp_packet_error_name(*c.error);
      EXPECT_EQ(c.source_port, 5000);
    }
  }
  // RTCE_SCTP_CORPUS_DIR=dir writes the captured packets as fuzzer seeds.
  if (const char* dir = std::getenv("RTCE_SCTP_CORPUS_DIR")) {
    std::filesystem::create_directories(dir);
    int i = 0;
    for (const auto* side : {&link.a, &link.b}) {
      for (const auto& p : side->captured) {
        std::ofstream(std::string(dir) + "/captured_" + std::to_string(i++), std::ios::binary)
            .write(reinterpret_cast<const char*>(p.data()), static_cast<std::streamsize>(p.size()));
      }
    }
  }
}

TEST(DataChannelEndpoint, PartiallyReliableAndUnorderedChannelsOpenAndCarryMessages) {
  Link link;
  ASSERT_TRUE(link.connect());
  for (auto [type, reliability] : {std::pair{DcepChannelType::partial_reliable_rexmit_unordered, 0u},
                                   std::pair{DcepChannelType::partial_reliable_timed, 500u},
                                   std::pair{DcepChannelType::reliable_unordered, 0u}}) {
    const size_t opened = link.b.opened.size();
    auto s = link.a.ep->open_channel("lossy", "", type, reliability);
    ASSERT_TRUE(s);
    ASSERT_TRUE(
        link.run_until([&] { return link.b.opened.size() > opened && link.a.opened.size() > opened; }));
    const size_t got = link.a.messages.size();
    ASSERT_TRUE(link.b.ep->send_text(*s, "from b"));  // sent with the channel's PR-SCTP policy
    ASSERT_TRUE(link.a.ep->send_text(*s, "from a"));
    ASSERT_TRUE(link.run_until([&] { return link.a.messages.size() > got; }));
    EXPECT_EQ(link.a.messages.back().text(), "from b");
  }
  EXPECT_EQ(link.b.messages.size(), 3u);
}

TEST(DataChannelEndpoint, TheStackCountsAssociations) {
  const size_t before = SctpStack::instance().associations();
  {
    Link link;
    EXPECT_EQ(SctpStack::instance().associations(), before + 2);
  }
  EXPECT_EQ(SctpStack::instance().associations(), before);
}

}  // namespace
}  // namespace rtce
