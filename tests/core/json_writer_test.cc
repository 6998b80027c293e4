// Tests of core/json_writer: string escaping and comma placement; and of
// core/refused_json, the refused delivery's members.

#include "core/json_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/refused_json.h"

namespace eventfold {
namespace {

std::string Quoted(std::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

TEST(JsonWriterTest, EscapesQuotesAndBackslash) {
  EXPECT_EQ(Quoted(""), R"("")");
  EXPECT_EQ(Quoted("plain"), R"("plain")");
  EXPECT_EQ(Quoted(R"(a"b)"), R"("a\"b")");
  EXPECT_EQ(Quoted(R"(a\b)"), R"("a\\b")");
  EXPECT_EQ(Quoted(R"(\")"), R"("\\\"")");
  // Solidus needs no escape.
  EXPECT_EQ(Quoted("a/b"), R"("a/b")");
}

TEST(JsonWriterTest, EscapesControlCharacters) {
  EXPECT_EQ(Quoted("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(Quoted("\x1f"), R"("\u001f")");
  EXPECT_EQ(Quoted("\x01"), R"("\u0001")");
  EXPECT_EQ(Quoted("\x0b"), R"("\u000b")");
  EXPECT_EQ(Quoted(std::string("a\0b", 3)), R"("a\u0000b")");
  EXPECT_EQ(Quoted("\x20"), "\" \"");
  EXPECT_EQ(Quoted("\x7f"), "\"\x7f\"");
  // Every control character comes out escaped, never raw.
  for (int c = 0; c < 0x20; ++c) {
    const std::string q = Quoted(std::string(1, static_cast<char>(c)));
    ASSERT_EQ(q.front(), '"');
    ASSERT_EQ(q[1], '\\') << c;
    for (char ch : q) ASSERT_GE(static_cast<unsigned char>(ch), 0x20) << c;
  }
}

TEST(JsonWriterTest, Utf8PassesThrough) {
  EXPECT_EQ(Quoted("\xe0\xb8\xbf 1500"), "\"\xe0\xb8\xbf 1500\"");  // ฿
  EXPECT_EQ(Quoted("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  EXPECT_EQ(Quoted("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"");
}

TEST(JsonWriterTest, AppendsToExistingText) {
  std::string out = "x=";
  AppendJsonString("y", &out);
  EXPECT_EQ(out, "x=\"y\"");
}

TEST(JsonWriterTest, EmptyContainers) {
  EXPECT_EQ(JsonWriter().BeginObject().EndObject().str(), "{}");
  EXPECT_EQ(JsonWriter().BeginArray().EndArray().str(), "[]");
  EXPECT_EQ(
      JsonWriter().BeginArray().BeginObject().EndObject().BeginArray().EndArray().EndArray().str(),
      "[{},[]]");
}

TEST(JsonWriterTest, CommasInNestedObjectsAndArrays) {
  JsonWriter w;
  w.BeginObject()
      .Key("a")
      .Int(1)
      .Key("b")
      .BeginArray()
      .Int(1)
      .String("x")
      .BeginObject()
      .EndObject()
      .BeginArray()
      .Null()
      .Bool(true)
      .EndArray()
      .Bool(false)
      .EndArray()
      .Key("c")
      .BeginObject()
      .Key("d")
      .Null()
      .Key("e")
      .BeginObject()
      .Key("f")
      .Uint(18446744073709551615ull)
      .EndObject()
      .EndObject()
      .Key("g")
      .String("h")
      .EndObject();
  EXPECT_EQ(w.str(), R"({"a":1,"b":[1,"x",{},[null,true],false],)"
                     R"("c":{"d":null,"e":{"f":18446744073709551615}},"g":"h"})");
}

TEST(JsonWriterTest, TopLevelArrayOfObjects) {
  JsonWriter w;
  w.BeginArray();
  for (int i = 0; i < 3; ++i) w.BeginObject().Key("i").Int(i).EndObject();
  w.EndArray();
  EXPECT_EQ(w.str(), R"([{"i":0},{"i":1},{"i":2}])");
}

TEST(JsonWriterTest, KeysAreEscaped) {
  JsonWriter w;
  w.BeginObject().Key("a\"b\n").Int(1).EndObject();
  EXPECT_EQ(w.str(), R"({"a\"b\n":1})");
}

TEST(JsonWriterTest, ScalarsAndRaw) {
  JsonWriter w;
  w.BeginArray()
      .Int(INT64_MIN)
      .Int(0)
      .Int(-1)
      .Uint(0)
      .Raw(R"({"x":1.50})")
      .Raw("[1, 2]")
      .OptionalInt(std::nullopt)
      .OptionalInt(7)
      .Double(1.5)
      .EndArray();
  EXPECT_EQ(w.str(), R"([-9223372036854775808,0,-1,0,{"x":1.50},[1, 2],null,7,1.500])");
}

TEST(JsonWriterTest, RawAsObjectMember) {
  JsonWriter w;
  w.BeginObject().Key("f").Raw("\"v\"").Key("g").Raw("{}").EndObject();
  EXPECT_EQ(w.str(), R"({"f":"v","g":{}})");
}

TEST(JsonWriterTest, NonFiniteDoubleIsNull) {
  JsonWriter w;
  w.BeginArray().Double(1.0 / 0.0).Double(0.0 / 0.0).EndArray();
  EXPECT_EQ(w.str(), "[null,null]");
}

TEST(JsonWriterTest, TakeMovesTheText) {
  JsonWriter w;
  w.BeginObject().Key("k").String("v").EndObject();
  EXPECT_EQ(w.Take(), R"({"k":"v"})");
}

// A header name sent twice is one member (values joined as RFC 9110 §5.3
// combines field lines), in the first one's spelling and place: a key
// written twice would be read as its last value alone.
TEST(RefusedJsonTest, AHeaderSentTwiceIsOneMember) {
  RefusedDelivery r;
  r.status = 400;
  r.outcome = Outcome::kInvalid;
  r.reason = "body: not JSON";
  r.headers = {{"X-Forwarded-For", "10.0.0.1"},
               {"User-Agent", "rr/1"},
               {"x-forwarded-for", "10.0.0.2"},
               {"X-FORWARDED-FOR", "10.0.0.3"}};
  JsonWriter w;
  w.BeginObject();
  WriteRefusedMembers(&w, r);
  w.EndObject();
  EXPECT_EQ(w.str(), R"({"status":400,"outcome":"invalid","reason":"body: not JSON","headers":)"
                     R"({"X-Forwarded-For":"10.0.0.1, 10.0.0.2, 10.0.0.3","User-Agent":"rr/1"},)"
                     R"("body_bytes":0,"body_prefix":""})");
}

}  // namespace
}  // namespace eventfold
