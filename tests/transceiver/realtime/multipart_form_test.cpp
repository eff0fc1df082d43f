// multipart_form_test.cpp — the multipart/form-data parser on the bodies real clients send
// (the `openai` SDKs' sdp + session form) and on hostile ones: boundaries, missing and
// repeated parts, oversize parts, truncation.
#include "multipart_form.h"

#include <gtest/gtest.h>

#include <string>

namespace rtce {
namespace {

constexpr size_t kLimit = 65536;
const std::string kOffer = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n";

std::string sdk_form(const std::string& boundary) {
  // The shape undici's FormData writes for fetch(), as the openai SDK posts it.
  return "--" + boundary +
         "\r\nContent-Disposition: form-data; name=\"sdp\"\r\nContent-Type: application/sdp\r\n\r\n" +
         kOffer + "\r\n--" + boundary +
         "\r\nContent-Disposition: form-data; name=\"session\"\r\nContent-Type: application/json\r\n\r\n"
         "{\"type\":\"realtime\",\"model\":\"gpt-realtime\"}\r\n--" +
         boundary + "--\r\n";
}

TEST(MultipartForm, ParsesTheSdkFormWithBothParts) {
  const std::string b = "formdata-undici-0123456789";
  const std::string body = sdk_form(b);
  auto r = parse_multipart_form("multipart/form-data; boundary=" + b, body, kLimit);
  ASSERT_FALSE(r.error) << multipart_error_name(*r.error);
  ASSERT_EQ(r.form.parts.size(), 2u);
  const FormPart* sdp = r.form.find("sdp");
  ASSERT_NE(sdp, nullptr);
  EXPECT_EQ(sdp->content_type, "application/sdp");
  EXPECT_EQ(sdp->content, kOffer);  // the CRLF before the delimiter belongs to it, not the SDP
  const FormPart* session = r.form.find("session");
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->content_type, "application/json");
  EXPECT_EQ(session->content, "{\"type\":\"realtime\",\"model\":\"gpt-realtime\"}");
}

TEST(MultipartForm, BoundaryParameterForms) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=abc"), "abc");
  EXPECT_EQ(multipart_boundary("multipart/form-data;BOUNDARY=\"a b;c\""), "a b;c");
  EXPECT_EQ(multipart_boundary("multipart/form-data; charset=utf-8; boundary=x-1"), "x-1");
  EXPECT_FALSE(multipart_boundary("multipart/form-data"));
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=\"unterminated"));
  // A quoted boundary with a space and ':' (both bchars) splits the body correctly; ';' is
  // not a bchar, so a boundary holding one is refused even though it parses.
  auto r = parse_multipart_form("multipart/form-data; boundary=\"a b:c\"", sdk_form("a b:c"), kLimit);
  ASSERT_FALSE(r.error) << multipart_error_name(*r.error);
  EXPECT_EQ(r.form.parts.size(), 2u);
  EXPECT_EQ(parse_multipart_form("multipart/form-data; boundary=\"a b;c\"", sdk_form("a b;c"), kLimit).error,
            MultipartError::bad_boundary);
}

TEST(MultipartForm, HostileBoundariesAreRefused) {
  const std::string body = sdk_form("x");
  EXPECT_EQ(parse_multipart_form("multipart/form-data", body, kLimit).error, MultipartError::no_boundary);
  EXPECT_EQ(parse_multipart_form("multipart/form-data; boundary=", body, kLimit).error,
            MultipartError::bad_boundary);
  EXPECT_EQ(parse_multipart_form("multipart/form-data; boundary=" + std::string(71, 'a'), body, kLimit).error,
            MultipartError::bad_boundary);
  EXPECT_EQ(parse_multipart_form("multipart/form-data; boundary=\"ends \"", body, kLimit).error,
            MultipartError::bad_boundary);
  EXPECT_EQ(parse_multipart_form("multipart/form-data; boundary=a\x01z", body, kLimit).error,
            MultipartError::bad_boundary);
  // 70 characters is the most RFC 2046 allows, and works.
  const std::string longest(70, 'b');
  EXPECT_FALSE(
      parse_multipart_form("multipart/form-data; boundary=" + longest, sdk_form(longest), kLimit).error);
  // The body does not use the announced boundary.
  EXPECT_EQ(parse_multipart_form("multipart/form-data; boundary=other", body, kLimit).error,
            MultipartError::no_opening_delimiter);
}

TEST(MultipartForm, PreambleEpilogueAndBareLineFeeds) {
  std::string body = "this is a preamble\r\n" + sdk_form("q") + "epilogue bytes --q-- ignored";
  auto r = parse_multipart_form("multipart/form-data; boundary=q", body, kLimit);
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.form.parts.size(), 2u);
  const std::string lf = "--q\nContent-Disposition: form-data; name=\"sdp\"\n\nv=0\n--q--\n";
  r = parse_multipart_form("multipart/form-data; boundary=q", lf, kLimit);
  ASSERT_FALSE(r.error);
  ASSERT_EQ(r.form.parts.size(), 1u);
  EXPECT_EQ(r.form.parts[0].content, "v=0");
}

TEST(MultipartForm, BoundaryTextInsideContentThatIsNotADelimiterIsContent) {
  const std::string body =
      "--q\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nline\r\n--qq not a delimiter\r\n--q--\r\n";
  auto r = parse_multipart_form("multipart/form-data; boundary=q", body, kLimit);
  ASSERT_FALSE(r.error) << multipart_error_name(*r.error);
  EXPECT_EQ(r.form.parts[0].content, "line\r\n--qq not a delimiter");
}

TEST(MultipartForm, EmptyPartContent) {
  const std::string body = "--q\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n\r\n--q--";
  auto r = parse_multipart_form("multipart/form-data; boundary=q", body, kLimit);
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.form.parts[0].content, "");
}

TEST(MultipartForm, MissingRepeatedAndOversizeParts) {
  const std::string type = "multipart/form-data; boundary=q";
  // No Content-Disposition, or one without a name, or not form-data.
  EXPECT_EQ(parse_multipart_form(type, "--q\r\nContent-Type: text/plain\r\n\r\nx\r\n--q--", kLimit).error,
            MultipartError::no_part_name);
  EXPECT_EQ(
      parse_multipart_form(type, "--q\r\nContent-Disposition: form-data\r\n\r\nx\r\n--q--", kLimit).error,
      MultipartError::no_part_name);
  EXPECT_EQ(parse_multipart_form(type, "--q\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nx\r\n--q--",
                                 kLimit)
                .error,
            MultipartError::no_part_name);
  const std::string part_a = "--q\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n";
  EXPECT_EQ(parse_multipart_form(type, part_a + part_a + "--q--", kLimit).error,
            MultipartError::duplicate_part);
  // A part one byte over the limit; exactly at it is fine.
  const std::string big =
      "--q\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n" + std::string(101, 'z') + "\r\n--q--";
  EXPECT_EQ(parse_multipart_form(type, big, 100).error, MultipartError::part_too_large);
  EXPECT_FALSE(parse_multipart_form(type, big, 101).error);
  // Too many parts.
  std::string many;
  for (size_t i = 0; i <= kMaxFormParts; i++)
    many += "--q\r\nContent-Disposition: form-data; name=\"p" + std::to_string(i) + "\"\r\n\r\nx\r\n";
  EXPECT_EQ(parse_multipart_form(type, many + "--q--", kLimit).error, MultipartError::too_many_parts);
}

TEST(MultipartForm, TruncatedAndBrokenBodies) {
  const std::string type = "multipart/form-data; boundary=q";
  const std::string whole = sdk_form("q");
  // Every cut of a valid body is either refused or (when the cut falls in the epilogue)
  // the whole form: never a crash, never a part that runs past the cut.
  for (size_t cut = 0; cut < whole.size(); cut++) {
    auto r = parse_multipart_form(type, std::string_view(whole).substr(0, cut), kLimit);
    if (!r.error) {
      EXPECT_EQ(r.form.parts.size(), 2u) << "cut at " << cut;
      EXPECT_GE(cut, whole.size() - 4) << "cut at " << cut;
    }
  }
  EXPECT_EQ(
      parse_multipart_form(type, "--q\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx", kLimit).error,
      MultipartError::no_closing_delimiter);
  EXPECT_EQ(parse_multipart_form(type, "--qjunk\r\n", kLimit).error, MultipartError::bad_delimiter_line);
  EXPECT_EQ(parse_multipart_form(type, "--q\r\nno colon here\r\n\r\nx\r\n--q--", kLimit).error,
            MultipartError::bad_part_headers);
  EXPECT_EQ(
      parse_multipart_form(type, "--q\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--q--", kLimit)
          .error,
      MultipartError::bad_part_headers);
  const std::string huge_header = "--q\r\nX-Pad: " + std::string(2000, 'p') + "\r\n\r\nx\r\n--q--";
  EXPECT_EQ(parse_multipart_form(type, huge_header, kLimit).error, MultipartError::part_headers_too_large);
}

TEST(MultipartForm, EveryErrorHasANameAndAMessage) {
  for (auto e :
       {MultipartError::no_boundary, MultipartError::part_too_large, MultipartError::duplicate_part}) {
    EXPECT_FALSE(multipart_error_name(e).empty());
    EXPECT_FALSE(multipart_error_message(e).empty());
  }
  EXPECT_EQ(multipart_error_name(MultipartError::part_too_large), "part_too_large");
}

}  // namespace
}  // namespace rtce
