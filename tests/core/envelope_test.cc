// Tests of core/envelope: NDJSON ingest lines (docs/SPEC.md §5.2).

#include "core/envelope.h"

#include <gtest/gtest.h>

#include <string>

namespace eventfold {
namespace {

Delivery ParseOk(const std::string& line) {
  Result<Delivery> d = ParseNdjsonLine(line);
  EXPECT_TRUE(d.ok()) << line << ": " << d.status().message();
  return d.ok() ? *d : Delivery{};
}

TEST(EnvelopeTest, BareBodyPassesThroughVerbatim) {
  const std::string line = R"({"event_id":"e1","type":"receipt.issued",)"
                           R"("occurred_at":"2026-11-29T10:15:30Z","data":{"receipt_id":"r1"}})";
  const Delivery d = ParseOk(line);
  EXPECT_TRUE(d.headers.empty());
  EXPECT_EQ(d.body, line);
  EXPECT_FALSE(IsEnvelope(line));
}

TEST(EnvelopeTest, NonJsonAndNonObjectLinesAreBareBodies) {
  for (const std::string line : {"not json", "", "[1,2]", "42", "{", R"({"body":1})",
                                 R"({"headers":{"X":"y"}})", R"({"body":["x"]})"}) {
    const Delivery d = ParseOk(line);
    EXPECT_EQ(d.body, line);
    EXPECT_TRUE(d.headers.empty()) << line;
    EXPECT_FALSE(IsEnvelope(line)) << line;
  }
}

TEST(EnvelopeTest, EnvelopeYieldsHeadersAndUnescapedBody) {
  const std::string line = R"({"headers":{"X-RR-Event-Id":"e1","X-RR-Signature":"t=1,v1=ab"},)"
                           R"("body":"{\"event_id\":\"e1\",\"note\":\"a\\\"b\\u00e9\"}"})";
  const Delivery d = ParseOk(line);
  EXPECT_EQ(d.body, R"({"event_id":"e1","note":"a\"b\u00e9"})");
  ASSERT_EQ(d.headers.size(), 2u);
  EXPECT_EQ(d.headers[0], (std::pair<std::string, std::string>{"X-RR-Event-Id", "e1"}));
  EXPECT_EQ(d.headers[1], (std::pair<std::string, std::string>{"X-RR-Signature", "t=1,v1=ab"}));
  EXPECT_TRUE(IsEnvelope(line));
}

TEST(EnvelopeTest, BodyBytesAreExact) {
  // Whitespace and spelling inside the body survive: signatures cover them.
  const std::string line = R"({"body":"{ \"a\" : 1.50 ,\n\t\"b\":\"\\/\" }","headers":{}})";
  const Delivery d = ParseOk(line);
  EXPECT_EQ(d.body, "{ \"a\" : 1.50 ,\n\t\"b\":\"\\/\" }");
  EXPECT_TRUE(d.headers.empty());
  EXPECT_TRUE(IsEnvelope(line));
}

TEST(EnvelopeTest, EnvelopeWithoutHeaders) {
  const Delivery d = ParseOk(R"({"body":"{}"})");
  EXPECT_EQ(d.body, "{}");
  EXPECT_TRUE(d.headers.empty());
}

TEST(EnvelopeTest, HeaderNamesAndValuesAreUnescaped) {
  const Delivery d = ParseOk(R"({"headers":{"X-A\u0042":"v\"1"},"body":"x"})");
  ASSERT_EQ(d.headers.size(), 1u);
  EXPECT_EQ(d.headers[0].first, "X-AB");
  EXPECT_EQ(d.headers[0].second, "v\"1");
}

TEST(EnvelopeTest, HeadersNotAnObjectOfStringsRefused) {
  for (const std::string line :
       {R"({"headers":["X-RR-Event-Id","e1"],"body":"{}"})",
        R"({"headers":"X-RR-Event-Id: e1","body":"{}"})",
        R"({"headers":{"X-RR-Event-Id":1},"body":"{}"})",
        R"({"headers":{"X-A":"ok","X-B":null},"body":"{}"})",
        R"({"headers":{"X-A":{"v":"x"}},"body":"{}"})", R"({"body":"{}","headers":null})"}) {
    Result<Delivery> d = ParseNdjsonLine(line);
    EXPECT_FALSE(d.ok()) << line;
    if (!d.ok()) {
      EXPECT_TRUE(d.status().IsInvalidArgument());
      EXPECT_EQ(d.status().message().rfind("headers: ", 0), 0u) << d.status().message();
    }
    EXPECT_TRUE(IsEnvelope(line)) << line;
  }
}

TEST(EnvelopeTest, BodyWithEventIdIsABareBody) {
  // A sender's own body may have a string member "body"; event_id marks it
  // as an event rather than an envelope.
  for (const std::string line : {R"({"body":"hello","event_id":"e1","type":"note.sent"})",
                                 R"({"event_id":"e1","body":"hello","headers":{"a":"b"}})",
                                 R"({"event_id":"e1","body":"hello","headers":[1]})"}) {
    const Delivery d = ParseOk(line);
    EXPECT_EQ(d.body, line);
    EXPECT_TRUE(d.headers.empty());
    EXPECT_FALSE(IsEnvelope(line)) << line;
  }
}

// Lines far over a body's size (parsed with a parser of their own) read
// as small ones do, and small lines after them still parse: a bare body,
// an envelope and its body, each side of the size, in turn.
TEST(EnvelopeTest, LinesOfAnySizeParseTheSame) {
  for (const size_t pad : {size_t{16}, size_t{5} << 20, size_t{32}, size_t{6} << 20}) {
    SCOPED_TRACE("padding " + std::to_string(pad));
    const std::string bare = R"({"event_id":"e1","pad":")" + std::string(pad, 'x') + R"("})";
    const Delivery d = ParseOk(bare);
    EXPECT_TRUE(d.headers.empty());
    EXPECT_EQ(d.body, bare);
    // The body as the envelope's JSON string holds it: quotes escaped.
    const std::string body = R"({\"pad\":\")" + std::string(pad, 'y') + R"(\"})";
    const Delivery e = ParseOk(R"({"headers":{"X-A":"v"},"body":")" + body + R"("})");
    ASSERT_EQ(e.headers.size(), 1u);
    EXPECT_EQ(e.headers[0].second, "v");
    EXPECT_EQ(e.body, R"({"pad":")" + std::string(pad, 'y') + R"("})");
  }
}

}  // namespace
}  // namespace eventfold
