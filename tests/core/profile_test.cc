// Tests of eventfold/profile.h: the built-in profile, profile documents
// (docs/SPEC.md §4) and their validation.

#include "eventfold/profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace eventfold {
namespace {

constexpr const char* kSpecExample = R"({"name":"receiptroller",
 "entities":[
  {"name":"receipt","key":"data.receipt_id",
   "transitions":[{"type":"receipt.issued","from":["none"],"to":"issued"},
                  {"type":"receipt.refunded","from":["issued"],"to":"refunded"}]}]})";

// A one-entity profile document with the given transitions array.
std::string OneEntity(const std::string& transitions, const std::string& key = "data.id",
                      const std::string& name = "thing") {
  return R"({"name":"p","entities":[{"name":")" + name + R"(","key":")" + key +
         R"(","transitions":)" + transitions + "}]}";
}

// FromJson must refuse `json` with a message containing every one of `parts`.
void ExpectRefused(const std::string& json, const std::vector<std::string>& parts) {
  Result<Profile> p = Profile::FromJson(json);
  ASSERT_FALSE(p.ok()) << json;
  EXPECT_TRUE(p.status().IsInvalidArgument()) << p.status().ToString();
  for (const std::string& part : parts) {
    EXPECT_NE(p.status().message().find(part), std::string::npos)
        << "message \"" << p.status().message() << "\" lacks \"" << part << "\"";
  }
}

TEST(ProfileTest, ReceiptRollerEntitiesAndKeys) {
  const Profile& p = Profile::ReceiptRoller();
  EXPECT_EQ(p.name(), "receiptroller");
  ASSERT_EQ(p.entities().size(), 3u);
  EXPECT_EQ(p.entities()[0].name, "receipt");
  EXPECT_EQ(p.entities()[0].key, "data.receipt_id");
  EXPECT_EQ(p.entities()[1].name, "product");
  EXPECT_EQ(p.entities()[1].key, "data.product_id");
  EXPECT_EQ(p.entities()[2].name, "inventory");
  EXPECT_EQ(p.entities()[2].key, "data.product_id");
  EXPECT_EQ(p.entities()[0].KeyPath(), (std::vector<std::string>{"data", "receipt_id"}));
  ASSERT_NE(p.FindEntity("product"), nullptr);
  EXPECT_EQ(p.FindEntity("product")->transitions.size(), 3u);
  EXPECT_EQ(p.FindEntity("order"), nullptr);
}

TEST(ProfileTest, ReceiptRollerRoutesAndRanks) {
  const Profile& p = Profile::ReceiptRoller();
  struct Want {
    const char* type;
    const char* entity;
    uint32_t rank;
    std::vector<std::string> from;
    const char* to;
  };
  const std::vector<Want> wants = {
      {"receipt.issued", "receipt", 0, {"none"}, "issued"},
      {"receipt.refunded", "receipt", 1, {"issued"}, "refunded"},
      {"product.created", "product", 0, {"none"}, "active"},
      {"product.updated", "product", 1, {"active"}, "active"},
      {"product.deleted", "product", 2, {"active"}, "deleted"},
      {"inventory.updated", "inventory", 0, {"none", "tracked"}, "tracked"},
  };
  for (const Want& w : wants) {
    const Route* r = p.Find(w.type);
    ASSERT_NE(r, nullptr) << w.type;
    EXPECT_EQ(r->entity->name, w.entity) << w.type;
    EXPECT_EQ(r->rank, w.rank) << w.type;
    EXPECT_EQ(r->transition->type, w.type);
    EXPECT_EQ(r->transition->from, w.from) << w.type;
    EXPECT_EQ(r->transition->to, w.to) << w.type;
    EXPECT_EQ(&r->entity->transitions[r->rank], r->transition) << w.type;
  }
  EXPECT_EQ(p.Find("receipt.voided"), nullptr);
  EXPECT_EQ(p.Find("receipt"), nullptr);
  EXPECT_EQ(p.Find(""), nullptr);
}

TEST(ProfileTest, SpecExampleLoads) {
  Result<Profile> p = Profile::FromJson(kSpecExample);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->name(), "receiptroller");
  ASSERT_EQ(p->entities().size(), 1u);
  const Route* r = p->Find("receipt.refunded");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->rank, 1u);
  EXPECT_EQ(r->entity->name, "receipt");
  EXPECT_EQ(r->transition->from, std::vector<std::string>{"issued"});
  EXPECT_EQ(p->Find("product.created"), nullptr);
}

TEST(ProfileTest, ReceiptRollerRoundTripsThroughJson) {
  const Profile& builtin = Profile::ReceiptRoller();
  Result<Profile> back = Profile::FromJson(builtin.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->Fingerprint(), builtin.Fingerprint());
  EXPECT_EQ(back->ToJson(), builtin.ToJson());
  EXPECT_EQ(back->Find("receipt.refunded")->rank, 1u);
  EXPECT_EQ(back->Find("inventory.updated")->entity->key, "data.product_id");
}

TEST(ProfileTest, FingerprintDistinguishesProfiles) {
  const Profile& builtin = Profile::ReceiptRoller();
  Result<Profile> example = Profile::FromJson(kSpecExample);
  ASSERT_TRUE(example.ok());
  EXPECT_NE(example->Fingerprint(), builtin.Fingerprint());
  EXPECT_EQ(builtin.Fingerprint().size(), 64u);
  // Rank order is part of the meaning: swapping two transitions changes it.
  Result<Profile> swapped = Profile::FromJson(R"({"name":"receiptroller",
   "entities":[{"name":"receipt","key":"data.receipt_id",
   "transitions":[{"type":"receipt.refunded","from":["issued"],"to":"refunded"},
                  {"type":"receipt.issued","from":["none"],"to":"issued"}]}]})");
  ASSERT_TRUE(swapped.ok()) << swapped.status().message();
  EXPECT_EQ(swapped->Find("receipt.refunded")->rank, 0u);
  EXPECT_NE(swapped->Fingerprint(), example->Fingerprint());
  // Whitespace and member order of the document do not matter.
  Result<Profile> reordered = Profile::FromJson(R"( {"entities":[
    {"transitions":[{"to":"issued","from":["none"],"type":"receipt.issued"},
                    {"from":["issued"],"type":"receipt.refunded","to":"refunded"}],
     "key":"data.receipt_id","name":"receipt"}],
    "name":"receiptroller"} )");
  ASSERT_TRUE(reordered.ok()) << reordered.status().message();
  EXPECT_EQ(reordered->Fingerprint(), example->Fingerprint());
}

TEST(ProfileTest, CopiesKeepWorkingRoutes) {
  Result<Profile> p = Profile::FromJson(kSpecExample);
  ASSERT_TRUE(p.ok());
  Profile copy = *p;
  Profile moved = std::move(*p);
  Profile assigned = Profile::ReceiptRoller();
  assigned = copy;
  for (const Profile* q : {&copy, &moved, &assigned}) {
    const Route* r = q->Find("receipt.refunded");
    ASSERT_NE(r, nullptr);
    // Routes must point into this profile's own entities, not a source's.
    EXPECT_EQ(r->entity, &q->entities()[0]);
    EXPECT_EQ(r->transition, &q->entities()[0].transitions[1]);
  }
  EXPECT_EQ(assigned.Find("product.created"), nullptr);
}

TEST(ProfileTest, NestedKeyPath) {
  Result<Profile> p = Profile::FromJson(
      OneEntity(R"([{"type":"thing.made","from":["none"],"to":"made"}])", "data.customer.id"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->entities()[0].KeyPath(), (std::vector<std::string>{"data", "customer", "id"}));
}

TEST(ProfileTest, DescriptionIsAllowed) {
  Result<Profile> p = Profile::FromJson(
      R"({"name":"p","description":"test","entities":[{"name":"t",
        "description":"an entity","key":"data.id","transitions":[
        {"type":"t.made","from":["none"],"to":"made","description":"x"}]}]})");
  ASSERT_TRUE(p.ok()) << p.status().message();
}

// ---------------------------------------------------------------- refusals

TEST(ProfileTest, UnknownStateInFromSet) {
  ExpectRefused(OneEntity(R"([{"type":"thing.made","from":["none"],"to":"made"},
                             {"type":"thing.sold","from":["maed"],"to":"sold"}])"),
                {"thing", "thing.sold", "unknown state", "maed"});
}

TEST(ProfileTest, DuplicateTypeWithinAnEntity) {
  ExpectRefused(OneEntity(R"([{"type":"thing.made","from":["none"],"to":"made"},
                             {"type":"thing.made","from":["made"],"to":"made"}])"),
                {"thing", "thing.made", "duplicate type"});
}

TEST(ProfileTest, DuplicateTypeAcrossEntities) {
  ExpectRefused(R"({"name":"p","entities":[
    {"name":"a","key":"data.id","transitions":[{"type":"x.made","from":["none"],"to":"made"}]},
    {"name":"b","key":"data.id","transitions":[{"type":"x.made","from":["none"],"to":"made"}]}]})",
                {"\"b\"", "x.made", "duplicate type"});
}

TEST(ProfileTest, EmptyFromSet) {
  ExpectRefused(OneEntity(R"([{"type":"thing.made","from":[],"to":"made"}])"),
                {"thing", "thing.made", "empty from-set"});
}

TEST(ProfileTest, MissingFrom) {
  ExpectRefused(OneEntity(R"([{"type":"thing.made","to":"made"}])"),
                {"thing", "thing.made", "from"});
}

TEST(ProfileTest, MissingOrEmptyTo) {
  ExpectRefused(OneEntity(R"([{"type":"thing.made","from":["none"]}])"),
                {"thing", "thing.made", "to"});
  ExpectRefused(OneEntity(R"([{"type":"thing.made","from":["none"],"to":""}])"),
                {"thing", "thing.made", "to"});
}

TEST(ProfileTest, MissingKeyPath) {
  ExpectRefused(R"({"name":"p","entities":[{"name":"thing",
    "transitions":[{"type":"thing.made","from":["none"],"to":"made"}]}]})",
                {"thing", "key"});
  ExpectRefused(OneEntity(R"([{"type":"thing.made","from":["none"],"to":"made"}])", ""),
                {"thing", "missing key path"});
}

TEST(ProfileTest, KeyPathNotUnderData) {
  for (const char* key :
       {"receipt_id", "body.receipt_id", "data", "data.", ".data.id", "data..id", "meta.id"}) {
    ExpectRefused(OneEntity(R"([{"type":"thing.made","from":["none"],"to":"made"}])", key),
                  {"thing", "key path"});
  }
}

TEST(ProfileTest, UnreachableState) {
  // "lost" and "found" only enter each other: no path from none.
  ExpectRefused(OneEntity(R"([{"type":"thing.made","from":["none"],"to":"made"},
                             {"type":"thing.lost","from":["found"],"to":"lost"},
                             {"type":"thing.found","from":["lost"],"to":"found"}])"),
                {"thing", "unreachable state"});
}

TEST(ProfileTest, ReachabilityFollowsAnyOrder) {
  // Reachable, even though the transition entering "b" is listed after the
  // one leaving it.
  Result<Profile> p = Profile::FromJson(OneEntity(R"([{"type":"thing.c","from":["b"],"to":"c"},
                    {"type":"thing.b","from":["a"],"to":"b"},
                    {"type":"thing.a","from":["none"],"to":"a"}])"));
  EXPECT_TRUE(p.ok()) << p.status().message();
}

TEST(ProfileTest, DuplicateEntityName) {
  ExpectRefused(R"({"name":"p","entities":[
    {"name":"a","key":"data.id","transitions":[{"type":"a.made","from":["none"],"to":"made"}]},
    {"name":"a","key":"data.id","transitions":[{"type":"b.made","from":["none"],"to":"made"}]}]})",
                {"\"a\"", "duplicate entity name"});
}

TEST(ProfileTest, UnknownMember) {
  ExpectRefused(R"({"name":"p","entities":[{"name":"thing","key":"data.id",
    "transitons":[{"type":"thing.made","from":["none"],"to":"made"}]}]})",
                {"thing", "unknown member", "transitons"});
  ExpectRefused(R"({"name":"p","entitys":[]})", {"unknown member", "entitys"});
  ExpectRefused(OneEntity(R"([{"type":"thing.made","form":["none"],"to":"made"}])"),
                {"thing", "unknown member", "form"});
}

TEST(ProfileTest, NotJson) {
  for (const char* doc :
       {"", "not json", "{", "{\"name\":", "[1,2]", "42", "{\"name\":\"p\",\"entities\":[}",
        R"({"name":"p","entities":[]} trailing)"}) {
    Result<Profile> p = Profile::FromJson(doc);
    EXPECT_FALSE(p.ok()) << doc;
    if (!p.ok()) {
      EXPECT_TRUE(p.status().IsInvalidArgument()) << doc;
      EXPECT_FALSE(p.status().message().empty()) << doc;
    }
  }
}

TEST(ProfileTest, NotJsonIsNamedAsSuch) {
  ExpectRefused("{", {"not JSON"});
  ExpectRefused(R"({"name":)", {"not JSON"});
  ExpectRefused(R"({"name":"p","entities":[]} trailing)", {"not JSON"});
  ExpectRefused("[1,2]", {"must be a JSON object"});
}

TEST(ProfileTest, WrongMemberTypes) {
  ExpectRefused(R"({"name":"p","entities":{}})", {"entities"});
  ExpectRefused(R"({"name":5,"entities":[]})", {"name"});
  ExpectRefused(R"({"name":"p"})", {"entities"});
  ExpectRefused(R"({"name":"p","entities":[]})", {"entities"});
  ExpectRefused(OneEntity(R"([{"type":"thing.made","from":"none","to":"made"}])"),
                {"thing", "from"});
  ExpectRefused(OneEntity(R"([{"type":"thing.made","from":[1],"to":"made"}])"), {"thing", "from"});
  ExpectRefused(OneEntity(R"([])"), {"thing", "no transitions"});
}

TEST(ProfileTest, BadTypeAndEntityNames) {
  ExpectRefused(OneEntity(R"([{"type":"thingmade","from":["none"],"to":"made"}])"),
                {"thing", "thingmade"});
  ExpectRefused(OneEntity(R"([{"type":"thing..made","from":["none"],"to":"made"}])"),
                {"thing", "thing..made"});
  ExpectRefused(
      OneEntity(R"([{"type":"thing.made","from":["none"],"to":"made"}])", "data.id", "bad name"),
      {"bad name"});
}

TEST(ProfileTest, MakeValidatesToo) {
  Result<Profile> ok =
      Profile::Make("p", {EntityType{"a", "data.id", {Transition{"a.x", {"none"}, "x"}}}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->Find("a.x")->rank, 0u);
  Result<Profile> bad =
      Profile::Make("p", {EntityType{"a", "data.id", {Transition{"a.x", {"nowhere"}, "x"}}}});
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(
      Profile::Make("", {EntityType{"a", "data.id", {Transition{"a.x", {"none"}, "x"}}}}).ok());
  EXPECT_FALSE(Profile::Make("p", {}).ok());
}

TEST(ProfileTest, FromFileReadsAndNamesTheFile) {
  const std::string dir = ::testing::TempDir();
  // The pid keeps concurrent runs of this binary apart.
  const std::string stem = dir + "/eventfold_core_profile_" + std::to_string(::getpid());
  const std::string good = stem + "_good.json";
  const std::string bad = stem + "_bad.json";
  std::ofstream(good) << kSpecExample;
  std::ofstream(bad) << R"({"name":"p","entities":[{"name":"thing",
    "key":"data.id","transitons":[]}]})";
  Result<Profile> p = Profile::FromFile(good);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->Fingerprint(), Profile::FromJson(kSpecExample)->Fingerprint());
  Result<Profile> q = Profile::FromFile(bad);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find(bad), std::string::npos) << q.status().message();
  EXPECT_NE(q.status().message().find("transitons"), std::string::npos) << q.status().message();
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST(ProfileTest, FromFileNamesTheFile) {
  Result<Profile> missing = Profile::FromFile("/nonexistent/eventfold/p.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/eventfold/p.json"), std::string::npos);
}

}  // namespace
}  // namespace eventfold
