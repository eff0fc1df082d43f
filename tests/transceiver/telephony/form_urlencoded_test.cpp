// form_urlencoded_test.cpp — the webhook form parser: Twilio's own bodies, '+' and %XX,
// malformed escapes, order and duplicates, empty pairs, the field limit.
#include "form_urlencoded.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace rtce {
namespace {

std::vector<FormField> parsed(std::string_view body) {
  auto fields = parse_form_urlencoded(body);
  EXPECT_TRUE(fields.has_value()) << body;
  return fields.value_or(std::vector<FormField>{});
}

// The body's fields as (name, value) pairs, in order: one comparison covers every field.
using Pairs = std::vector<std::pair<std::string, std::string>>;
Pairs pairs_of(std::string_view body) {
  Pairs pairs;
  for (FormField& field : parsed(body)) pairs.emplace_back(std::move(field.name), std::move(field.value));
  return pairs;
}

TEST(FormUrlencoded, ParsesATwilioVoiceWebhookBody) {
  EXPECT_EQ(pairs_of("AccountSid=AC0123&ApiVersion=2010-04-01&CallSid=CA1234567890ABCDE&CallStatus=ringing"
                     "&Called=%2B18005551212&Caller=%2B14158675310&Direction=inbound&From=%2B14158675310"
                     "&FromCity=SAN+FRANCISCO&To=%2B18005551212"),
            (Pairs{{"AccountSid", "AC0123"},
                   {"ApiVersion", "2010-04-01"},
                   {"CallSid", "CA1234567890ABCDE"},
                   {"CallStatus", "ringing"},
                   {"Called", "+18005551212"},
                   {"Caller", "+14158675310"},
                   {"Direction", "inbound"},
                   {"From", "+14158675310"},
                   {"FromCity", "SAN FRANCISCO"},
                   {"To", "+18005551212"}}));
}

TEST(FormUrlencoded, PlusIsASpaceButAnEscapedPlusIsAPlus) {
  EXPECT_EQ(pairs_of("a+b=c+d&e=%2B%20"), (Pairs{{"a b", "c d"}, {"e", "+ "}}));
}

TEST(FormUrlencoded, PercentEscapesDecodeToBytesInEitherCase) {
  // An escaped '=' or '&' is data, not a separator.
  EXPECT_EQ(pairs_of("k=%e2%82%AC%00%ff&%3D=%26"),
            (Pairs{{"k", std::string("\xE2\x82\xAC\0\xFF", 5)}, {"=", "&"}}));
}

TEST(FormUrlencoded, MalformedEscapesRefuseTheBody) {
  for (const char* body : {"a=%", "a=%4", "a=%G0", "a=%0G", "%=1", "a=1&b=%%41", "a=%4%41"})
    EXPECT_FALSE(parse_form_urlencoded(body)) << body;
}

TEST(FormUrlencoded, FirstEqualsSplitsAndAMissingOneMeansAnEmptyValue) {
  EXPECT_EQ(pairs_of("a=b=c&flag&=v&e="), (Pairs{{"a", "b=c"}, {"flag", ""}, {"", "v"}, {"e", ""}}));
}

TEST(FormUrlencoded, KeepsOrderAndDuplicates) {
  EXPECT_EQ(pairs_of("b=2&a=1&b=1&b=2"), (Pairs{{"b", "2"}, {"a", "1"}, {"b", "1"}, {"b", "2"}}));
}

TEST(FormUrlencoded, SkipsEmptyPairs) {
  EXPECT_TRUE(parsed("").empty());
  EXPECT_TRUE(parsed("&&&").empty());
  EXPECT_EQ(pairs_of("&a=1&&b=2&"), (Pairs{{"a", "1"}, {"b", "2"}}));
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
