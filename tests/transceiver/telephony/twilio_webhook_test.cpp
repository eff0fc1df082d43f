// twilio_webhook_test.cpp — X-Twilio-Signature against Twilio's documented examples (and
// HMAC-SHA1 computed by Python's hmac as an oracle), its port variants and forgeries; the
// TwiML answers and their escaping of hostile values.
#include "twilio_webhook.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rtce {
namespace {

constexpr std::string_view kToken = "12345";
constexpr std::string_view kUrl = "https://mycompany.com/myapp.php?foo=1&bar=2";

// The example of https://www.twilio.com/docs/usage/webhooks/webhooks-security, in the
// current page's version (caller +14158675310), written out of order on purpose.
std::vector<FormField> documented_params(std::string caller = "+14158675310") {
  return {{"To", "+18005551212"},
          {"Digits", "1234"},
          {"From", caller},
          {"Caller", caller},
          {"CallSid", "CA1234567890ABCDE"}};
}
constexpr std::string_view kDocumentedSignature = "GvWf1cFY/Q7PnoempGyD5oXAezc=";

TEST(TwilioSignature, MatchesTwilioDocumentationExample) {
  const auto params = documented_params();
  EXPECT_EQ(twilio_signature(kToken, kUrl, params), kDocumentedSignature);
  EXPECT_TRUE(twilio_signature_valid(kToken, kUrl, params, kDocumentedSignature));
}

TEST(TwilioSignature, MatchesTheOlderDocumentationExample) {
  // Earlier versions of the page used caller +12349013030 with the same token and URL;
  // Python's hmac.new(b"12345", data, hashlib.sha1) gives this value for it.
  const auto params = documented_params("+12349013030");
  EXPECT_EQ(twilio_signature(kToken, kUrl, params), "0/KCTR6DLpKmkAf8muzZqo1nDgQ=");
}

TEST(TwilioSignature, SortsByNameThenValueInByteOrder) {
  // Oracle: base64(hmac.new(b"tok", b"https://h/pBa1Bb2a1a2", hashlib.sha1).digest()).
  const std::vector<FormField> params = {{"a", "2"}, {"Bb", "2"}, {"a", "1"}, {"Ba", "1"}};
  EXPECT_EQ(twilio_signature("tok", "https://h/p", params), "4JLuxJisxPbdzOuT3N+17nXhIwg=");
  // Order of arrival does not matter.
  const std::vector<FormField> reordered = {{"Ba", "1"}, {"a", "1"}, {"a", "2"}, {"Bb", "2"}};
  EXPECT_EQ(twilio_signature("tok", "https://h/p", reordered),
            twilio_signature("tok", "https://h/p", params));
}

TEST(TwilioSignature, NoParametersSignsTheUrlAlone) {
  // Oracle: base64(hmac.new(b"12345", b"https://mycompany.com/myapp.php?foo=1&bar=2", sha1)).
  EXPECT_EQ(twilio_signature(kToken, kUrl, {}), "zYQTYrRWXE7LtzbG4PfP7/bkkGo=");
}

TEST(TwilioSignature, AcceptsTheUrlWithTheDefaultPortAddedOrRemoved) {
  const auto params = documented_params();
  // Twilio signed the URL without the port; we see it with one.
  EXPECT_TRUE(twilio_signature_valid(kToken, "https://mycompany.com:443/myapp.php?foo=1&bar=2", params,
                                     kDocumentedSignature));
  // Twilio signed it with the port; we see it without.
  const std::string with_port =
      twilio_signature(kToken, "https://mycompany.com:443/myapp.php?foo=1&bar=2", params);
  EXPECT_NE(with_port, kDocumentedSignature);
  EXPECT_TRUE(twilio_signature_valid(kToken, kUrl, params, with_port));
  // http and port 80, a URL without a path, the scheme in capitals.
  const std::string http = twilio_signature(kToken, "http://example.com:80/voice", params);
  EXPECT_TRUE(twilio_signature_valid(kToken, "http://example.com/voice", params, http));
  const std::string bare = twilio_signature(kToken, "https://example.com:443", params);
  EXPECT_TRUE(twilio_signature_valid(kToken, "https://example.com", params, bare));
  EXPECT_TRUE(twilio_signature_valid(kToken, "HTTPS://example.com:443", params,
                                     twilio_signature(kToken, "HTTPS://example.com", params)));
  // An IPv6 literal's colons are not a port.
  const std::string v6 = twilio_signature(kToken, "https://[2001:db8::1]:443/v?x=1", params);
  EXPECT_TRUE(twilio_signature_valid(kToken, "https://[2001:db8::1]/v?x=1", params, v6));
}

TEST(TwilioSignature, OtherPortsAndSchemesGetNoVariant) {
  const auto params = documented_params();
  // 443 is not http's default, 8443 nobody's: the signature must be over the URL as seen.
  const std::string http443 = twilio_signature(kToken, "http://example.com:443/voice", params);
  EXPECT_FALSE(twilio_signature_valid(kToken, "http://example.com/voice", params, http443));
  const std::string custom = twilio_signature(kToken, "https://example.com:8443/voice", params);
  EXPECT_TRUE(twilio_signature_valid(kToken, "https://example.com:8443/voice", params, custom));
  EXPECT_FALSE(twilio_signature_valid(kToken, "https://example.com/voice", params, custom));
  EXPECT_FALSE(twilio_signature_valid(kToken, "https://example.com:443/voice", params, custom));
}

TEST(TwilioSignature, RefusesForgeries) {
  const auto params = documented_params();
  EXPECT_FALSE(twilio_signature_valid("54321", kUrl, params, kDocumentedSignature));
  auto tampered = params;
  tampered[1].value = "9999";
  EXPECT_FALSE(twilio_signature_valid(kToken, kUrl, tampered, kDocumentedSignature));
  auto extra = params;
  extra.push_back({"Digits", "1"});
  EXPECT_FALSE(twilio_signature_valid(kToken, kUrl, extra, kDocumentedSignature));
  auto missing = params;
  missing.pop_back();
  EXPECT_FALSE(twilio_signature_valid(kToken, kUrl, missing, kDocumentedSignature));
  // A pair split differently concatenates to the same text, and so it signs the same:
  // the scheme's own weakness, shown here so that nobody relies on it.
  std::vector<FormField> shifted = params;
  shifted[1] = {"Digit", "s1234"};
  EXPECT_TRUE(twilio_signature_valid(kToken, kUrl, shifted, kDocumentedSignature));
  EXPECT_FALSE(twilio_signature_valid(kToken, "https://mycompany.com/myapp.php?foo=1&bar=3", params,
                                      kDocumentedSignature));
  EXPECT_FALSE(twilio_signature_valid(kToken, "http://mycompany.com/myapp.php?foo=1&bar=2", params,
                                      kDocumentedSignature));
}

TEST(TwilioSignature, RefusesEmptyTruncatedAndPaddedSignatures) {
  const auto params = documented_params();
  EXPECT_FALSE(twilio_signature_valid(kToken, kUrl, params, ""));
  EXPECT_FALSE(twilio_signature_valid(kToken, kUrl, params, kDocumentedSignature.substr(0, 27)));
  EXPECT_FALSE(twilio_signature_valid(kToken, kUrl, params, std::string(kDocumentedSignature) + " "));
  EXPECT_FALSE(twilio_signature_valid(kToken, kUrl, params, "gvWf1cFY/Q7PnoempGyD5oXAezc="));
}

TEST(Twiml, ConnectStreamWithParameters) {
  const TwimlStream stream{.url = "wss://edge.example.com/twilio/stream?x=1&y=2",
                           .parameters = {{"session", "abc"}, {"caller", "+14158675310"}}};
  EXPECT_EQ(twiml_connect_stream(stream),
            R"(<?xml version="1.0" encoding="UTF-8"?><Response><Connect>)"
            R"(<Stream url="wss://edge.example.com/twilio/stream?x=1&amp;y=2">)"
            R"(<Parameter name="session" value="abc"/><Parameter name="caller" value="+14158675310"/>)"
            R"(</Stream></Connect></Response>)");
}

TEST(Twiml, ConnectStreamWithoutParameters) {
  EXPECT_EQ(twiml_connect_stream({.url = "wss://e/s", .parameters = {}}),
            R"(<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="wss://e/s"/>)"
            R"(</Connect></Response>)");
}

TEST(Twiml, HostileValuesCannotInjectElements) {
  const std::string twiml = twiml_connect_stream(
      {.url = "wss://e/s\"><Hangup/>", .parameters = {{"n\"><Hangup/>", "\"><Hangup/>"}}});
  EXPECT_EQ(twiml.find("<Hangup"), std::string::npos) << twiml;
  EXPECT_NE(twiml.find(R"(value="&quot;&gt;&lt;Hangup/&gt;")"), std::string::npos) << twiml;
  EXPECT_NE(twiml.find(R"(url="wss://e/s&quot;&gt;&lt;Hangup/&gt;")"), std::string::npos) << twiml;
  // Exactly the elements we wrote: one Stream, one Parameter.
  size_t elements = 0;
  for (char c : twiml) elements += c == '<';
  EXPECT_EQ(elements,
            1u /* <?xml */ + 3u /* Response Connect Stream */ + 1u /* Parameter */ + 3u /* closes */);
}

TEST(Twiml, Reject) {
  EXPECT_EQ(twiml_reject("busy"),
            R"(<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="busy"/></Response>)");
  EXPECT_EQ(twiml_reject("rejected"),
            R"(<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="rejected"/></Response>)");
  for (const char* other : {"", "Busy", "\"/><Dial>1</Dial>", "full"})
    EXPECT_EQ(twiml_reject(other), twiml_reject("rejected")) << other;
}

TEST(XmlAttributeEscape, EscapesMarkupQuotesAndControlCharacters) {
  EXPECT_EQ(xml_attribute_escape(R"(a&b<c>d"e'f)"), "a&amp;b&lt;c&gt;d&quot;e&apos;f");
  EXPECT_EQ(xml_attribute_escape("t\tn\nr\r"), "t&#9;n&#10;r&#13;");
  EXPECT_EQ(xml_attribute_escape(std::string("a\0b\x01\x1F\x7F", 6)), "ab\x7F");
  EXPECT_EQ(xml_attribute_escape("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(xml_attribute_escape("&amp;"), "&amp;amp;");  // escaping is not idempotent, and must not be
  EXPECT_EQ(xml_attribute_escape(""), "");
}

}  // namespace
}  // namespace rtce
