// Tests of core/decode: every field rule of docs/SPEC.md §2 and the event-id header.

#include "core/decode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "eventfold/ingest.h"
#include "eventfold/profile.h"
#include "tests/common/test_seed.h"

namespace eventfold {
namespace {

// A body built from raw JSON snippets; nullopt leaves the member out.
struct BodyParts {
  std::optional<std::string> event_id = R"("evt_1")";
  std::optional<std::string> type = R"("receipt.issued")";
  std::optional<std::string> occurred_at = R"("2026-11-29T10:15:30.123Z")";
  std::optional<std::string> version = "1";
  std::optional<std::string> data = R"({"receipt_id":"rcp_1","amount":1500})";
  std::string extra;  // appended verbatim as more members, e.g. ,"x":1

  std::string Json() const {
    std::string out = "{";
    auto add = [&](const char* name, const std::optional<std::string>& v) {
      if (!v) return;
      if (out.size() > 1) out += ",";
      out += "\"";
      out += name;
      out += "\":";
      out += *v;
    };
    add("event_id", event_id);
    add("type", type);
    add("occurred_at", occurred_at);
    add("version", version);
    add("data", data);
    out += extra;
    out += "}";
    return out;
  }
};

// DecodeEvent, checked against the ingest's decode of the same body: an
// ingest decodes without keeping the data (DecodeEventWithoutData), so
// every case here holds for it too. It refuses what DecodeEvent refuses,
// with the same message, and accepts the rest with the same identity and
// route; DecodeData then reads the data DecodeEvent gives.
Result<DecodedEvent> Decode(const std::string& body,
                            const Profile& profile = Profile::ReceiptRoller()) {
  Result<DecodedEvent> whole = DecodeEvent(body, profile);
  const Result<DecodedEvent> lean = DecodeEventWithoutData(body, profile, RouteMembers(profile));
  EXPECT_EQ(lean.ok(), whole.ok()) << body;
  if (!whole.ok() || !lean.ok()) {
    EXPECT_EQ(lean.status().message(), whole.status().message()) << body;
    return whole;
  }
  EXPECT_FALSE(whole->without_data);
  EXPECT_TRUE(lean->without_data);
  Event identity = whole->event;
  identity.data.clear();
  EXPECT_EQ(lean->event, identity) << body;
  EXPECT_EQ(lean->entity, whole->entity) << body;
  EXPECT_EQ(lean->rank, whole->rank) << body;
  const Result<std::vector<Field>> data = DecodeData(body);
  EXPECT_TRUE(data.ok() && *data == whole->event.data) << body;
  return whole;
}

DecodedEvent DecodeOk(const std::string& body, const Profile& profile = Profile::ReceiptRoller()) {
  Result<DecodedEvent> r = Decode(body, profile);
  EXPECT_TRUE(r.ok()) << body << "\n-> " << r.status().message();
  return r.ok() ? *r : DecodedEvent{};
}

// Decoding must fail with kInvalidArgument and a message "<field>: ...".
std::string Refusal(const std::string& body, const Profile& profile = Profile::ReceiptRoller()) {
  Result<DecodedEvent> r = Decode(body, profile);
  EXPECT_FALSE(r.ok()) << body << "\n-> decoded";
  if (r.ok()) return "<decoded>";
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  return r.status().message();
}

#define EXPECT_REFUSED_WITH_FIELD(body, field)              \
  do {                                                      \
    const std::string msg_ = Refusal(body);                 \
    EXPECT_EQ(msg_.rfind(std::string(field) + ": ", 0), 0u) \
        << "body: " << (body) << "\nmessage: " << msg_;     \
  } while (0)

std::string FieldJson(const std::vector<eventfold::Field>& fields, const std::string& name) {
  for (const auto& f : fields) {
    if (f.name == name) return f.json;
  }
  return "<absent>";
}

// ---------------------------------------------------------------- valid

// kOutcomeCount covers every outcome with a name, and nothing past them:
// tables indexed by outcome (the receiver's counters) stay in step.
TEST(DecodeTest, OutcomeCountCoversEveryNamedOutcome) {
  for (size_t i = 0; i < kOutcomeCount; ++i) {
    EXPECT_NE(OutcomeName(static_cast<Outcome>(i)), "unknown") << i;
  }
  EXPECT_EQ(OutcomeName(static_cast<Outcome>(kOutcomeCount)), "unknown");
}

TEST(DecodeTest, ValidBodyDecodesAndRoutes) {
  const DecodedEvent d = DecodeOk(BodyParts{}.Json());
  EXPECT_EQ(d.event.event_id, "evt_1");
  EXPECT_EQ(d.event.type, "receipt.issued");
  EXPECT_EQ(d.event.occurred_at, 1795947330LL * 1000000 + 123000);
  ASSERT_TRUE(d.event.version.has_value());
  EXPECT_EQ(*d.event.version, 1);
  ASSERT_EQ(d.event.data.size(), 2u);
  EXPECT_EQ(d.event.data[0], (eventfold::Field{"receipt_id", "\"rcp_1\""}));
  EXPECT_EQ(d.event.data[1], (eventfold::Field{"amount", "1500"}));
  ASSERT_TRUE(d.entity.has_value());
  EXPECT_EQ(*d.entity, (EntityRef{"receipt", "rcp_1"}));
  EXPECT_EQ(d.rank, 0u);
}

TEST(DecodeTest, RankIsPositionInTransitionList) {
  BodyParts b;
  b.type = R"("receipt.refunded")";
  EXPECT_EQ(DecodeOk(b.Json()).rank, 1u);
  b.type = R"("product.deleted")";
  b.data = R"({"product_id":"p1"})";
  const DecodedEvent d = DecodeOk(b.Json());
  EXPECT_EQ(d.rank, 2u);
  EXPECT_EQ(*d.entity, (EntityRef{"product", "p1"}));
  b.type = R"("inventory.updated")";
  const DecodedEvent inv = DecodeOk(b.Json());
  EXPECT_EQ(inv.rank, 0u);
  EXPECT_EQ(*inv.entity, (EntityRef{"inventory", "p1"}));
}

TEST(DecodeTest, MemberOrderDoesNotMatter) {
  const std::string body =
      R"({"data":{"receipt_id":"r9"},"version":3,"occurred_at":"2026-11-29T10:15:30Z",)"
      R"("type":"receipt.issued","event_id":"e9"})";
  const DecodedEvent d = DecodeOk(body);
  EXPECT_EQ(d.event.event_id, "e9");
  EXPECT_EQ(*d.event.version, 3);
  EXPECT_EQ(d.entity->id, "r9");
}

TEST(DecodeTest, WhitespaceAroundTheObjectIsAllowed) {
  DecodeOk(" \n\t" + BodyParts{}.Json() + "\r\n ");
}

TEST(DecodeTest, ExtraMembersAreIgnored) {
  BodyParts b;
  b.extra = R"(,"livemode":true,"meta":{"a":[1,{"b":null}],"c":"x"},"n":-1.5e3)";
  const DecodedEvent d = DecodeOk(b.Json());
  EXPECT_EQ(d.event.event_id, "evt_1");
  EXPECT_EQ(d.event.data.size(), 2u);
}

// ---------------------------------------------------------------- event_id

TEST(DecodeTest, EventIdMissing) {
  BodyParts b;
  b.event_id.reset();
  EXPECT_EQ(Refusal(b.Json()), "event_id: required");
}

TEST(DecodeTest, EventIdNotAString) {
  for (const char* v : {"123", "null", "true", "[\"e\"]", "{}"}) {
    BodyParts b;
    b.event_id = v;
    EXPECT_REFUSED_WITH_FIELD(b.Json(), "event_id");
  }
}

TEST(DecodeTest, EventIdNotAStringAfterAnotherBadStringField) {
  // Each wrongly typed field must be reported as such, whichever comes first.
  const std::string body =
      R"({"type":7,"event_id":8,"occurred_at":"2026-11-29T10:15:30Z","data":{}})";
  EXPECT_EQ(Refusal(body), "event_id: must be a string");
}

TEST(DecodeTest, EventIdEmpty) {
  BodyParts b;
  b.event_id = R"("")";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "event_id");
}

TEST(DecodeTest, EventIdLength) {
  BodyParts b;
  b.event_id = "\"" + std::string(128, 'a') + "\"";
  EXPECT_EQ(DecodeOk(b.Json()).event.event_id, std::string(128, 'a'));
  b.event_id = "\"" + std::string(129, 'a') + "\"";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "event_id");
}

TEST(DecodeTest, EventIdCharacters) {
  BodyParts b;
  b.event_id = R"("AZaz09._:-")";
  EXPECT_EQ(DecodeOk(b.Json()).event.event_id, "AZaz09._:-");
  for (const char* bad : {R"("evt 1")", R"("evt/1")", R"("evt+1")", R"("\u00e9vt")",
                          "\"\xc3\xa9vt\"", R"("evt\n1")", R"("evt\u00001")"}) {
    b.event_id = bad;
    EXPECT_REFUSED_WITH_FIELD(b.Json(), "event_id");
  }
}

TEST(DecodeTest, IsValidEventId) {
  EXPECT_TRUE(IsValidEventId("a"));
  EXPECT_TRUE(IsValidEventId(std::string(128, 'Z')));
  EXPECT_FALSE(IsValidEventId(""));
  EXPECT_FALSE(IsValidEventId(std::string(129, 'Z')));
  EXPECT_FALSE(IsValidEventId("a b"));
  EXPECT_FALSE(IsValidEventId(std::string("a\0b", 3)));
}

// ---------------------------------------------------------------- type

TEST(DecodeTest, TypeMissing) {
  BodyParts b;
  b.type.reset();
  EXPECT_EQ(Refusal(b.Json()), "type: required");
}

TEST(DecodeTest, TypeNotAString) {
  for (const char* v : {"1", "null", "false", "[]", "{}"}) {
    BodyParts b;
    b.type = v;
    EXPECT_REFUSED_WITH_FIELD(b.Json(), "type");
  }
}

TEST(DecodeTest, TypeShape) {
  for (const char* v :
       {R"("receipt")", R"("")", R"("receipt.")", R"(".issued")", R"("receipt..issued")", R"(".")",
        R"("receipt issued")", R"("receipt. issued")"}) {
    BodyParts b;
    b.type = v;
    EXPECT_REFUSED_WITH_FIELD(b.Json(), "type");
  }
  BodyParts b;
  b.type = R"("a.b.c")";
  b.data = "{}";
  EXPECT_EQ(DecodeOk(b.Json()).event.type, "a.b.c");
}

// ---------------------------------------------------------------- occurred_at

TEST(DecodeTest, OccurredAtMissing) {
  BodyParts b;
  b.occurred_at.reset();
  EXPECT_EQ(Refusal(b.Json()), "occurred_at: required");
}

TEST(DecodeTest, OccurredAtInvalid) {
  BodyParts b;
  b.occurred_at = R"("2026-13-01T00:00:00Z")";
  EXPECT_EQ(Refusal(b.Json()), "occurred_at: month out of range 01-12");
  for (const char* v : {R"("2026-11-29T10:15:30")", R"("2026-02-29T00:00:00Z")", R"("yesterday")",
                        R"("")", "1795947330", "null"}) {
    b.occurred_at = v;
    EXPECT_REFUSED_WITH_FIELD(b.Json(), "occurred_at");
  }
}

TEST(DecodeTest, OccurredAtOffsetAndEscapes) {
  BodyParts b;
  b.occurred_at = R"("2026-11-29T12:15:30+02:00")";
  EXPECT_EQ(DecodeOk(b.Json()).event.occurred_at, 1795947330LL * 1000000);
  // A JSON escape inside the string is decoded before the timestamp rules.
  b.occurred_at = R"("2026-11-29T10:15:30\u005a")";
  EXPECT_EQ(DecodeOk(b.Json()).event.occurred_at, 1795947330LL * 1000000);
}

// ---------------------------------------------------------------- version

TEST(DecodeTest, VersionAbsentAndNull) {
  BodyParts b;
  b.version.reset();
  EXPECT_FALSE(DecodeOk(b.Json()).event.version.has_value());
  b.version = "null";
  EXPECT_FALSE(DecodeOk(b.Json()).event.version.has_value());
}

TEST(DecodeTest, VersionValidValues) {
  BodyParts b;
  b.version = "0";
  EXPECT_EQ(DecodeOk(b.Json()).event.version, std::optional<int64_t>(0));
  b.version = "9223372036854775807";
  EXPECT_EQ(DecodeOk(b.Json()).event.version, std::optional<int64_t>(INT64_MAX));
  b.version = " 42 ";
  EXPECT_EQ(DecodeOk(b.Json()).event.version, std::optional<int64_t>(42));
}

TEST(DecodeTest, VersionInvalidValues) {
  for (const char* v : {"-1", "1.5", "1.0", "\"2\"", "1e2", "true", "[1]", "{}", "-0",
                        "9223372036854775808", "99999999999999999999999"}) {
    BodyParts b;
    b.version = v;
    EXPECT_REFUSED_WITH_FIELD(b.Json(), "version");
  }
}

// ---------------------------------------------------------------- data

TEST(DecodeTest, DataMissing) {
  BodyParts b;
  b.data.reset();
  EXPECT_EQ(Refusal(b.Json()), "data: required");
}

TEST(DecodeTest, DataNotAnObject) {
  for (const char* v : {"[]", "[{\"receipt_id\":\"r\"}]", "\"x\"", "1", "null", "true"}) {
    BodyParts b;
    b.data = v;
    EXPECT_REFUSED_WITH_FIELD(b.Json(), "data");
  }
}

TEST(DecodeTest, DataFieldsAreCompactJsonInBodyOrder) {
  BodyParts b;
  b.data =
      "{ \"receipt_id\" : \"rcp_1\" ,\n \"amount\" : 1.50 , \"neg\":-0.0e+1,"
      " \"note\" : \"a\\\"b\\u00e9\\n\" , \"utf8\":\"\xe0\xb8\xbf\","
      " \"nested\" : { \"x\" : [ 1 , 2 , { } , [ ] ] , \"y\" : null ,"
      " \"k\\\"q\" : \"v\" } ,"
      " \"t\" : true , \"f\":false , \"z\" : null }";
  const DecodedEvent d = DecodeOk(b.Json());
  const std::vector<eventfold::Field> want = {
      {"receipt_id", R"("rcp_1")"},
      {"amount", "1.50"},
      {"neg", "-0.0e+1"},
      {"note", R"("a\"b\u00e9\n")"},
      {"utf8", "\"\xe0\xb8\xbf\""},
      {"nested", R"({"x":[1,2,{},[]],"y":null,"k\"q":"v"})"},
      {"t", "true"},
      {"f", "false"},
      {"z", "null"},
  };
  EXPECT_EQ(d.event.data, want);
}

TEST(DecodeTest, DataMemberNamesAreUnescaped) {
  BodyParts b;
  b.data = R"({"receipt_id":"r1","a\u0062c":1})";
  const DecodedEvent d = DecodeOk(b.Json());
  EXPECT_EQ(FieldJson(d.event.data, "abc"), "1");
}

TEST(DecodeTest, EmptyDataForUnknownType) {
  BodyParts b;
  b.type = R"("widget.spun")";
  b.data = "{}";
  const DecodedEvent d = DecodeOk(b.Json());
  EXPECT_TRUE(d.event.data.empty());
  EXPECT_FALSE(d.entity.has_value());
}

// ---------------------------------------------------------------- key

TEST(DecodeTest, KeyMissingForKnownType) {
  BodyParts b;
  b.data = R"({"amount":1})";
  EXPECT_EQ(Refusal(b.Json()), "data.receipt_id: required");
  b.type = R"("product.created")";
  EXPECT_EQ(Refusal(b.Json()), "data.product_id: required");
}

TEST(DecodeTest, KeyIntegerIsDecimalText) {
  BodyParts b;
  b.data = R"({"receipt_id":42})";
  EXPECT_EQ(DecodeOk(b.Json()).entity->id, "42");
  b.data = R"({"receipt_id":-7})";
  EXPECT_EQ(DecodeOk(b.Json()).entity->id, "-7");
  b.data = R"({"receipt_id":9223372036854775807})";
  EXPECT_EQ(DecodeOk(b.Json()).entity->id, "9223372036854775807");
  // The stored field keeps the number as written.
  EXPECT_EQ(FieldJson(DecodeOk(b.Json()).event.data, "receipt_id"), "9223372036854775807");
}

TEST(DecodeTest, KeyIntegerBeyondInt64IsDecimalText) {
  // Still a JSON integer (docs/SPEC.md §4.4), e.g. a uint64 id from the sender.
  for (const char* v : {"18446744073709551615", "99999999999999999999", "-9223372036854775809"}) {
    BodyParts b;
    b.data = std::string(R"({"receipt_id":)") + v + "}";
    const DecodedEvent d = DecodeOk(b.Json());
    ASSERT_TRUE(d.entity.has_value()) << v;
    EXPECT_EQ(d.entity->id, v);
  }
}

TEST(DecodeTest, KeyOtherTypesRefused) {
  for (const char* v :
       {"42.0", "4.2", "1e2", "true", "false", "null", "{}", R"({"id":"x"})", "[\"x\"]", "[]"}) {
    BodyParts b;
    b.data = std::string(R"({"receipt_id":)") + v + "}";
    EXPECT_EQ(Refusal(b.Json()).rfind("data.receipt_id: ", 0), 0u) << v;
  }
}

TEST(DecodeTest, KeyEmptyStringRefused) {
  BodyParts b;
  b.data = R"({"receipt_id":""})";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "data.receipt_id");
}

TEST(DecodeTest, KeyStringIsUnescaped) {
  BodyParts b;
  b.data = R"({"receipt_id":"r\u0031\/x"})";
  const DecodedEvent d = DecodeOk(b.Json());
  EXPECT_EQ(d.entity->id, "r1/x");
  EXPECT_EQ(FieldJson(d.event.data, "receipt_id"), R"("r\u0031\/x")");
}

TEST(DecodeTest, KeyLength) {
  BodyParts b;
  b.data = R"({"receipt_id":")" + std::string(kMaxKeyBytes, 'k') + "\"}";
  EXPECT_EQ(DecodeOk(b.Json()).entity->id.size(), kMaxKeyBytes);
  b.data = R"({"receipt_id":")" + std::string(kMaxKeyBytes + 1, 'k') + "\"}";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "data.receipt_id");
}

TEST(DecodeTest, KeyWithNulRefused) {
  BodyParts b;
  b.data = R"({"receipt_id":"a\u0000b"})";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "data.receipt_id");
}

TEST(DecodeTest, UnknownTypeIsUnroutedAndNeedsNoKey) {
  BodyParts b;
  b.type = R"("invoice.paid")";
  b.data = R"({"receipt_id":true,"x":1})";
  const DecodedEvent d = DecodeOk(b.Json());
  EXPECT_FALSE(d.entity.has_value());
  EXPECT_EQ(d.event.type, "invoice.paid");
  EXPECT_EQ(d.event.data.size(), 2u);
}

TEST(DecodeTest, NestedKeyPath) {
  Result<Profile> p = Profile::FromJson(R"({"name":"shop","entities":[
      {"name":"order","key":"data.customer.id",
       "transitions":[{"type":"order.placed","from":["none"],"to":"placed"}]}]})");
  ASSERT_TRUE(p.ok()) << p.status().message();
  BodyParts b;
  b.type = R"("order.placed")";
  b.data = R"({"total":5,"customer":{"name":"Ann","id":"c_9"}})";
  const DecodedEvent d = DecodeOk(b.Json(), *p);
  ASSERT_TRUE(d.entity.has_value());
  EXPECT_EQ(*d.entity, (EntityRef{"order", "c_9"}));
  EXPECT_EQ(FieldJson(d.event.data, "customer"), R"({"name":"Ann","id":"c_9"})");

  b.data = R"({"customer":{"id":77}})";
  EXPECT_EQ(DecodeOk(b.Json(), *p).entity->id, "77");

  for (const char* data : {R"({"customer":{"name":"Ann"}})", R"({"customer":"c_9"})",
                           R"({"id":"c_9"})", R"({"customer":[{"id":"c_9"}]})"}) {
    b.data = data;
    EXPECT_EQ(Refusal(b.Json(), *p), "data.customer.id: required") << data;
  }
  b.data = R"({"customer":{"id":1.5}})";
  EXPECT_EQ(Refusal(b.Json(), *p).rfind("data.customer.id: ", 0), 0u);
  b.data = R"({"customer":{"id":1e30}})";
  EXPECT_EQ(Refusal(b.Json(), *p).rfind("data.customer.id: ", 0), 0u);
  // The built-in profile does not know the type.
  b.data = R"({"customer":{"id":"c_9"}})";
  EXPECT_FALSE(DecodeOk(b.Json()).entity.has_value());
}

TEST(DecodeTest, NestedKeyPathSegmentsAreMemberNames) {
  // A segment naming "a/b" or "t~1" is one member, not a JSON pointer.
  const std::string data =
      R"({"c":{"a":{"b":"nested"},"a/b":"slash","t~1":"tilde","t/":"t-slash"}})";
  for (const auto& [key, want] : std::vector<std::pair<std::string, std::string>>{
           {"data.c.a/b", "slash"}, {"data.c.t~1", "tilde"}, {"data.c.a.b", "nested"}}) {
    Result<Profile> p =
        Profile::FromJson(R"({"name":"p","entities":[{"name":"o","key":")" + key +
                          R"(","transitions":[{"type":"o.x","from":["none"],"to":"x"}]}]})");
    ASSERT_TRUE(p.ok()) << key << ": " << p.status().message();
    BodyParts b;
    b.type = R"("o.x")";
    b.data = data;
    const DecodedEvent d = DecodeOk(b.Json(), *p);
    ASSERT_TRUE(d.entity.has_value()) << key;
    EXPECT_EQ(d.entity->id, want) << key;
  }
}

// ---------------------------------------------------------------- body

TEST(DecodeTest, BodyNotJson) {
  for (const char* body :
       {"", " ", "not json", "{", "}", "{]", "{'a':1}", "{\"event_id\"}", "\x01"}) {
    EXPECT_REFUSED_WITH_FIELD(std::string(body), "body");
  }
}

TEST(DecodeTest, BodyNotAnObject) {
  for (const char* body :
       {"[]", "[1,2]", R"(["a",{"b":1}])", "42", "\"s\"", "null", "true", " [ ] "}) {
    EXPECT_EQ(Refusal(body), "body: must be a JSON object") << body;
  }
  // Not JSON at all is not called "not an object".
  for (const char* body : {"[1,2", "[1,2,]", "4 2", "\"s", "nul"}) {
    const std::string msg = Refusal(body);
    EXPECT_EQ(msg.rfind("body: ", 0), 0u) << body;
    EXPECT_NE(msg, "body: must be a JSON object") << body;
  }
}

TEST(DecodeTest, TrailingContentRefused) {
  const std::string good = BodyParts{}.Json();
  for (const char* tail : {"{}", "x", "1", ",", "]", "}", "\"s\"", "null"}) {
    EXPECT_REFUSED_WITH_FIELD(good + " " + tail, "body");
    EXPECT_REFUSED_WITH_FIELD(good + tail, "body");
    // The reason says something follows the object, whichever of
    // simdjson's errors found it.
    const std::string msg = Refusal(good + tail);
    EXPECT_TRUE(msg.find("trailing content") != std::string::npos ||
                msg.find("more follows") != std::string::npos ||
                msg.find("more after") != std::string::npos)
        << tail << ": " << msg;
  }
}

TEST(DecodeTest, DuplicateTopLevelFields) {
  BodyParts b;
  b.extra = R"(,"event_id":"evt_2")";
  EXPECT_EQ(Refusal(b.Json()), "event_id: appears more than once");
  b.extra = R"(,"event_id":"evt_1")";
  EXPECT_EQ(Refusal(b.Json()), "event_id: appears more than once");
  b.extra = R"(,"type":"receipt.issued")";
  EXPECT_EQ(Refusal(b.Json()), "type: appears more than once");
  b.extra = R"(,"occurred_at":"2026-11-29T10:15:30Z")";
  EXPECT_EQ(Refusal(b.Json()), "occurred_at: appears more than once");
  b.extra = R"(,"version":2)";
  EXPECT_EQ(Refusal(b.Json()), "version: appears more than once");
  b.extra = R"(,"data":{"receipt_id":"r2"})";
  EXPECT_EQ(Refusal(b.Json()), "data: appears more than once");
  // Spelled with an escape, the name is still the same member.
  b.extra = R"(,"event\u005fid":"evt_2")";
  EXPECT_EQ(Refusal(b.Json()), "event_id: appears more than once");
  // A repeated wrongly-typed member is also a repeat.
  b.event_id = "1";
  b.extra = R"(,"event_id":"evt_1")";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "event_id");
}

TEST(DecodeTest, EveryTruncationIsRefused) {
  BodyParts b;
  b.extra = R"(,"meta":{"a":[1,2.5,"x\"y",true,null,{"b":[]}]})";
  const std::string good = b.Json();
  DecodeOk(good);
  for (size_t len = 0; len < good.size(); ++len) {
    const std::string cut = good.substr(0, len);
    Result<DecodedEvent> r = Decode(cut);
    EXPECT_FALSE(r.ok()) << "prefix of length " << len << ": " << cut;
    if (!r.ok()) {
      EXPECT_TRUE(r.status().IsInvalidArgument());
    }
  }
}

TEST(DecodeTest, InvalidJsonInsideIgnoredMembersRefused) {
  // The engine ignores these members, but the body must still be JSON.
  for (const char* extra :
       {R"(,"extra":[1,2,})",    R"(,"extra":[1,2,])",    R"(,"extra":[1 2])",
        R"(,"extra":{"a":tru})", R"(,"extra":{"a":nul})", R"(,"extra":{"a":falsey})",
        R"(,"extra":01)",        R"(,"extra":1.)",        R"(,"extra":.5)",
        R"(,"extra":+1)",        R"(,"extra":-)",         R"(,"extra":1e)",
        R"(,"extra":0x10)",      R"(,"extra":"\x")",      R"(,"extra":"\u12")",
        R"(,"extra":{"a" 1})",   R"(,"extra":{"a":1,})",  R"(,"extra":{1:2})",
        R"(,"extra":NaN)",       R"(,"extra":undefined)", R"(,"extra":'s')",
        R"(,"extra":[[[[}]]]])", ",\"extra\":\"\xff\"",   R"(,"extra")",
        R"(,"extra":)",          R"(,,"extra":1)"}) {
    BodyParts b;
    b.extra = extra;
    EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
  }
}

TEST(DecodeTest, InvalidJsonInsideDataRefused) {
  for (const char* data : {R"({"receipt_id":"r1","x":[1,2,})", R"({"receipt_id":"r1","x":tru})",
                           R"({"receipt_id":"r1","x":01})", R"({"receipt_id":"r1",})",
                           R"({"receipt_id":"r1" "x":1})"}) {
    BodyParts b;
    b.data = data;
    EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
  }
  // Also when data is not an object: the value is walked before refusing.
  BodyParts b;
  b.data = "[1,2,}";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
}

TEST(DecodeTest, InvalidJsonInsideRequiredFieldsRefused) {
  BodyParts b;
  b.version = "1.";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
  b = BodyParts{};
  b.event_id = "[1,}";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
  b = BodyParts{};
  b.type = R"("receipt.issued\q")";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
}

TEST(DecodeTest, UnescapedControlCharacterInStringRefused) {
  // RFC 8259 §7: control characters must be escaped inside strings.
  BodyParts b;
  b.extra = ",\"extra\":\"line\nbreak\"";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
}

TEST(DecodeTest, DeepNestingRefused) {
  auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  BodyParts b;
  b.extra = ",\"deep\":" + nested(32);
  DecodeOk(b.Json());
  // The root object plus 63 nested levels pass, whatever the innermost
  // value; 66 levels in all are refused.
  b.extra = ",\"deep\":" + nested(63);
  DecodeOk(b.Json());
  b.extra = ",\"deep\":" + std::string(63, '[') + "1" + std::string(63, ']');
  DecodeOk(b.Json());
  b.extra = ",\"deep\":" + nested(65);
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
  b.extra = ",\"deep\":" + std::string(65, '[') + "1" + std::string(65, ']');
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
  b.extra = ",\"deep\":" + nested(100);
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
  b.extra = ",\"deep\":" + nested(5000);
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");

  // Inside data too, objects as well as arrays.
  std::string obj = "1";
  for (int i = 0; i < 100; ++i) obj = "{\"a\":" + obj + "}";
  b = BodyParts{};
  b.data = R"({"receipt_id":"r1","deep":)" + obj + "}";
  EXPECT_REFUSED_WITH_FIELD(b.Json(), "body");
  obj = "1";
  for (int i = 0; i < 30; ++i) obj = "{\"a\":" + obj + "}";
  b.data = R"({"receipt_id":"r1","deep":)" + obj + "}";
  DecodeOk(b.Json());
}

TEST(DecodeTest, CheckOrderReportsFirstFieldInSpecOrder) {
  EXPECT_EQ(Refusal("{}"), "event_id: required");
  EXPECT_EQ(Refusal(R"({"event_id":"e"})"), "type: required");
  EXPECT_EQ(Refusal(R"({"event_id":"e","type":"a.b"})"), "occurred_at: required");
  EXPECT_EQ(Refusal(R"({"event_id":"e","type":"a.b","occurred_at":"2026-11-29T10:15:30Z"})"),
            "data: required");
}

// ---------------------------------------------------------------- header

TEST(DecodeTest, EventIdHeader) {
  EXPECT_TRUE(CheckEventIdHeader({}, "evt_1").ok());
  EXPECT_TRUE(CheckEventIdHeader({{"X-RR-Event-Id", "evt_1"}}, "evt_1").ok());
  EXPECT_TRUE(CheckEventIdHeader({{"x-rr-event-id", "evt_1"}}, "evt_1").ok());
  EXPECT_TRUE(CheckEventIdHeader({{"X-RR-EVENT-ID", "evt_1"}}, "evt_1").ok());
  EXPECT_TRUE(CheckEventIdHeader({{"X-Other", "zzz"}, {"X-RR-Event-Id", "evt_1"}}, "evt_1").ok());

  for (const Headers& h : {Headers{{"X-RR-Event-Id", "evt_2"}}, Headers{{"x-rr-event-id", "evt_2"}},
                           Headers{{"X-RR-Event-Id", ""}}, Headers{{"X-RR-Event-Id", "EVT_1"}},
                           Headers{{"X-RR-Event-Id", "evt_1 "}}}) {
    Status st = CheckEventIdHeader(h, "evt_1");
    EXPECT_FALSE(st.ok()) << h[0].second;
    EXPECT_TRUE(st.IsInvalidArgument());
    EXPECT_EQ(st.message().rfind("X-RR-Event-Id: ", 0), 0u) << st.message();
  }
}

TEST(DecodeTest, WebhookIdHeader) {
  // Standard Webhooks (docs/SPEC.md §2.3): webhook-id must equal the body's event_id.
  EXPECT_TRUE(CheckEventIdHeader({{"webhook-id", "evt_1"}}, "evt_1").ok());
  EXPECT_TRUE(CheckEventIdHeader({{"Webhook-Id", "evt_1"}}, "evt_1").ok());
  Status st = CheckEventIdHeader({{"webhook-id", "msg_2"}}, "evt_1");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("webhook-id: ", 0), 0u) << st.message();
  st = CheckEventIdHeader({{"X-RR-Event-Id", "evt_1"}, {"webhook-id", "msg_2"}}, "evt_1");
  EXPECT_FALSE(st.ok());
}

TEST(DecodeTest, EveryLineOfAnEventIdHeaderMustBeTheBodys) {
  EXPECT_TRUE(
      CheckEventIdHeader({{"X-RR-Event-Id", "evt_1"}, {"x-rr-event-id", "evt_1"}}, "evt_1").ok());
  for (const Headers& h : {Headers{{"X-RR-Event-Id", "evt_1"}, {"X-RR-Event-Id", "evt_2"}},
                           Headers{{"x-rr-event-id", "evt_2"}, {"X-RR-Event-Id", "evt_1"}},
                           Headers{{"webhook-id", "evt_1"}, {"Webhook-Id", "msg_2"}}}) {
    Status st = CheckEventIdHeader(h, "evt_1");
    ASSERT_FALSE(st.ok()) << h[1].first;
    EXPECT_TRUE(st.IsInvalidArgument());
    EXPECT_NE(st.message().find("does not match body event_id"), std::string::npos) << st.message();
  }
}

TEST(DecodeTest, PeekEventIdGuessesWithoutDecoding) {
  EXPECT_EQ(PeekEventId(R"({"event_id":"evt_1","type":"t"})"), "evt_1");
  EXPECT_EQ(PeekEventId("{ \"event_id\" :\n \"evt.2:x-y\" }"), "evt.2:x-y");
  // A key that may be nested is no guess: the decoder reads the top level.
  EXPECT_FALSE(PeekEventId(R"({"data":{"event_id":"inner"},"event_id":"outer"})"));
  EXPECT_FALSE(PeekEventId(R"({"list":[1],"event_id":"outer"})"));
  EXPECT_FALSE(PeekEventId(R"({"note":"{","event_id":"outer"})"));
  EXPECT_EQ(PeekEventId(R"( {"type":"t","event_id":"outer","data":{"event_id":"x"}})"), "outer");
  // Nothing usable: the caller decodes.
  EXPECT_FALSE(PeekEventId(R"({"type":"t"})"));
  EXPECT_FALSE(PeekEventId(R"({"event_id":1})"));
  EXPECT_FALSE(PeekEventId(R"({"event_id":"a\u0062"})"));
  EXPECT_FALSE(PeekEventId(R"({"event_id":"")"));
  EXPECT_FALSE(PeekEventId(R"({"event_id":"unterminated)"));
  EXPECT_FALSE(PeekEventId("{\"event_id\":\"" + std::string(kMaxEventIdBytes + 1, 'a') + "\"}"));
  EXPECT_EQ(PeekEventId("{\"event_id\":\"" + std::string(kMaxEventIdBytes, 'a') + "\"}"),
            std::string(kMaxEventIdBytes, 'a'));
}

// A rebuild decodes stored bodies for their identity and route only,
// reading just the data members the routes need (DecodeEventRoute). Over
// seeded random bodies (types known and not, keys present, missing, nested,
// of every JSON type, members in any order, other members of any shape), it
// agrees with the whole decode on what an accepted body means, and refuses
// a body whose key the whole decode refuses.
TEST(DecodeTest, RouteDecodeAgreesWithTheWholeDecode) {
  Result<Profile> shop = Profile::FromJson(R"({"name":"shop","entities":[
      {"name":"order","key":"data.customer.id",
       "transitions":[{"type":"order.placed","from":["none"],"to":"placed"}]},
      {"name":"receipt","key":"data.receipt_id",
       "transitions":[{"type":"receipt.issued","from":["none"],"to":"issued"},
                      {"type":"receipt.refunded","from":["issued"],"to":"refunded"}]}]})");
  ASSERT_TRUE(shop.ok()) << shop.status().message();
  const uint64_t seed = test_util::TestSeed("RouteDecodeAgreesWithTheWholeDecode", 20261203);
  std::mt19937_64 rng(seed);
  const char* kTypes[] = {"receipt.issued",  "receipt.refunded",  "order.placed",
                          "product.created", "inventory.updated", "parcel.sent"};
  const char* kValues[] = {R"("rcp_1")",
                           "42",
                           "18446744073709551616",
                           "1.5",
                           "null",
                           "true",
                           R"({"id":"c_9","name":"Ann"})",
                           R"({"id":7})",
                           R"({"name":"x"})",
                           R"([{"id":"c_9"}])",
                           R"("a\"b")",
                           R"("")",
                           R"({"a":{"b":[1,2,{"c":3}]}})"};
  const char* kNames[] = {"receipt_id", "customer", "product_id", "amount", "lines", "id"};
  int accepted = 0, refused_keys = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::string> members;
    const int n = static_cast<int>(rng() % 5);
    for (int m = 0; m < n; ++m) {
      members.push_back(std::string("\"") + kNames[rng() % 6] + "\":" + kValues[rng() % 13]);
    }
    std::string data = "{";
    for (size_t m = 0; m < members.size(); ++m) data += (m ? "," : "") + members[m];
    data += "}";
    std::vector<std::string> top = {R"("event_id":"evt_)" + std::to_string(i) + R"(")",
                                    std::string(R"("type":")") + kTypes[rng() % 6] + "\"",
                                    R"("occurred_at":"2026-11-29T10:15:30Z")", R"("data":)" + data};
    if (rng() % 2) top.push_back(R"("version":)" + std::to_string(rng() % 100));
    if (rng() % 3 == 0) top.push_back(R"("extra":{"deep":[1,{"x":null}]})");
    std::shuffle(top.begin(), top.end(), rng);
    std::string body = "{";
    for (size_t m = 0; m < top.size(); ++m) body += (m ? "," : "") + top[m];
    body += "}";
    const std::vector<const Profile*> profiles = {&Profile::ReceiptRoller(), &*shop};
    for (const Profile* profile : profiles) {
      SCOPED_TRACE(body);
      const Result<DecodedEvent> whole = Decode(body, *profile);
      const Result<DecodedEvent> route = DecodeEventRoute(body, *profile, RouteMembers(*profile));
      if (!whole.ok()) {
        // A refused key is refused the same way: its member is read.
        if (whole.status().message().rfind("data.", 0) == 0) {
          ++refused_keys;
          ASSERT_FALSE(route.ok());
          EXPECT_EQ(route.status().message(), whole.status().message());
        }
        continue;
      }
      ++accepted;
      ASSERT_TRUE(route.ok()) << route.status().message();
      Event identity = whole->event;
      identity.data.clear();
      EXPECT_EQ(route->event, identity);
      EXPECT_EQ(route->entity, whole->entity);
      EXPECT_EQ(route->rank, whole->rank);
    }
  }
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(refused_keys, 300);
}

}  // namespace
}  // namespace eventfold
