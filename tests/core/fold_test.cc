// Tests of core/fold: the fold of docs/SPEC.md §4 under the receiptroller profile.

#include "core/fold.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "eventfold/profile.h"
#include "eventfold/projection.h"
#include "tests/common/test_seed.h"

namespace eventfold {

// Readable failure output: gtest finds this by argument-dependent lookup.
void PrintTo(const Projection& p, std::ostream* os) { *os << ProjectionToJson(p); }

namespace {

constexpr int64_t kT0 = 1795947330LL * 1000000;  // 2026-11-29T10:15:30Z
constexpr int64_t kMinute = 60LL * 1000000;

const EntityType& Entity(const char* name) {
  const EntityType* e = Profile::ReceiptRoller().FindEntity(name);
  EXPECT_NE(e, nullptr) << name;
  return *e;
}

RankedEvent Ev(std::string id, std::string type, int64_t at,
               std::optional<int64_t> version = std::nullopt, std::vector<Field> data = {}) {
  const Route* r = Profile::ReceiptRoller().Find(type);
  EXPECT_NE(r, nullptr) << type;
  RankedEvent e;
  e.event.event_id = std::move(id);
  e.event.type = std::move(type);
  e.event.occurred_at = at;
  e.event.version = version;
  e.event.data = std::move(data);
  e.rank = r ? r->rank : 0;
  return e;
}

struct Folded {
  Projection p;
  std::vector<std::string> verdicts;
  std::vector<std::string> order;  // event ids in fold order
};

Folded FoldAll(const char* entity, const std::string& id, std::vector<RankedEvent> events) {
  Folded out;
  Result<Projection> p = Fold(Entity(entity), EntityRef{entity, id}, &events, &out.verdicts);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (p.ok()) out.p = std::move(*p);
  for (const RankedEvent& e : events) out.order.push_back(e.event.event_id);
  EXPECT_EQ(out.verdicts.size(), events.size());
  return out;
}

using Ids = std::vector<std::string>;

// ---------------------------------------------------------------- transitions

TEST(FoldTest, EmptyFoldIsNone) {
  const Folded f = FoldAll("receipt", "r1", {});
  EXPECT_EQ(f.p.entity, "receipt");
  EXPECT_EQ(f.p.id, "r1");
  EXPECT_EQ(f.p.state, "none");
  EXPECT_TRUE(f.p.fields.empty());
  EXPECT_FALSE(f.p.version.has_value());
  EXPECT_EQ(f.p.applied, 0u);
  EXPECT_TRUE(f.p.rejected.empty());
  EXPECT_FALSE(f.p.occurred_at.has_value());
}

TEST(FoldTest, ReceiptIssuedThenRefunded) {
  const Folded f =
      FoldAll("receipt", "rcp_1",
              {Ev("e2", "receipt.refunded", kT0 + kMinute, 2,
                  {{"receipt_id", "\"rcp_1\""}, {"refund", "1500"}}),
               Ev("e1", "receipt.issued", kT0, 1,
                  {{"receipt_id", "\"rcp_1\""}, {"amount", "1500"}, {"currency", "\"THB\""}})});
  EXPECT_EQ(f.order, (Ids{"e1", "e2"}));
  EXPECT_EQ(f.verdicts, (Ids{"", ""}));
  EXPECT_EQ(f.p.state, "refunded");
  EXPECT_EQ(f.p.applied, 2u);
  EXPECT_EQ(f.p.version, std::optional<int64_t>(2));
  EXPECT_EQ(f.p.occurred_at, std::optional<int64_t>(kT0 + kMinute));
  EXPECT_TRUE(f.p.rejected.empty());
  EXPECT_EQ(f.p.fields, (std::vector<Field>{{"receipt_id", "\"rcp_1\""},
                                            {"amount", "1500"},
                                            {"currency", "\"THB\""},
                                            {"refund", "1500"}}));
}

TEST(FoldTest, ReceiptIssuedAlone) {
  const Folded f = FoldAll("receipt", "r", {Ev("e1", "receipt.issued", kT0)});
  EXPECT_EQ(f.p.state, "issued");
  EXPECT_EQ(f.p.applied, 1u);
}

TEST(FoldTest, LoneRefundIsImpossible) {
  const Folded f =
      FoldAll("receipt", "r1", {Ev("e9", "receipt.refunded", kT0, 2, {{"receipt_id", "\"r1\""}})});
  EXPECT_EQ(f.verdicts, (Ids{"impossible transition none -> refunded"}));
  EXPECT_EQ(f.p.state, "none");
  EXPECT_EQ(f.p.applied, 0u);
  EXPECT_TRUE(f.p.fields.empty());
  EXPECT_FALSE(f.p.version.has_value());
  EXPECT_FALSE(f.p.occurred_at.has_value());
  EXPECT_EQ(f.p.rejected, (std::vector<Rejection>{{"e9", "receipt.refunded",
                                                   "impossible transition none -> refunded"}}));
}

TEST(FoldTest, IssuedAfterRefundedIsImpossible) {
  const Folded f =
      FoldAll("receipt", "r1",
              {Ev("e3", "receipt.issued", kT0 + 2 * kMinute, std::nullopt, {{"amount", "9"}}),
               Ev("e1", "receipt.issued", kT0), Ev("e2", "receipt.refunded", kT0 + kMinute)});
  EXPECT_EQ(f.order, (Ids{"e1", "e2", "e3"}));
  EXPECT_EQ(f.verdicts, (Ids{"", "", "impossible transition refunded -> issued"}));
  EXPECT_EQ(f.p.state, "refunded");
  EXPECT_EQ(f.p.applied, 2u);
  EXPECT_TRUE(f.p.fields.empty());  // the rejected event set nothing
  EXPECT_EQ(f.p.occurred_at, std::optional<int64_t>(kT0 + kMinute));
  ASSERT_EQ(f.p.rejected.size(), 1u);
  EXPECT_EQ(f.p.rejected[0].event_id, "e3");
  EXPECT_EQ(f.p.rejected[0].type, "receipt.issued");
}

TEST(FoldTest, RefundThenIssueOnReFold) {
  // A refund that arrived alone is rejected; once the issue is stored the
  // re-fold applies both.
  std::vector<RankedEvent> events = {Ev("e2", "receipt.refunded", kT0 + kMinute)};
  EXPECT_EQ(FoldAll("receipt", "r", events).p.state, "none");
  events.push_back(Ev("e1", "receipt.issued", kT0));
  const Folded f = FoldAll("receipt", "r", events);
  EXPECT_EQ(f.p.state, "refunded");
  EXPECT_TRUE(f.p.rejected.empty());
}

TEST(FoldTest, ProductLifecycle) {
  const Folded f =
      FoldAll("product", "p1",
              {Ev("c", "product.created", kT0, 1, {{"name", "\"a\""}}),
               Ev("u1", "product.updated", kT0 + 1, 2, {{"name", "\"b\""}}),
               Ev("u2", "product.updated", kT0 + 2, 3, {{"price", "5"}}),
               Ev("d", "product.deleted", kT0 + 3, 4),
               Ev("u3", "product.updated", kT0 + 4, 5, {{"name", "\"zombie\""}}),
               Ev("c2", "product.created", kT0 + 5, 6), Ev("d2", "product.deleted", kT0 + 6, 7)});
  EXPECT_EQ(f.order, (Ids{"c", "u1", "u2", "d", "u3", "c2", "d2"}));
  EXPECT_EQ(f.verdicts, (Ids{"", "", "", "", "impossible transition deleted -> active",
                             "impossible transition deleted -> active",
                             "impossible transition deleted -> deleted"}));
  EXPECT_EQ(f.p.state, "deleted");
  EXPECT_EQ(f.p.applied, 4u);
  EXPECT_EQ(f.p.version, std::optional<int64_t>(4));
  EXPECT_EQ(f.p.fields, (std::vector<Field>{{"name", "\"b\""}, {"price", "5"}}));
}

TEST(FoldTest, ProductCreatedTwiceIsImpossible) {
  const Folded f = FoldAll(
      "product", "p1", {Ev("c1", "product.created", kT0), Ev("c2", "product.created", kT0 + 1)});
  EXPECT_EQ(f.verdicts, (Ids{"", "impossible transition active -> active"}));
}

TEST(FoldTest, ProductUpdateOrDeleteBeforeCreateIsImpossible) {
  EXPECT_EQ(FoldAll("product", "p", {Ev("u", "product.updated", kT0)}).verdicts,
            (Ids{"impossible transition none -> active"}));
  EXPECT_EQ(FoldAll("product", "p", {Ev("d", "product.deleted", kT0)}).verdicts,
            (Ids{"impossible transition none -> deleted"}));
}

TEST(FoldTest, InventoryFromNoneAndTracked) {
  const Folded f =
      FoldAll("inventory", "p1",
              {Ev("i2", "inventory.updated", kT0 + 1, std::nullopt, {{"qty", "3"}}),
               Ev("i1", "inventory.updated", kT0, std::nullopt, {{"qty", "5"}, {"sku", "\"x\""}})});
  EXPECT_EQ(f.verdicts, (Ids{"", ""}));
  EXPECT_EQ(f.p.state, "tracked");
  EXPECT_EQ(f.p.applied, 2u);
  EXPECT_EQ(f.p.fields, (std::vector<Field>{{"qty", "3"}, {"sku", "\"x\""}}));
}

// ---------------------------------------------------------------- versions

TEST(FoldTest, StaleVersionRejected) {
  const Folded f = FoldAll(
      "product", "p1",
      {Ev("c", "product.created", kT0, 1), Ev("u5", "product.updated", kT0 + 1, 5, {{"n", "5"}}),
       Ev("u4", "product.updated", kT0 + 2, 4, {{"n", "4"}}),
       Ev("u5b", "product.updated", kT0 + 3, 5, {{"n", "55"}}),
       Ev("u6", "product.updated", kT0 + 4, 6, {{"m", "6"}})});
  ASSERT_EQ(f.verdicts.size(), 5u);
  EXPECT_EQ(f.verdicts[0], "");
  EXPECT_EQ(f.verdicts[1], "");
  EXPECT_EQ(f.verdicts[2].rfind("stale version", 0), 0u) << f.verdicts[2];
  EXPECT_EQ(f.verdicts[3].rfind("stale version", 0), 0u) << f.verdicts[3];
  EXPECT_EQ(f.verdicts[4], "");
  EXPECT_EQ(f.p.version, std::optional<int64_t>(6));
  EXPECT_EQ(f.p.applied, 3u);
  EXPECT_EQ(f.p.fields, (std::vector<Field>{{"n", "5"}, {"m", "6"}}));
  EXPECT_EQ(f.p.occurred_at, std::optional<int64_t>(kT0 + 4));
  ASSERT_EQ(f.p.rejected.size(), 2u);
  EXPECT_EQ(f.p.rejected[0].event_id, "u4");
  EXPECT_EQ(f.p.rejected[1].event_id, "u5b");
}

TEST(FoldTest, VersionlessEventsAreNeverStale) {
  const Folded f = FoldAll("product", "p1",
                           {Ev("c", "product.created", kT0, 7),
                            Ev("u1", "product.updated", kT0 + 1, std::nullopt, {{"a", "1"}}),
                            Ev("u2", "product.updated", kT0 + 2, std::nullopt, {{"a", "2"}})});
  EXPECT_EQ(f.verdicts, (Ids{"", "", ""}));
  // The last versioned applied event's version survives versionless ones.
  EXPECT_EQ(f.p.version, std::optional<int64_t>(7));
  EXPECT_EQ(f.p.fields, (std::vector<Field>{{"a", "2"}}));
  EXPECT_EQ(f.p.occurred_at, std::optional<int64_t>(kT0 + 2));
}

TEST(FoldTest, VersionedAfterVersionlessApplies) {
  const Folded f = FoldAll(
      "product", "p1", {Ev("c", "product.created", kT0), Ev("u", "product.updated", kT0 + 1, 0)});
  EXPECT_EQ(f.verdicts, (Ids{"", ""}));
  EXPECT_EQ(f.p.version, std::optional<int64_t>(0));
}

TEST(FoldTest, VersionZeroThenZeroIsStale) {
  const Folded f =
      FoldAll("product", "p1",
              {Ev("c", "product.created", kT0, 0), Ev("u", "product.updated", kT0 + 1, 0)});
  EXPECT_EQ(f.verdicts[1].rfind("stale version", 0), 0u);
}

TEST(FoldTest, RejectedEventLeavesVersionAndTimeAlone) {
  const Folded f = FoldAll(
      "receipt", "r",
      {Ev("i", "receipt.issued", kT0, 3), Ev("i2", "receipt.issued", kT0 + 1, 9, {{"x", "1"}})});
  EXPECT_EQ(f.p.version, std::optional<int64_t>(3));
  EXPECT_EQ(f.p.occurred_at, std::optional<int64_t>(kT0));
  EXPECT_TRUE(f.p.fields.empty());
  EXPECT_EQ(f.p.applied, 1u);
}

TEST(FoldTest, ImpossibleTransitionReportedBeforeStaleness) {
  // Both rules fail: the transition is what is wrong first.
  const Folded f = FoldAll(
      "receipt", "r", {Ev("i", "receipt.issued", kT0, 3), Ev("i2", "receipt.issued", kT0 + 1, 1)});
  EXPECT_EQ(f.verdicts[1], "impossible transition issued -> issued");
}

// ---------------------------------------------------------------- ties

TEST(FoldTest, TieAbsentVersionBeforePresent) {
  const Folded f = FoldAll(
      "product", "p",
      {Ev("c", "product.created", kT0 - 1), Ev("a", "product.updated", kT0, 1, {{"v", "1"}}),
       Ev("b", "product.updated", kT0, std::nullopt, {{"v", "0"}})});
  EXPECT_EQ(f.order, (Ids{"c", "b", "a"}));
  EXPECT_EQ(f.p.fields, (std::vector<Field>{{"v", "1"}}));
}

TEST(FoldTest, TieVersionAscending) {
  const Folded f = FoldAll(
      "product", "p",
      {Ev("c", "product.created", kT0 - 1), Ev("a", "product.updated", kT0, 10, {{"v", "10"}}),
       Ev("b", "product.updated", kT0, 2, {{"v", "2"}}),
       Ev("z", "product.updated", kT0, 3, {{"v", "3"}})});
  EXPECT_EQ(f.order, (Ids{"c", "b", "z", "a"}));
  EXPECT_EQ(f.verdicts, (Ids{"", "", "", ""}));
  EXPECT_EQ(f.p.fields, (std::vector<Field>{{"v", "10"}}));
  EXPECT_EQ(f.p.version, std::optional<int64_t>(10));
}

TEST(FoldTest, TieRankIssuedBeforeRefunded) {
  // Same instant, no versions: rank decides, whatever the ids say.
  const Folded f =
      FoldAll("receipt", "r",
              {Ev("a_refund", "receipt.refunded", kT0), Ev("z_issue", "receipt.issued", kT0)});
  EXPECT_EQ(f.order, (Ids{"z_issue", "a_refund"}));
  EXPECT_EQ(f.verdicts, (Ids{"", ""}));
  EXPECT_EQ(f.p.state, "refunded");
}

TEST(FoldTest, VersionOutranksRank) {
  // Same instant: the versioned issue sorts after the versionless refund.
  const Folded f = FoldAll("receipt", "r",
                           {Ev("i", "receipt.issued", kT0, 1), Ev("r", "receipt.refunded", kT0)});
  EXPECT_EQ(f.order, (Ids{"r", "i"}));
  EXPECT_EQ(f.verdicts, (Ids{"impossible transition none -> refunded", ""}));
}

TEST(FoldTest, TimeOutranksEverything) {
  const Folded f = FoldAll(
      "receipt", "r", {Ev("a", "receipt.refunded", kT0 + 1, 1), Ev("b", "receipt.issued", kT0, 9)});
  EXPECT_EQ(f.order, (Ids{"b", "a"}));
  EXPECT_EQ(f.verdicts[1].rfind("stale version", 0), 0u) << f.verdicts[1];
}

TEST(FoldTest, TieEventIdBytewise) {
  const Folded f = FoldAll("inventory", "p",
                           {Ev("b", "inventory.updated", kT0, 1, {{"w", "\"b\""}}),
                            Ev("aa", "inventory.updated", kT0, 1, {{"w", "\"aa\""}}),
                            Ev("a", "inventory.updated", kT0, 1, {{"w", "\"a\""}}),
                            Ev("B", "inventory.updated", kT0, 1, {{"w", "\"B\""}}),
                            Ev("-", "inventory.updated", kT0, 1, {{"w", "\"-\""}}),
                            Ev("9", "inventory.updated", kT0, 1, {{"w", "\"9\""}})});
  EXPECT_EQ(f.order, (Ids{"-", "9", "B", "a", "aa", "b"}));
  // Same version: only the first applies, the rest are stale.
  EXPECT_EQ(f.p.fields, (std::vector<Field>{{"w", "\"-\""}}));
  EXPECT_EQ(f.p.applied, 1u);
  EXPECT_EQ(f.p.rejected.size(), 5u);
}

TEST(FoldTest, FoldKeyOrdering) {
  const FoldKey base{kT0, 5, 1, "m"};
  auto with = [&](auto mutate) {
    FoldKey k = base;
    mutate(k);
    return k;
  };
  EXPECT_EQ(base <=> base, std::strong_ordering::equal);
  EXPECT_TRUE(base == base);
  EXPECT_LT(with([](FoldKey& k) { k.occurred_at -= 1; }), base);
  EXPECT_GT(with([](FoldKey& k) { k.occurred_at += 1; }), base);
  // Earlier time wins over everything else.
  EXPECT_LT(with([](FoldKey& k) {
              k.occurred_at -= 1;
              k.version = 100;
              k.rank = 9;
              k.event_id = "zzz";
            }),
            base);
  EXPECT_LT(with([](FoldKey& k) { k.version.reset(); }), base);
  EXPECT_LT(with([](FoldKey& k) {
              k.version.reset();
              k.rank = 9;
              k.event_id = "z";
            }),
            base);
  EXPECT_LT(with([](FoldKey& k) { k.version = INT64_MIN; }), base);
  EXPECT_LT(with([](FoldKey& k) { k.version = 4; }), base);
  EXPECT_GT(with([](FoldKey& k) {
              k.version = 6;
              k.rank = 0;
              k.event_id = "a";
            }),
            base);
  EXPECT_LT(with([](FoldKey& k) {
              k.rank = 0;
              k.event_id = "z";
            }),
            base);
  EXPECT_LT(with([](FoldKey& k) { k.event_id = "l"; }), base);
  EXPECT_GT(with([](FoldKey& k) { k.event_id = "m0"; }), base);
  EXPECT_FALSE(base == with([](FoldKey& k) { k.event_id = "n"; }));
}

TEST(FoldTest, KeyOfAndFoldsBeforeAgree) {
  const RankedEvent a = Ev("a", "receipt.refunded", kT0);
  const RankedEvent b = Ev("b", "receipt.issued", kT0);
  EXPECT_EQ(KeyOf(a.event, a.rank), (FoldKey{kT0, std::nullopt, 1, "a"}));
  EXPECT_TRUE(FoldsBefore(b, a));
  EXPECT_FALSE(FoldsBefore(a, b));
  EXPECT_FALSE(FoldsBefore(a, a));
  EXPECT_LT(KeyOf(b.event, b.rank), KeyOf(a.event, a.rank));
}

TEST(FoldTest, ApplyEventDirectly) {
  const EntityType& receipt = Entity("receipt");
  Projection p;
  const Event issue{"e1", "receipt.issued", kT0, 2, {{"k", "1"}}};
  EXPECT_EQ(ApplyEvent(receipt.transitions[0], issue, &p), "");
  EXPECT_EQ(p.state, "issued");
  EXPECT_EQ(p.version, std::optional<int64_t>(2));
  EXPECT_EQ(p.applied, 1u);
  const Event refund{"e2", "receipt.refunded", kT0, 1, {{"k", "2"}}};
  const std::string why = ApplyEvent(receipt.transitions[1], refund, &p);
  EXPECT_EQ(why.rfind("stale version", 0), 0u) << why;
  EXPECT_EQ(p.state, "issued");
  EXPECT_EQ(p.fields, (std::vector<Field>{{"k", "1"}}));
  EXPECT_EQ(p.rejected, (std::vector<Rejection>{{"e2", "receipt.refunded", why}}));
}

// A rank read from a damaged record, past the type's transitions: a
// Corruption naming the event, never an out-of-bounds read.
TEST(FoldTest, RankOutsideTheTransitionsIsCorruption) {
  const EntityType& receipt = Entity("receipt");
  RankedEvent bad = Ev("e2", "receipt.refunded", kT0 + kMinute);
  bad.rank = static_cast<uint32_t>(receipt.transitions.size());
  Result<const Transition*> t = TransitionOf(receipt, bad);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(t.status().IsCorruption());
  EXPECT_NE(t.status().message().find("e2"), std::string::npos) << t.status().ToString();
  std::vector<RankedEvent> events = {Ev("e1", "receipt.issued", kT0), bad};
  events[1].rank = 0xFFFFFFFFu;
  Result<Projection> p = Fold(receipt, EntityRef{"receipt", "r1"}, &events);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(p.status().IsCorruption()) << p.status().ToString();
}

// ---------------------------------------------------------------- properties

// A plain re-statement of docs/SPEC.md §4 to check Fold against.
Projection ReferenceFold(const EntityType& type, const EntityRef& ref,
                         std::vector<RankedEvent> events, std::vector<std::string>* verdicts) {
  auto key = [](const RankedEvent& e) {
    return std::make_tuple(e.event.occurred_at, e.event.version.has_value(),
                           e.event.version.value_or(0), e.rank, e.event.event_id);
  };
  std::sort(events.begin(), events.end(),
            [&](const RankedEvent& a, const RankedEvent& b) { return key(a) < key(b); });
  Projection p;
  p.entity = ref.entity;
  p.id = ref.id;
  verdicts->clear();
  for (const RankedEvent& e : events) {
    const Transition& t = type.transitions[e.rank];
    const bool allowed = std::find(t.from.begin(), t.from.end(), p.state) != t.from.end();
    const bool stale = e.event.version && p.version && *p.version >= *e.event.version;
    if (!allowed || stale) {
      verdicts->push_back(!allowed ? "impossible transition" : "stale version");
      // Reasons are compared through the verdicts; here only who and what.
      p.rejected.push_back(Rejection{e.event.event_id, e.event.type, ""});
      continue;
    }
    verdicts->push_back("");
    p.state = t.to;
    for (const Field& f : e.event.data) {
      auto it = std::find_if(p.fields.begin(), p.fields.end(),
                             [&](const Field& g) { return g.name == f.name; });
      if (it == p.fields.end()) {
        p.fields.push_back(f);
      } else {
        it->json = f.json;
      }
    }
    if (e.event.version) p.version = e.event.version;
    p.occurred_at = e.event.occurred_at;
    ++p.applied;
  }
  return p;
}

std::vector<RankedEvent> RandomProductEvents(std::mt19937_64& rng) {
  static const char* const kTypes[] = {"product.created", "product.updated", "product.deleted"};
  static const char* const kNames[] = {"name", "price", "sku", "color"};
  std::uniform_int_distribution<int> count(1, 12);
  std::uniform_int_distribution<int> type(0, 2);
  std::uniform_int_distribution<int> time(0, 3);      // few instants: ties
  std::uniform_int_distribution<int> version(-1, 3);  // -1: absent
  std::uniform_int_distribution<int> nfields(0, 3);
  std::uniform_int_distribution<int> name(0, 3);
  std::uniform_int_distribution<int> value(0, 99);
  const int n = count(rng);
  std::vector<RankedEvent> events;
  for (int i = 0; i < n; ++i) {
    const int v = version(rng);
    std::vector<Field> data;
    for (int k = nfields(rng); k > 0; --k) {
      data.push_back({kNames[name(rng)], std::to_string(value(rng))});
    }
    // Ids of mixed length and case, unique by their index.
    std::string id = std::string(1, "aBz"[i % 3]) + std::to_string(i * 7 % 13) +
                     std::string(i % 2, 'x') + "_" + std::to_string(i);
    events.push_back(Ev(std::move(id), kTypes[type(rng)], kT0 + time(rng),
                        v < 0 ? std::nullopt : std::optional<int64_t>(v), std::move(data)));
  }
  return events;
}

TEST(FoldTest, AnyArrivalOrderFoldsTheSameProperty) {
  const uint64_t seed = test_util::TestSeed("FoldTest.AnyArrivalOrderFoldsTheSameProperty", 4242);
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const EntityType& product = Entity("product");
  const EntityRef ref{"product", "p1"};
  int non_trivial = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<RankedEvent> events = RandomProductEvents(rng);
    std::vector<std::string> first_verdicts;
    std::vector<RankedEvent> sorted = events;
    const Projection first = Fold(product, ref, &sorted, &first_verdicts).value();
    if (first.applied > 0 && !first.rejected.empty()) ++non_trivial;

    std::vector<std::string> want_verdicts;
    const Projection want = ReferenceFold(product, ref, events, &want_verdicts);
    Projection first_without_reasons = first;
    for (Rejection& r : first_without_reasons.rejected) r.reason.clear();
    ASSERT_EQ(first_without_reasons, want) << "round " << round;
    ASSERT_EQ(first_verdicts.size(), want_verdicts.size());
    for (size_t i = 0; i < want_verdicts.size(); ++i) {
      ASSERT_EQ(first_verdicts[i].empty(), want_verdicts[i].empty());
      if (!want_verdicts[i].empty()) {
        ASSERT_EQ(first_verdicts[i].rfind(want_verdicts[i], 0), 0u) << first_verdicts[i];
      }
    }

    for (int perm = 0; perm < 20; ++perm) {
      std::vector<RankedEvent> shuffled = events;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      std::vector<std::string> verdicts;
      const Projection p = Fold(product, ref, &shuffled, &verdicts).value();
      ASSERT_EQ(p, first) << "round " << round << " permutation " << perm;
      ASSERT_EQ(verdicts, first_verdicts);
      for (size_t i = 0; i < shuffled.size(); ++i) {
        ASSERT_EQ(shuffled[i].event, sorted[i].event);
      }
    }
  }
  // The generator must exercise both verdicts, or the property says little.
  EXPECT_GT(non_trivial, 30);
}

}  // namespace
}  // namespace eventfold
