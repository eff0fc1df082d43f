// vocab_test.cpp — the relay's vocabularies (wire/rtce_relay_vocab.h, rtce_hint.h,
// rtce_xdp.h): the C++ enums name what the wire tables name, and docs/operations.md lists
// exactly the labels the tables export.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "doc_tables.h"
#include "relay_core.h"
#include "rtce_xdp.h"

namespace rtce {
namespace {

using test::labels_of;

TEST(Vocab, CxxNamesAreTheWireLabels) {
  ASSERT_EQ(std::size(kDropReasons), static_cast<size_t>(RTCE_RELAY_DROP_COUNT));
  for (size_t i = 0; i < std::size(kDropReasons); i++) {
    EXPECT_EQ(static_cast<size_t>(kDropReasons[i]), i);
    EXPECT_STREQ(drop_reason_name(kDropReasons[i]), rtce_relay_drop_reason_names[i]);
  }
  EXPECT_STREQ(drop_reason_name(DropReason::no_flow), "no_flow");
  EXPECT_STREQ(drop_reason_name(DropReason::count), "unknown");
  // A codec error is its own failure counter; wrong_cluster comes after the codec's results.
  EXPECT_EQ(static_cast<int>(HintFailure::bad_length), RTCE_HINT_BAD_LENGTH);
  EXPECT_EQ(static_cast<int>(HintFailure::bad_mac), RTCE_HINT_BAD_MAC);
  EXPECT_EQ(static_cast<int>(HintFailure::wrong_cluster), RTCE_XDP_HINT_WRONG_CLUSTER);
  EXPECT_EQ(static_cast<int>(HintFailure::count), RTCE_XDP_HINT_FAILURE_SLOTS);
  EXPECT_EQ(labels_of(kHintFailures, hint_failure_name),
            (std::set<std::string>{"bad_length", "bad_char", "bad_version", "unknown_key", "bad_mac",
                                   "wrong_cluster"}));
  EXPECT_STREQ(direction_name(Direction::client_to_transceiver), "client_to_transceiver");
  EXPECT_STREQ(direction_name(Direction::transceiver_to_client), "transceiver_to_client");
  EXPECT_EQ(static_cast<int>(Direction::transceiver_to_client), RTCE_XDP_DIR_TO_CLIENT);
}

// Pinned maps of older loaders are indexed by these values: they must never move.
TEST(Vocab, WireValuesArePinned) {
  EXPECT_EQ(RTCE_XDP_FORWARDED, 0);
  EXPECT_EQ(RTCE_XDP_HINT_REJECTED, 6);
  EXPECT_EQ(RTCE_XDP_PASS_NOT_OURS, 12);
  EXPECT_EQ(RTCE_XDP_SOURCE_PREFIX_FLOW_LIMIT, 24);
  EXPECT_EQ(RTCE_XDP_EVENT_LOST, 27);
  EXPECT_EQ(RTCE_XDP_PEER_UNTRUSTED, 28);  // the owner role's, appended after event_lost
  EXPECT_EQ(RTCE_XDP_PEER_WRONG_SENDER, 30);
  EXPECT_EQ(RTCE_XDP_REASON_COUNT, 31);
  EXPECT_EQ(RTCE_HINT_BAD_MAC, 5);
  EXPECT_EQ(RTCE_XDP_HINT_WRONG_CLUSTER, 6);
  EXPECT_STREQ(rtce_xdp_reason_names[RTCE_XDP_PASS_NO_NEIGH], "pass_no_neigh");
  EXPECT_EQ(rtce_xdp_reason_twins[RTCE_XDP_RETURN_NO_FLOW], RTCE_RELAY_DROP_RETURN_NO_FLOW);
  EXPECT_EQ(rtce_xdp_reason_twins[RTCE_XDP_NO_FLOW], RTCE_RELAY_DROP_NONE);
  EXPECT_EQ(rtce_xdp_reason_verdicts[RTCE_XDP_FORWARDED_NEW_FLOW], RTCE_XDP_VERDICT_FORWARD);
}

TEST(Vocab, OperationsDocListsEveryDropReason) {
  const std::string doc = RTCE_SOURCE_DIR "/docs/operations.md";
  EXPECT_EQ(test::doc_table_codes(doc, "Drop reasons"), labels_of(kDropReasons, drop_reason_name))
      << "docs/operations.md 'Drop reasons' and RTCE_RELAY_DROP_REASONS (wire/rtce_relay_vocab.h) differ";
  EXPECT_EQ(test::doc_row_codes(doc, "`rtcedge_relay_hint_failures_total`"),
            labels_of(kHintFailures, hint_failure_name))
      << "docs/operations.md's rtcedge_relay_hint_failures_total row and RTCE_HINT_FAILURES differ";
}

}  // namespace
}  // namespace rtce
