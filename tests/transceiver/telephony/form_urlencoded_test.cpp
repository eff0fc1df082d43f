// form_urlencoded_test.cpp — the webhook form parser: Twilio's own bodies, '+' and %XX,
// malformed escapes, order and duplicates, empty pairs, the field limit.
#include "form_urlencoded.h"

#include <gtest/gtest.h>

#include <string>

namespace rtce {
namespace {

std::vector<FormField> parsed(std::string_view body) {
  auto fields = parse_form_urlencoded(body);
  EXPECT_TRUE(fields.has_value()) << body;
  return fields.value_or(std::vector<FormField>{});
}

TEST(FormUrlencoded, ParsesATwilioVoiceWebhookBody) {
  const auto fields = parsed(
      "AccountSid=AC0123&ApiVersion=2010-04-01&CallSid=CA1234567890ABCDE&CallStatus=ringing"
      "&Called=%2B18005551212&Caller=%2B14158675310&Direction=inbound&From=%2B14158675310"
      "&FromCity=SAN+FRANCISCO&To=%2B18005551212");
  ASSERT_EQ(fields.size(), 10u);
  EXPECT_EQ(fields[0].name, "AccountSid");
  EXPECT_EQ(fields[0].value, "AC0123");
  EXPECT_EQ(fields[4].name, "Called");
  EXPECT_EQ(fields[4].value, "+18005551212");
  EXPECT_EQ(fields[8].value, "SAN FRANCISCO");
}

TEST(FormUrlencoded, PlusIsASpaceButAnEscapedPlusIsAPlus) {
  const auto fields = parsed("a+b=c+d&e=%2B%20");
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields[0].name, "a b");
  EXPECT_EQ(fields[0].value, "c d");
  EXPECT_EQ(fields[1].value, "+ ");
}

TEST(FormUrlencoded, PercentEscapesDecodeToBytesInEitherCase) {
  const auto fields = parsed("k=%e2%82%AC%00%ff&%3D=%26");
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields[0].value, std::string("\xE2\x82\xAC\0\xFF", 5));
  // An escaped '=' or '&' is data, not a separator.
  EXPECT_EQ(fields[1].name, "=");
  EXPECT_EQ(fields[1].value, "&");
}

TEST(FormUrlencoded, MalformedEscapesRefuseTheBody) {
  for (const char* body : {"a=%", "a=%4", "a=%G0", "a=%0G", "%=1", "a=1&b=%%41", "a=%4%41"})
    EXPECT_FALSE(parse_form_urlencoded(body)) << body;
}

TEST(FormUrlencoded, FirstEqualsSplitsAndAMissingOneMeansAnEmptyValue) {
  const auto fields = parsed("a=b=c&flag&=v&e=");
  ASSERT_EQ(fields.size(), 4u);
  EXPECT_EQ(fields[0].name, "a");
  EXPECT_EQ(fields[0].value, "b=c");
  EXPECT_EQ(fields[1].name, "flag");
  EXPECT_EQ(fields[1].value, "");
  EXPECT_EQ(fields[2].name, "");
  EXPECT_EQ(fields[2].value, "v");
  EXPECT_EQ(fields[3].name, "e");
  EXPECT_EQ(fields[3].value, "");
}

TEST(FormUrlencoded, KeepsOrderAndDuplicates) {
  const auto fields = parsed("b=2&a=1&b=1&b=2");
  ASSERT_EQ(fields.size(), 4u);
  EXPECT_EQ(fields[0].name + fields[0].value, "b2");
  EXPECT_EQ(fields[1].name + fields[1].value, "a1");
  EXPECT_EQ(fields[2].name + fields[2].value, "b1");
  EXPECT_EQ(fields[3].name + fields[3].value, "b2");
}

TEST(FormUrlencoded, SkipsEmptyPairs) {
  EXPECT_TRUE(parsed("").empty());
  EXPECT_TRUE(parsed("&&&").empty());
  const auto fields = parsed("&a=1&&b=2&");
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields[1].name, "b");
}

TEST(FormUrlencoded, RefusesMoreThanTheFieldLimit) {
  std::string body;
  for (int i = 0; i < 128; ++i) body += "f" + std::to_string(i) + "=x&";
  EXPECT_EQ(parse_form_urlencoded(body)->size(), 128u);  // the default limit, exactly
  EXPECT_FALSE(parse_form_urlencoded(body + "one=more"));
  // Empty pairs do not count towards it.
  EXPECT_EQ(parse_form_urlencoded(body + "&&&")->size(), 128u);
  EXPECT_EQ(parse_form_urlencoded("a=1&b=2", 2)->size(), 2u);
  EXPECT_FALSE(parse_form_urlencoded("a=1&b=2&c=3", 2));
  EXPECT_FALSE(parse_form_urlencoded("a", 0));
  EXPECT_TRUE(parse_form_urlencoded("", 0));
}

}  // namespace
}  // namespace rtce
