// vocab_test.cpp — the transceiver's vocabularies (worker_metrics.h): every value has its
// label, and docs/operations.md lists exactly the labels the tables export.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "doc_tables.h"
#include "worker_metrics.h"

namespace rtce {
namespace {

using test::labels_of;

TEST(TransceiverVocab, EveryValueHasItsLabel) {
  ASSERT_EQ(std::size(kDatagramDrops), static_cast<size_t>(DatagramDrop::count));
  ASSERT_EQ(std::size(kSessionEnds), static_cast<size_t>(SessionEnd::count));
  EXPECT_STREQ(datagram_drop_name(DatagramDrop::untrusted_relay), "untrusted_relay");
  EXPECT_STREQ(datagram_drop_name(DatagramDrop::stun_replayed), "stun_replayed");
  EXPECT_STREQ(datagram_drop_name(DatagramDrop::count), "unknown");
  EXPECT_STREQ(session_end_name(SessionEnd::deleted), "deleted");
  EXPECT_STREQ(session_end_name(SessionEnd::drained), "drained");
  EXPECT_EQ(labels_of(kDatagramDrops, datagram_drop_name).size(), std::size(kDatagramDrops));
  EXPECT_EQ(labels_of(kSessionEnds, session_end_name).size(), std::size(kSessionEnds));
}

TEST(TransceiverVocab, OperationsDocListsEveryReason) {
  const std::string doc = RTCE_SOURCE_DIR "/docs/operations.md";
  EXPECT_EQ(test::doc_table_codes(doc, "Session end reasons"), labels_of(kSessionEnds, session_end_name))
      << "docs/operations.md 'Session end reasons' and RTCE_SESSION_ENDS (worker_metrics.h) differ";
  EXPECT_EQ(test::doc_table_codes(doc, "Datagram drop reasons"),
            labels_of(kDatagramDrops, datagram_drop_name))
      << "docs/operations.md 'Datagram drop reasons' and RTCE_DATAGRAM_DROPS (worker_metrics.h) differ";
}

}  // namespace
}  // namespace rtce
