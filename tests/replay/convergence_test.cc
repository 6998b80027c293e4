// The convergence property, the heart of eventfold (docs/SPEC.md §4): the projections
// depend only on the set of stored events. Any arrival order, any number of
// duplicates, batched or not, live or rebuilt, give the same bytes; and those
// bytes are what an independent reference fold, written from the spec text,
// computes.

#include <gtest/gtest.h>
#include <leveldb/db.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "storage/record_codec.h"
#include "tests/common/test_seed.h"
#include "tests/replay/replay_util.h"
#include "tools/history.h"

namespace eventfold {
namespace {

using testing::ConflictsAfterOriginals;
using testing::IngestChunked;
using testing::ListAll;
using testing::MemStore;
using testing::Reference;
using testing::ReferenceModel;

// A new arrival order of `h`: extra retries of random deliveries, shuffled,
// conflicting reuses kept after their originals.
std::vector<Delivery> ArrivalOrder(const sim::History& h, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Delivery> d = h.deliveries;
  const size_t extra = d.empty() ? 0 : rng() % (d.size() / 2 + 2);
  for (size_t i = 0; i < extra; ++i) d.push_back(d[rng() % d.size()]);
  sim::Shuffle(&d, rng());
  ConflictsAfterOriginals(h.events, &d, rng());
  return d;
}

struct Checked {
  std::string list;
  std::vector<Outcome> outcomes;
};

// Ingests `arrival` into a fresh store and checks (b) rebuild, (c) verify and
// (d) the reference model; returns the live listing for (a).
Checked IngestAndCheck(const std::vector<Delivery>& arrival, uint64_t seed,
                       uint64_t snapshot_interval = 1000) {
  SCOPED_TRACE("snapshot interval " + std::to_string(snapshot_interval));
  Checked out;
  MemStore store(snapshot_interval);
  if (!store) return out;
  out.outcomes = IngestChunked(store.get(), arrival, seed);
  out.list = ListAll(store.get());

  const Reference ref = ReferenceModel(arrival);
  EXPECT_EQ(out.outcomes, ref.outcomes) << "per-delivery outcomes differ from the reference";
  EXPECT_EQ(out.list, ref.list) << "live projections differ from the reference fold";

  Result<VerifySummary> v = store->maintenance().Verify(
      [](const std::optional<Projection>& live, const std::optional<Projection>& rebuilt) {
        ADD_FAILURE() << "verify difference: live "
                      << (live ? ProjectionToJson(*live) : std::string("none")) << " rebuilt "
                      << (rebuilt ? ProjectionToJson(*rebuilt) : std::string("none"));
      });
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  if (v.ok()) {
    EXPECT_EQ(v->differences, 0u);
  }

  Result<RebuildSummary> r = store->maintenance().Rebuild(nullptr);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) {
    EXPECT_EQ(r->rejected, ref.rejected);
  }
  EXPECT_EQ(ListAll(store.get()), out.list) << "projections changed by a rebuild";
  return out;
}

sim::HistoryOptions SmallHistory(uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + 1);
  auto in = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  sim::HistoryOptions o;
  o.seed = seed;
  o.receipts = in(3, 10);
  o.products = in(3, 10);
  o.inventory_updates = in(0, 4);
  o.refund_rate = in(10, 70) / 100.0;
  o.delete_rate = in(10, 60) / 100.0;
  o.duplicate_rate = in(10, 70) / 100.0;
  o.impossible_rate = in(0, 30) / 100.0;
  o.malformed = in(0, 4);
  o.conflicts = in(0, 3);
  o.target_body_bytes = static_cast<size_t>(in(150, 700));
  return o;
}

// (a)-(d) for many seeded histories, several arrival orders each.
TEST(Convergence, SeededHistoriesConvergeInEveryArrivalOrder) {
  // EVENTFOLD_CONVERGENCE_SEEDS=N runs more (a soak); the default keeps the
  // suite fast.
  const uint64_t kSeeds = test_util::EnvCount("EVENTFOLD_CONVERGENCE_SEEDS", 400);
  constexpr int kOrders = 4;
  size_t total_events = 0, total_rejected = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const sim::History h = sim::GenerateHistory(SmallHistory(seed));
    total_events += h.events.size();
    std::string first;
    for (int order = 0; order < kOrders; ++order) {
      SCOPED_TRACE("arrival order " + std::to_string(order));
      const std::vector<Delivery> arrival =
          order == 0 ? h.deliveries : ArrivalOrder(h, seed * 1000 + order);
      // Snapshots change how a late event is folded, never the result.
      const uint64_t interval = std::vector<uint64_t>{1000, 1, 2, 3}[order];
      const Checked c = IngestAndCheck(arrival, seed * 31 + order, interval);
      if (order == 0) {
        first = c.list;
        total_rejected += ReferenceModel(arrival).rejected;
        EXPECT_EQ(std::count(c.outcomes.begin(), c.outcomes.end(), Outcome::kAccepted),
                  static_cast<ptrdiff_t>(h.events.size()));
        EXPECT_EQ(std::count(c.outcomes.begin(), c.outcomes.end(), Outcome::kConflict),
                  static_cast<ptrdiff_t>(h.conflicts));
        EXPECT_EQ(std::count(c.outcomes.begin(), c.outcomes.end(), Outcome::kInvalid),
                  static_cast<ptrdiff_t>(h.malformed));
      } else {
        EXPECT_EQ(c.list, first) << "projections depend on the arrival order";
      }
      if (::testing::Test::HasFailure()) return;  // one seed's report is enough
    }
  }
  // The histories did exercise the interesting paths.
  EXPECT_GT(total_events, kSeeds * 20);
  EXPECT_GT(total_rejected, kSeeds / 4);
}

// A plain shuffle may put a conflicting reuse before its original: then that
// one is stored (first one wins) and the store still equals the reference.
TEST(Convergence, ConflictArrivingFirstWins) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    sim::HistoryOptions o = SmallHistory(seed);
    o.conflicts = 4;
    const sim::History h = sim::GenerateHistory(o);
    std::vector<Delivery> arrival = h.deliveries;
    sim::Shuffle(&arrival, seed);
    IngestAndCheck(arrival, seed, 1 + seed % 3);
    if (::testing::Test::HasFailure()) return;
  }
}

// One IngestBatch of a whole shuffled history answers and stores exactly
// what ingesting the same deliveries one by one does.
TEST(Convergence, OneBatchEqualsOneByOne) {
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    sim::HistoryOptions o;
    o.seed = seed;
    o.receipts = 20 + static_cast<int>(seed % 20);
    o.products = 8;
    o.impossible_rate = 0.1;
    o.target_body_bytes = 300;
    const sim::History h = sim::GenerateHistory(o);
    std::vector<Delivery> arrival = h.deliveries;
    for (size_t i = 0; i < arrival.size(); i += 7) arrival.push_back(arrival[i]);
    sim::Shuffle(&arrival, seed + 99);

    MemStore batched(seed % 2 ? 2 : 1000), single(seed % 2 ? 2 : 1000);
    ASSERT_TRUE(batched && single);
    const std::vector<IngestResult> a = batched->IngestBatch(arrival);
    std::vector<IngestResult> b;
    for (const Delivery& d : arrival) b.push_back(single->Ingest(d));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      SCOPED_TRACE("delivery " + std::to_string(i));
      EXPECT_EQ(a[i].outcome, b[i].outcome);
      EXPECT_EQ(a[i].event_id, b[i].event_id);
      EXPECT_EQ(a[i].entity, b[i].entity);
      EXPECT_EQ(a[i].message, b[i].message);
    }
    const std::string list = ListAll(batched.get());
    EXPECT_EQ(list, ListAll(single.get()));
    EXPECT_EQ(list, ReferenceModel(arrival).list);
    const Counters ca = batched->counters(), cb = single->counters();
    EXPECT_EQ(ca.accepted, cb.accepted);
    EXPECT_EQ(ca.duplicate, cb.duplicate);
    EXPECT_EQ(ca.conflict, cb.conflict);
    EXPECT_EQ(ca.invalid, cb.invalid);
    if (::testing::Test::HasFailure()) return;
  }
}

// Batches of hundreds of deliveries (`eventfold ingest` sends 1000) answer
// and store exactly what ingesting them one by one does: duplicates within
// a batch and across batches, conflicts, refusals, and a second delivery of
// every batch once it is stored (all duplicates, the fast path's).
TEST(Convergence, LargeBatchesEqualOneByOne) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    sim::HistoryOptions o;
    o.seed = seed;
    o.receipts = 300;
    o.products = 40;
    o.malformed = 20;
    o.conflicts = 8;
    o.target_body_bytes = 300;
    const sim::History h = sim::GenerateHistory(o);
    std::vector<Delivery> arrival = h.deliveries;
    arrival.push_back(Delivery{{}, std::string((1 << 20) + 1, ' ')});  // over the body limit
    sim::Shuffle(&arrival, seed + 7);
    ASSERT_GE(arrival.size(), size_t{1000});

    MemStore batched, single;
    ASSERT_TRUE(batched && single);
    std::mt19937_64 rng(seed);
    std::vector<IngestResult> a, b, again;
    for (size_t at = 0; at < arrival.size();) {
      const size_t n = std::min<size_t>(300 + rng() % 600, arrival.size() - at);
      const std::vector<Delivery> batch(arrival.begin() + static_cast<ptrdiff_t>(at),
                                        arrival.begin() + static_cast<ptrdiff_t>(at + n));
      for (IngestResult& r : batched->IngestBatch(batch)) a.push_back(std::move(r));
      for (IngestResult& r : batched->IngestBatch(batch)) again.push_back(std::move(r));
      for (const Delivery& d : batch) b.push_back(single->Ingest(d));
      at += n;
    }
    ASSERT_EQ(a.size(), b.size());
    size_t stored = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      SCOPED_TRACE("delivery " + std::to_string(i));
      EXPECT_EQ(a[i].outcome, b[i].outcome);
      EXPECT_EQ(a[i].event_id, b[i].event_id);
      EXPECT_EQ(a[i].entity, b[i].entity);
      EXPECT_EQ(a[i].message, b[i].message);
      // Sent again once stored: a duplicate if it was stored or a
      // duplicate, the same refusal if it was refused.
      const bool kept = a[i].outcome == Outcome::kAccepted || a[i].outcome == Outcome::kDuplicate;
      EXPECT_EQ(again[i].outcome, kept ? Outcome::kDuplicate : a[i].outcome);
      stored += a[i].outcome == Outcome::kAccepted;
      if (::testing::Test::HasFailure()) return;
    }
    EXPECT_EQ(stored, h.events.size());
    const std::string list = ListAll(batched.get());
    EXPECT_EQ(list, ListAll(single.get()));
    EXPECT_EQ(list, ReferenceModel(arrival).list);
    EXPECT_EQ(batched->counters().too_large, 2u);  // once, then again
    EXPECT_EQ(batched->counters().invalid, single->counters().invalid * 2);
  }
}

// Closing and reopening the store between deliveries changes nothing: the
// dedup index, logs, projections and sequence numbers all persist.
TEST(Convergence, ReopeningMidwayChangesNothing) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const sim::History h = sim::GenerateHistory(SmallHistory(seed));
    const std::vector<Delivery> arrival = ArrivalOrder(h, seed);
    MemStore store(/*snapshot_interval=*/2);
    ASSERT_TRUE(store);
    std::vector<Outcome> outcomes;
    std::mt19937_64 rng(seed);
    size_t i = 0;
    while (i < arrival.size()) {
      const size_t n = std::min<size_t>(arrival.size() - i, 1 + rng() % 15);
      std::vector<Delivery> batch(arrival.begin() + static_cast<ptrdiff_t>(i),
                                  arrival.begin() + static_cast<ptrdiff_t>(i + n));
      for (const IngestResult& r : store->IngestBatch(batch)) outcomes.push_back(r.outcome);
      i += n;
      store.Reopen();
      ASSERT_TRUE(store);
    }
    const Reference ref = ReferenceModel(arrival);
    EXPECT_EQ(outcomes, ref.outcomes);
    EXPECT_EQ(ListAll(store.get()), ref.list);
    Result<VerifySummary> v = store->maintenance().Verify([](auto&, auto&) {});
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->differences, 0u);
    // Everything again, after one more reopen: all duplicates or refusals.
    store.Reopen();
    ASSERT_TRUE(store);
    for (const IngestResult& r : store->IngestBatch(arrival)) {
      EXPECT_NE(r.outcome, Outcome::kAccepted) << r.event_id;
    }
    EXPECT_EQ(ListAll(store.get()), ref.list);
    if (::testing::Test::HasFailure()) return;
  }
}

// Concurrent ingest is one more arrival order: threads delivering disjoint
// slices of a history, in small batches, end in the same projections.
TEST(Convergence, ConcurrentIngestConverges) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    sim::HistoryOptions o;
    o.seed = seed;
    o.receipts = 40;
    o.products = 12;
    o.duplicate_rate = 0.5;
    o.impossible_rate = 0.1;
    o.conflicts = 0;  // which of two identities wins would depend on timing
    o.target_body_bytes = 300;
    const sim::History h = sim::GenerateHistory(o);
    std::vector<Delivery> arrival = h.deliveries;
    sim::Shuffle(&arrival, seed);
    const Reference ref = ReferenceModel(arrival);

    MemStore store(/*snapshot_interval=*/seed % 2 ? 2 : 1000);
    ASSERT_TRUE(store);
    constexpr int kThreads = 4;
    std::vector<std::vector<Outcome>> outcomes(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::vector<Delivery> mine;
        for (size_t i = static_cast<size_t>(t); i < arrival.size(); i += kThreads) {
          mine.push_back(arrival[i]);
        }
        outcomes[t] = IngestChunked(store.get(), mine, seed * 10 + static_cast<uint64_t>(t));
      });
    }
    for (std::thread& th : threads) th.join();
    size_t accepted = 0, invalid = 0;
    for (const auto& v : outcomes) {
      accepted += static_cast<size_t>(std::count(v.begin(), v.end(), Outcome::kAccepted));
      invalid += static_cast<size_t>(std::count(v.begin(), v.end(), Outcome::kInvalid));
    }
    EXPECT_EQ(accepted, h.events.size());
    EXPECT_EQ(invalid, h.malformed);
    EXPECT_EQ(ListAll(store.get()), ref.list);
    Result<VerifySummary> v = store->maintenance().Verify([](auto&, auto&) {});
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->differences, 0u);
    if (::testing::Test::HasFailure()) return;
  }
}

// A larger history through a small memtable, so projections and logs are
// also read back from table files, not only from the memtable.
TEST(Convergence, LargerHistoryThroughTableFiles) {
  sim::HistoryOptions o;
  o.seed = 4242;
  o.receipts = 300;
  o.products = 60;
  o.impossible_rate = 0.05;
  const sim::History h = sim::GenerateHistory(o);
  std::string first;
  for (int order = 0; order < 2; ++order) {
    SCOPED_TRACE("arrival order " + std::to_string(order));
    const std::vector<Delivery> arrival = order == 0 ? h.deliveries : ArrivalOrder(h, 77);
    MemStore store(/*snapshot_interval=*/order == 0 ? 1000 : 3,
                   /*write_buffer_bytes=*/64 << 10);
    ASSERT_TRUE(store);
    const std::vector<Outcome> outcomes = IngestChunked(store.get(), arrival, order);
    const Reference ref = ReferenceModel(arrival);
    EXPECT_EQ(outcomes, ref.outcomes);
    const std::string list = ListAll(store.get());
    EXPECT_EQ(list, ref.list);
    if (order == 0) first = list;
    EXPECT_EQ(list, first);
    Result<VerifySummary> v = store->maintenance().Verify([](auto&, auto&) {});
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->differences, 0u);
    ASSERT_TRUE(store->maintenance().Rebuild(nullptr).ok());
    EXPECT_EQ(ListAll(store.get()), list);
  }
}

// Verify compares the live projections with a rebuild: a projection
// tampered with behind the store's back is reported, and Rebuild heals it.
TEST(Convergence, VerifyReportsATamperedProjectionAndRebuildHealsIt) {
  const sim::History h = sim::GenerateHistory(SmallHistory(7));
  MemStore store;
  ASSERT_TRUE(store);
  store->IngestBatch(h.deliveries);
  const std::string good = ListAll(store.get());
  store.Close();
  {
    leveldb::Options lo;
    lo.env = store.env();
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(lo, MemStore::kPath, &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    // The projection record of receipt rcp_000001 (key grammar in
    // storage/key_codec.h: g/<gen>/p/<entity>\0<id>), in every generation.
    const std::string tail = std::string("/p/receipt") + '\0' + "rcp_000001";
    std::vector<std::pair<std::string, std::string>> tampered;
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string key = it->key().ToString();
      if (!key.starts_with("g/") || !key.ends_with(tail)) continue;
      Result<storage::ProjectionState> state =
          storage::DecodeProjection(key, it->value().ToString());
      ASSERT_TRUE(state.ok()) << state.status().ToString();
      state->projection.state = "tampered";
      tampered.emplace_back(key, storage::EncodeProjection(*state));
    }
    it.reset();
    ASSERT_FALSE(tampered.empty());
    for (const auto& [key, value] : tampered) {
      ASSERT_TRUE(db->Put(leveldb::WriteOptions(), key, value).ok());
    }
  }
  store.Reopen();
  ASSERT_TRUE(store);
  EXPECT_NE(ListAll(store.get()), good);
  int reported = 0;
  Result<VerifySummary> v = store->maintenance().Verify(
      [&](const std::optional<Projection>& live, const std::optional<Projection>& rebuilt) {
        ++reported;
        ASSERT_TRUE(live && rebuilt);
        EXPECT_EQ(live->id, "rcp_000001");
        EXPECT_EQ(live->state, "tampered");
        EXPECT_NE(rebuilt->state, "tampered");
      });
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->differences, 1u);
  EXPECT_EQ(reported, 1);
  ASSERT_TRUE(store->maintenance().Rebuild(nullptr).ok());
  EXPECT_EQ(ListAll(store.get()), good);
  v = store->maintenance().Verify([](auto&, auto&) {});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->differences, 0u);
}

// ---------------------------------------------------------------------------
// Hand-made edge cases, each in many (or all) arrival orders.

std::string Body(const std::string& id, const std::string& type, const std::string& at,
                 const std::string& data, const std::string& version = "") {
  std::string b =
      "{\"event_id\":\"" + id + "\",\"type\":\"" + type + "\",\"occurred_at\":\"" + at + "\"";
  if (!version.empty()) b += ",\"version\":" + version;
  return b + ",\"data\":" + data + "}";
}

std::string Receipt(const std::string& id, const std::string& more = "") {
  return "{\"receipt_id\":\"" + id + "\"" + more + "}";
}
std::string Product(const std::string& id, const std::string& more = "") {
  return "{\"product_id\":\"" + id + "\"" + more + "}";
}

struct Case {
  std::vector<std::string> events;  // the valid originals
  std::vector<Delivery> extra;      // retries, malformed, conflicts
  std::string expect_contains;      // a fragment the listing must hold
};

// Every arrival order of the case's deliveries (all of them up to 6
// deliveries, else a seeded sample) converges on the reference listing.
void RunCase(const std::string& name, const Case& c) {
  SCOPED_TRACE("case " + name);
  std::vector<Delivery> deliveries;
  for (const std::string& e : c.events) deliveries.push_back(Delivery{{}, e});
  deliveries.insert(deliveries.end(), c.extra.begin(), c.extra.end());

  std::vector<std::vector<Delivery>> orders;
  std::vector<size_t> perm(deliveries.size());
  std::iota(perm.begin(), perm.end(), 0);
  if (deliveries.size() <= 6) {
    do {
      std::vector<Delivery> o;
      for (size_t i : perm) o.push_back(deliveries[i]);
      orders.push_back(std::move(o));
    } while (std::next_permutation(perm.begin(), perm.end()));
  } else {
    for (uint64_t s = 0; s < 200; ++s) {
      std::vector<Delivery> o = deliveries;
      sim::Shuffle(&o, s);
      orders.push_back(std::move(o));
    }
  }
  std::string first;
  for (size_t i = 0; i < orders.size(); ++i) {
    SCOPED_TRACE("order " + std::to_string(i));
    ConflictsAfterOriginals(c.events, &orders[i], i);
    const Checked got = IngestAndCheck(orders[i], i, std::vector<uint64_t>{1000, 1, 2, 3}[i % 4]);
    if (i == 0) {
      first = got.list;
      EXPECT_NE(first.find(c.expect_contains), std::string::npos)
          << "listing lacks " << c.expect_contains << ":\n"
          << first;
    }
    EXPECT_EQ(got.list, first);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(ConvergenceEdges, RefundBeforeIssue) {
  RunCase("refund before issue",
          {{Body("e1", "receipt.issued", "2026-11-29T10:00:00Z", Receipt("r1", ",\"total\":100")),
            Body("e2", "receipt.refunded", "2026-11-29T11:00:00Z",
                 Receipt("r1", ",\"refund_id\":\"rf1\""))},
           {},
           "\"state\":\"refunded\""});
}

TEST(ConvergenceEdges, AllDuplicates) {
  const std::string e = Body("e1", "product.created", "2026-11-29T10:00:00.5Z",
                             Product("p1", ",\"price\":4500"), "1");
  Case c{{e}, {}, "\"applied\":1,"};
  for (int i = 0; i < 4; ++i) {
    Delivery d{{}, e};
    if (i % 2) d.headers = {{"x-rr-event-id", "e1"}};
    c.extra.push_back(d);
  }
  RunCase("all duplicates", c);
}

TEST(ConvergenceEdges, SameOccurredAtTies) {
  const std::string at = "2026-11-29T10:00:00.123456Z";
  RunCase("rank breaks a tie: issued then refunded at one instant",
          {{Body("z9", "receipt.issued", at, Receipt("r1")),
            Body("a1", "receipt.refunded", at, Receipt("r1"))},
           {},
           "\"state\":\"refunded\""});
  RunCase("event_id breaks a tie: the smaller id is applied",
          {{Body("b-2", "receipt.issued", at, Receipt("r1", ",\"till\":2")),
            Body("b-1", "receipt.issued", at, Receipt("r1", ",\"till\":1")),
            Body("b-3", "receipt.refunded", at, Receipt("r1"))},
           {},
           "\"till\":1"});
  RunCase(
      "absent version sorts before version 0",
      {{Body("v1", "product.updated", at, Product("p1", ",\"price\":2"), "0"),
        Body("v0", "product.created", at, Product("p1", ",\"price\":1")),
        Body("v2", "product.updated", "2026-11-29T10:00:01Z", Product("p1", ",\"price\":3"), "0")},
       {},
       "stale version 0 (entity is at version 0)"});
  // The same microsecond in two spellings (an offset; a 7th digit that is
  // truncated, not rounded): a tie, so the smaller event_id is applied.
  RunCase("one instant written in two offsets",
          {{Body("t2", "inventory.updated", "2026-11-29T17:00:00.000001+07:00",
                 Product("p1", ",\"on_hand\":5"), "2"),
            Body("t1", "inventory.updated", "2026-11-29T10:00:00.0000019Z",
                 Product("p1", ",\"on_hand\":7"), "2")},
           {},
           "\"on_hand\":7"});
}

TEST(ConvergenceEdges, StaleVersions) {
  RunCase("stale inventory report", {{Body("i1", "inventory.updated", "2026-11-29T10:00:00Z",
                                           Product("p1", ",\"on_hand\":5"), "5"),
                                      Body("i2", "inventory.updated", "2026-11-29T11:00:00Z",
                                           Product("p1", ",\"on_hand\":9"), "3"),
                                      Body("i3", "inventory.updated", "2026-11-29T12:00:00Z",
                                           Product("p1", ",\"on_hand\":2"), "7"),
                                      Body("i4", "inventory.updated", "2026-11-29T13:00:00Z",
                                           Product("p1", ",\"on_hand\":1"), "7")},
                                     {},
                                     "\"on_hand\":2"});
}

TEST(ConvergenceEdges, ImpossibleTransitions) {
  RunCase(
      "update before create, update after delete, never created",
      {{Body("p0", "product.updated", "2026-11-29T09:00:00Z", Product("p1", ",\"price\":1"), "0"),
        Body("p1", "product.created", "2026-11-29T10:00:00Z", Product("p1", ",\"price\":2"), "1"),
        Body("p2", "product.deleted", "2026-11-29T11:00:00Z", Product("p1"), "2"),
        Body("p3", "product.updated", "2026-11-29T12:00:00Z", Product("p1", ",\"price\":3"), "3"),
        Body("q1", "product.deleted", "2026-11-29T12:00:00Z", Product("p2"), "1"),
        Body("r9", "receipt.refunded", "2026-11-29T12:00:00Z", Receipt("r-none"))},
       {},
       "impossible transition deleted -> active"});
  RunCase("issued again after the refund",
          {{Body("e1", "receipt.issued", "2026-11-29T10:00:00Z", Receipt("r1")),
            Body("e2", "receipt.refunded", "2026-11-29T11:00:00Z", Receipt("r1")),
            Body("e3", "receipt.issued", "2026-11-29T12:00:00Z", Receipt("r1", ",\"again\":true")),
            Body("e4", "receipt.refunded", "2026-11-29T13:00:00Z", Receipt("r1"))},
           {},
           "impossible transition refunded -> issued"});
}

TEST(ConvergenceEdges, KeysFieldsAndUnroutedEvents) {
  RunCase("an integer key is its decimal text; unknown types are not projected",
          {{Body("k1", "receipt.issued", "2026-11-29T10:00:00Z",
                 "{\"receipt_id\":42,\"note\":\"a\",\"n\":{\"x\":[1,2]}}"),
            Body("k2", "receipt.refunded", "2026-11-29T10:00:01Z",
                 "{\"receipt_id\":\"42\",\"note\":\"b\",\"extra\":null}"),
            Body("k3", "customer.created", "2026-11-29T10:00:02Z", "{\"customer_id\":\"c1\"}")},
           {},
           "\"fields\":{\"receipt_id\":\"42\",\"note\":\"b\",\"n\":{\"x\":[1,2]"
           "},\"extra\":null}"});
}

TEST(ConvergenceEdges, ExtremeTimesAndVersions) {
  RunCase("year 1 to year 9999, version 0 to int64 max",
          {{Body("x1", "product.created", "0001-01-01T00:00:00Z", Product("p1"), "0"),
            Body("x2", "product.updated", "1969-12-31T23:59:59.999999Z", Product("p1"), "1"),
            Body("x3", "product.updated", "2026-11-29T10:00:00-12:00", Product("p1"), "5"),
            Body("x4", "product.updated", "2027-01-01T00:00:00Z", Product("p1"), "3"),
            Body("x5", "product.updated", "9999-12-31T23:59:59.999999Z", Product("p1"),
                 "9223372036854775807")},
           {},
           "\"version\":9223372036854775807,\"applied\":4,"});
}

TEST(ConvergenceEdges, NonAsciiKeysListBytewise) {
  Case c{{Body("u1", "receipt.issued", "2026-11-29T10:00:00Z", "{\"receipt_id\":\"rcp_\u00e9\"}"),
          Body("u2", "receipt.refunded", "2026-11-29T11:00:00Z", Receipt("rcp_\xc3\xa9")),
          Body("u3", "receipt.issued", "2026-11-29T10:00:00Z", Receipt("rcp_z")),
          Body("u4", "receipt.issued", "2026-11-29T10:00:00Z", Receipt("rcp_Z"))},
         {Delivery{{},
                   Body("u5", "receipt.issued", "2026-11-29T10:00:00Z",
                        "{\"receipt_id\":\"rcp_\u0000\"}")}},
         "\"id\":\"rcp_Z\",\"state\":\"issued\""};
  RunCase("escaped and raw UTF-8 name one entity; ids list bytewise", c);
  MemStore store;
  ASSERT_TRUE(store);
  for (const std::string& e : c.events) {
    EXPECT_EQ(store->Ingest(e).outcome, Outcome::kAccepted) << e;
  }
  std::vector<std::string> ids;
  ASSERT_TRUE(store
                  ->List("receipt",
                         [&](const Projection& p) {
                           ids.push_back(p.id);
                           return true;
                         })
                  .ok());
  EXPECT_EQ(ids, (std::vector<std::string>{"rcp_Z", "rcp_z", "rcp_\xc3\xa9"}));
}

TEST(ConvergenceEdges, MalformedAndConflictsMixedIn) {
  const std::string e1 = Body("e1", "receipt.issued", "2026-11-29T10:00:00Z", Receipt("r1"));
  Case c{{e1, Body("e2", "receipt.refunded", "2026-11-29T11:00:00Z", Receipt("r1"))},
         {Delivery{{}, Body("e2", "receipt.refunded", "2026-11-29T11:30:00Z", Receipt("r1"))},
          Delivery{{}, Body("e1", "receipt.issued", "2026-11-29T10:00:00Z", Receipt("r2"))},
          Delivery{{}, Body("e3", "receipt.issued", "2026-02-30T10:00:00Z", Receipt("r3"))},
          Delivery{{}, Body("e4", "receipt.issued", "2026-11-29T10:00:00Z", "{}")},
          Delivery{{{"X-RR-Event-Id", "e9"}}, e1}},
         "\"state\":\"refunded\""};
  RunCase("conflicts, a bad date, a missing key, a forged header", c);
}

}  // namespace
}  // namespace eventfold
