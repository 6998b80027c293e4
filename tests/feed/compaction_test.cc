// Event retention (Store::Gc): terminal entities compacted into their
// snapshot, dedup tombstones for resends, late events after compaction,
// replay of compacted entities, the store shrinking, the background pass.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "store/store_impl.h"
#include "tests/feed/feed_test_util.h"

namespace eventfold::feed_test {
namespace {

using storage_test::GenerateEvents;
using storage_test::Issued;
using storage_test::ListAll;
using storage_test::Refunded;

constexpr int64_t kDay = 24 * 3600 * kSecond;

GcOptions CompactAfterDays(int64_t days) {
  GcOptions o;
  o.compact_after_micros = days * kDay;
  return o;
}

GcSummary MustGc(Store* store, const GcOptions& options) {
  Result<GcSummary> g = store->maintenance().Gc(options);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : GcSummary{};
}

void Ingest(Store* store, const std::string& body, Outcome expected) {
  IngestResult r = store->Ingest(body);
  EXPECT_EQ(r.outcome, expected) << r.message << " for " << body;
}

// Check (which includes a rebuild aside) finds nothing, and Verify agrees.
void ExpectIntact(Store* store) {
  std::string problems;
  Result<CheckSummary> c = store->maintenance().Check(
      [&](const CheckProblem& p) { problems += p.key + ": " + p.message + "\n"; });
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->problems, 0u) << problems;
  EXPECT_GT(c->verified, 0u);
  Result<VerifySummary> v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->differences, 0u);
}

// Full rebuild, in-place re-fold of each type, and a reopen: all give back
// the same projections.
void ExpectReplaysAgree(MemStore* m) {
  const std::vector<std::string> before = ListAll(m->store());
  ASSERT_TRUE(m->store()->maintenance().Rebuild(nullptr).ok());
  EXPECT_EQ(ListAll(m->store()), before);
  const std::shared_ptr<const Profile> profile = m->store()->profile();
  for (const EntityType& type : profile->entities()) {
    RebuildOptions ro;
    ro.entity = type.name;
    Result<RebuildSummary> r = m->store()->maintenance().Rebuild(ro);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_EQ(ListAll(m->store()), before);
  m->Reopen();
  EXPECT_EQ(ListAll(m->store()), before);
}

// True when the entity has logged events (a compacted one may have none).
bool HasLog(Store* store, const std::string& entity, const std::string& id) {
  Result<EntityLog> log = store->Log(entity, id);
  return log.ok() && !log->fold_order.empty();
}

std::set<std::pair<std::string, std::string>> TerminalEntities(Store* store) {
  std::set<std::pair<std::string, std::string>> out;
  EXPECT_TRUE(store
                  ->List("",
                         [&](const Projection& p) {
                           if (p.state == "refunded" || p.state == "deleted") {
                             out.emplace(p.entity, p.id);
                           }
                           return true;
                         })
                  .ok());
  return out;
}

TEST(CompactionTest, KeepsProjectionsExactAndReplaysAgree) {
  const uint64_t seed = TestSeed("CompactionTest.KeepsProjectionsExactAndReplaysAgree", 11);
  MemStore m([](Options* o) { o->snapshot_interval = 2; });
  for (const std::string& body : GenerateEvents(seed, 30, 30)) {
    Ingest(m.store(), body, Outcome::kAccepted);
  }
  const std::vector<std::string> before = ListAll(m.store());
  const auto terminal = TerminalEntities(m.store());
  ASSERT_FALSE(terminal.empty());

  m.clock()->Advance(10 * kDay);
  GcSummary g = MustGc(m.store(), CompactAfterDays(7));
  EXPECT_EQ(g.entities_compacted, terminal.size());
  EXPECT_GE(g.events_compacted, 2 * terminal.size());
  EXPECT_EQ(g.tombstones_written, g.events_compacted);
  EXPECT_EQ(g.entities_kept_recent, 0u);
  EXPECT_EQ(ListAll(m.store()), before);
  for (const auto& [entity, id] : terminal) EXPECT_FALSE(HasLog(m.store(), entity, id)) << id;
  EXPECT_TRUE(HasLog(m.store(), "inventory", "prd_0"));

  ExpectIntact(m.store());
  ExpectReplaysAgree(&m);
  ExpectIntact(m.store());
  // Nothing new to compact.
  EXPECT_EQ(MustGc(m.store(), CompactAfterDays(7)).entities_compacted, 0u);
  EXPECT_EQ(ListAll(m.store()), before);
}

TEST(CompactionTest, ResendWithinTheTombstoneTimeIsDuplicateOrConflict) {
  MemStore m;
  Ingest(m.store(), Issued("e1", "r1"), Outcome::kAccepted);
  Ingest(m.store(), Refunded("e2", "r1"), Outcome::kAccepted);
  const std::vector<std::string> before = ListAll(m.store());
  m.clock()->Advance(8 * kDay);
  GcSummary g = MustGc(m.store(), CompactAfterDays(7));
  EXPECT_EQ(g.entities_compacted, 1u);
  EXPECT_EQ(g.tombstones_written, 2u);

  // The sender's portal resends for 30 days.
  m.clock()->Advance(30 * kDay);
  Ingest(m.store(), Issued("e1", "r1"), Outcome::kDuplicate);
  Ingest(m.store(), Refunded("e2", "r1"), Outcome::kDuplicate);
  Ingest(m.store(), Issued("e1", "r1", "2026-11-29T10:15:31Z"), Outcome::kConflict);
  Ingest(m.store(), Refunded("e2", "r2"), Outcome::kConflict);
  EXPECT_EQ(ListAll(m.store()), before);
  ExpectIntact(m.store());
  // A rebuild re-routes nothing of a tombstone: still duplicates after it.
  ASSERT_TRUE(m.store()->maintenance().Rebuild(nullptr).ok());
  Ingest(m.store(), Refunded("e2", "r1"), Outcome::kDuplicate);

  // 35 days after the compaction, not before, the tombstones go, and the
  // conflict records about them with them.
  m.clock()->Advance(5 * kDay - 1);
  g = MustGc(m.store(), GcOptions{});
  EXPECT_EQ(g.tombstones_expired, 0u);
  m.clock()->Advance(1);
  g = MustGc(m.store(), GcOptions{});
  EXPECT_EQ(g.tombstones_expired, 2u);
  EXPECT_EQ(g.conflicts_dropped, 2u);
  EXPECT_EQ(MustGc(m.store(), GcOptions{}).tombstones_expired, 0u);
  ExpectIntact(m.store());

  // Past the window a resend is a new event: folded after the compaction
  // snapshot, where a refunded receipt cannot be issued.
  Result<EntityLog> compacted = m.store()->Log("receipt", "r1");
  ASSERT_TRUE(compacted.ok()) << compacted.status().ToString();
  ASSERT_TRUE(compacted->compacted.has_value());
  EXPECT_EQ(compacted->compacted->snapshot.state, "refunded");
  EXPECT_TRUE(compacted->fold_order.empty());
  Ingest(m.store(), Issued("e1", "r1"), Outcome::kAccepted);
  // Folded from none it would apply; after the snapshot it is rejected.
  Result<EntityLog> log = m.store()->Log("receipt", "r1");
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->fold_order.size(), 1u);
  EXPECT_FALSE(log->fold_order[0].applied);
  Result<Projection> p = m.store()->Get("receipt", "r1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state, "refunded");
  ASSERT_EQ(p->rejected.size(), 1u);
  EXPECT_EQ(p->rejected[0].event_id, "e1");
  ExpectIntact(m.store());
  ExpectReplaysAgree(&m);
}

TEST(CompactionTest, ArrivalSequenceNumbersAreNeverReused) {
  MemStore m;
  Ingest(m.store(), Issued("e1", "r1"), Outcome::kAccepted);
  Ingest(m.store(), Refunded("e2", "r1"), Outcome::kAccepted);  // the newest a/ record
  m.clock()->Advance(8 * kDay);
  ASSERT_EQ(MustGc(m.store(), CompactAfterDays(7)).events_compacted, 2u);
  m.Reopen();  // the next seq is recovered past what compaction dropped
  Ingest(m.store(), Issued("e3", "r2"), Outcome::kAccepted);
  Result<EntityLog> log = m.store()->Log("receipt", "r2");
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->fold_order[0].seq, 3u);
  EXPECT_EQ(m.store()->Stats().last_seq, 3u);
  ExpectIntact(m.store());
}

TEST(CompactionTest, ProfileChangesKeepCompactedEntities) {
  MemStore m;
  Ingest(m.store(), Issued("e1", "r1"), Outcome::kAccepted);
  Ingest(m.store(), Refunded("e2", "r1"), Outcome::kAccepted);
  m.clock()->Advance(8 * kDay);
  ASSERT_EQ(MustGc(m.store(), CompactAfterDays(7)).entities_compacted, 1u);
  const std::vector<std::string> before = ListAll(m.store());

  // A profile without receipts could not route the dropped events again.
  Result<Profile> no_receipts = Profile::FromJson(
      R"({"name":"products","entities":[{"name":"product","key":"data.product_id",)"
      R"("transitions":[{"type":"product.created","from":["none"],"to":"active"}]}]})");
  ASSERT_TRUE(no_receipts.ok()) << no_receipts.status().ToString();
  Result<RebuildSummary> r = m.store()->maintenance().Rebuild(&*no_receipts);
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ListAll(m.store()), before);

  // Another profile re-routes every stored event (a new routing epoch); a
  // tombstone keeps the entity it was compacted in.
  Result<Profile> more =
      Profile::FromJson(R"({"name":"more","entities":[{"name":"receipt","key":"data.receipt_id",)"
                        R"("transitions":[{"type":"receipt.issued","from":["none"],"to":"issued"},)"
                        R"({"type":"receipt.refunded","from":["issued"],"to":"refunded"},)"
                        R"({"type":"receipt.voided","from":["issued"],"to":"voided"}]}]})");
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  r = m.store()->maintenance().Rebuild(&*more);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ListAll(m.store()), before);
  Ingest(m.store(), Refunded("e2", "r1"), Outcome::kDuplicate);
  Ingest(m.store(), Refunded("e2", "r9"), Outcome::kConflict);
  ExpectIntact(m.store());
}

// Ingest goes on during a pass: late events and resends of the entities
// being compacted. Whichever comes first, the answers and projections are
// the same, and the store stays intact.
TEST(CompactionTest, IngestDuringAPass) {
  MemStore m;
  constexpr int kReceipts = 300;
  for (int i = 0; i < kReceipts; ++i) {
    const std::string rid = "r" + std::to_string(i);
    Ingest(m.store(), Issued("i" + std::to_string(i), rid), Outcome::kAccepted);
    Ingest(m.store(), Refunded("f" + std::to_string(i), rid), Outcome::kAccepted);
  }
  m.clock()->Advance(8 * kDay);
  std::thread ingester([&] {
    for (int i = 0; i < kReceipts; ++i) {
      const std::string rid = "r" + std::to_string(i);
      // Sorts after the refund: rejected, compacted or not.
      Ingest(m.store(), Issued("late" + std::to_string(i), rid, "2026-11-30T00:00:00Z"),
             Outcome::kAccepted);
      Ingest(m.store(), Refunded("f" + std::to_string(i), rid), Outcome::kDuplicate);
    }
  });
  GcSummary g = MustGc(m.store(), CompactAfterDays(7));
  ingester.join();
  // An entity that changed under the pass waits for the next one.
  EXPECT_LE(g.entities_compacted + g.entities_kept_recent, static_cast<uint64_t>(kReceipts));
  for (int i = 0; i < kReceipts; ++i) {
    Result<Projection> p = m.store()->Get("receipt", "r" + std::to_string(i));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->state, "refunded");
    EXPECT_EQ(p->applied, 2u);
    ASSERT_EQ(p->rejected.size(), 1u);
    EXPECT_EQ(p->rejected[0].event_id, "late" + std::to_string(i));
  }
  ExpectIntact(m.store());
  ExpectReplaysAgree(&m);
  // The next pass, a week on, takes what the first one left or that changed.
  const std::vector<std::string> before = ListAll(m.store());
  m.clock()->Advance(8 * kDay);
  MustGc(m.store(), CompactAfterDays(7));
  for (int i = 0; i < kReceipts; ++i) {
    EXPECT_FALSE(HasLog(m.store(), "receipt", "r" + std::to_string(i)));
  }
  EXPECT_EQ(ListAll(m.store()), before);
  ExpectIntact(m.store());
  // Every tombstone (issued, refunded, late: three per receipt) expires.
  m.clock()->Advance(36 * kDay);
  EXPECT_EQ(MustGc(m.store(), GcOptions{}).tombstones_expired, 3u * kReceipts);
  Ingest(m.store(), Refunded("f0", "r0"), Outcome::kAccepted);
  ExpectIntact(m.store());
}

TEST(CompactionTest, TombstoneTimeHasAFloorAndACeiling) {
  MemStore m;
  GcOptions o = CompactAfterDays(1);
  o.tombstone_micros = 30 * kDay;
  EXPECT_EQ(m.store()->maintenance().Gc(o).status().code(), Status::Code::kInvalidArgument);
  // Far past a thousand years the expiry time would overflow and every
  // tombstone expire in the pass that wrote it; refused, nothing done.
  for (int64_t micros :
       {GcOptions::kMaxTombstoneMicros + 1, std::numeric_limits<int64_t>::max() - kDay}) {
    o.tombstone_micros = micros;
    Result<GcSummary> gc = m.store()->maintenance().Gc(o);
    EXPECT_EQ(gc.status().code(), Status::Code::kInvalidArgument) << micros;
    EXPECT_NE(gc.status().message().find("thousand years"), std::string::npos);
  }
  o.tombstone_micros = GcOptions::kMaxTombstoneMicros;
  EXPECT_TRUE(m.store()->maintenance().Gc(o).ok());
}

TEST(CompactionTest, NonTerminalAndRecentEntitiesAreKept) {
  MemStore m;
  Ingest(m.store(), Issued("open1", "r_open"), Outcome::kAccepted);
  Ingest(m.store(), InventoryUpdate("inv1", "p1", 1), Outcome::kAccepted);
  Ingest(m.store(), Issued("old1", "r_old"), Outcome::kAccepted);
  Ingest(m.store(), Refunded("old2", "r_old"), Outcome::kAccepted);
  m.clock()->Advance(3 * kDay);
  Ingest(m.store(), Issued("new1", "r_new"), Outcome::kAccepted);
  Ingest(m.store(), Refunded("new2", "r_new"), Outcome::kAccepted);
  // r_new: refunded, but only 5 days ago.
  m.clock()->Advance(5 * kDay);
  const std::vector<std::string> before = ListAll(m.store());

  GcSummary g = MustGc(m.store(), CompactAfterDays(7));
  EXPECT_EQ(g.entities_compacted, 1u);
  EXPECT_EQ(g.events_compacted, 2u);
  EXPECT_EQ(g.entities_kept_recent, 1u);
  EXPECT_FALSE(HasLog(m.store(), "receipt", "r_old"));
  EXPECT_EQ(m.store()->Log("receipt", "r_new")->fold_order.size(), 2u);
  EXPECT_EQ(m.store()->Log("receipt", "r_open")->fold_order.size(), 1u);
  EXPECT_EQ(m.store()->Log("inventory", "p1")->fold_order.size(), 1u);
  EXPECT_EQ(ListAll(m.store()), before);

  // Retention is opt-in: without an age nothing is compacted.
  m.clock()->Advance(100 * kDay);
  EXPECT_EQ(MustGc(m.store(), GcOptions{}).entities_compacted, 0u);
  EXPECT_TRUE(HasLog(m.store(), "receipt", "r_new"));
  ExpectIntact(m.store());
}

TEST(CompactionTest, LateEventsFoldAfterTheCompactionSnapshot) {
  MemStore m([](Options* o) { o->snapshot_interval = 2; });
  auto product = [](const std::string& event_id, const std::string& type, int64_t second,
                    int64_t version) {
    return storage_test::Body(event_id, type, FormatTimestamp(kT0 + second * kSecond),
                              R"({"product_id":"p1","price":)" + std::to_string(second) + "}",
                              version);
  };
  Ingest(m.store(), product("c1", "product.created", 0, 1), Outcome::kAccepted);
  Ingest(m.store(), product("u2", "product.updated", 10, 2), Outcome::kAccepted);
  Ingest(m.store(), product("d10", "product.deleted", 50, 10), Outcome::kAccepted);
  m.clock()->Advance(8 * kDay);
  ASSERT_EQ(MustGc(m.store(), CompactAfterDays(7)).entities_compacted, 1u);
  const Projection compacted = *m.store()->Get("product", "p1");

  // Sorts inside the dropped history (between u2 and d10): it cannot be
  // placed there any more, so it folds after the snapshot and is rejected
  // from "deleted". One that sorts after everything is rejected alike.
  Ingest(m.store(), product("u3", "product.updated", 20, 3), Outcome::kAccepted);
  Ingest(m.store(), product("u11", "product.updated", 60, 11), Outcome::kAccepted);
  Result<Projection> p = m.store()->Get("product", "p1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state, "deleted");
  EXPECT_EQ(p->fields, compacted.fields);
  EXPECT_EQ(p->version, compacted.version);
  ASSERT_EQ(p->rejected.size(), 2u);
  EXPECT_EQ(p->rejected[0].event_id, "u3");
  EXPECT_EQ(p->rejected[1].event_id, "u11");
  // The log holds what arrived since, with the verdicts of the projection.
  Result<EntityLog> log = m.store()->Log("product", "p1");
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->fold_order.size(), 2u);
  EXPECT_FALSE(log->fold_order[0].applied);
  EXPECT_EQ(log->fold_order[0].reason, p->rejected[0].reason);
  ExpectIntact(m.store());
  ExpectReplaysAgree(&m);

  // The survivors are compacted in their turn; every event id still dedups.
  const std::vector<std::string> before = ListAll(m.store());
  m.clock()->Advance(8 * kDay);
  GcSummary g = MustGc(m.store(), CompactAfterDays(7));
  EXPECT_EQ(g.entities_compacted, 1u);
  EXPECT_EQ(g.events_compacted, 2u);
  EXPECT_EQ(ListAll(m.store()), before);
  for (const char* id : {"c1", "u2", "d10"}) {
    Ingest(m.store(),
           product(id,
                   id[0] == 'c'   ? "product.created"
                   : id[0] == 'u' ? "product.updated"
                                  : "product.deleted",
                   id[0] == 'c'   ? 0
                   : id[0] == 'u' ? 10
                                  : 50,
                   id[0] == 'c'   ? 1
                   : id[0] == 'u' ? 2
                                  : 10),
           Outcome::kDuplicate);
  }
  Ingest(m.store(), product("u3", "product.updated", 20, 3), Outcome::kDuplicate);
  ExpectIntact(m.store());
  ExpectReplaysAgree(&m);
}

TEST(CompactionTest, TheStoreShrinks) {
  MemStore m;
  // Bodies carry 2 KB the projection does not keep (outside `data`), in
  // letters that do not compress away.
  std::mt19937_64 rng(7);
  auto padded = [&](const std::string& body) {
    std::string pad(2000, ' ');
    for (char& c : pad) c = static_cast<char>('a' + rng() % 26);
    return "{\"trace\":\"" + pad + "\"," + body.substr(1);
  };
  for (int i = 0; i < 200; ++i) {
    const std::string rid = "r" + std::to_string(i);
    Ingest(m.store(), padded(Issued("i" + std::to_string(i), rid)), Outcome::kAccepted);
    Ingest(m.store(), padded(Refunded("f" + std::to_string(i), rid)), Outcome::kAccepted);
  }
  ASSERT_TRUE(
      m.store()->maintenance().Compact().ok());  // everything in tables: sizes are measurable
  m.clock()->Advance(8 * kDay);
  GcOptions o = CompactAfterDays(7);
  o.compact_storage = true;
  GcSummary g = MustGc(m.store(), o);
  EXPECT_EQ(g.entities_compacted, 200u);
  EXPECT_GT(g.bytes_before, 400u * 1500);
  EXPECT_LT(g.bytes_after * 4, g.bytes_before) << g.bytes_before << " -> " << g.bytes_after;
  EXPECT_EQ(m.store()->maintenance().ApproximateBytes(), g.bytes_after);
}

// The background pass's wait is a test hook of the implementation, not part
// of the public API.
storage::StoreImpl* GcHook(Store* store) { return static_cast<storage::StoreImpl*>(store); }

TEST(CompactionTest, BackgroundPassRunsOnTheClock) {
  MemStore m([](Options* o) {
    o->gc_interval_micros = 3600 * kSecond;
    o->gc.compact_after_micros = 7 * kDay;
  });
  Ingest(m.store(), Issued("e1", "r1"), Outcome::kAccepted);
  Ingest(m.store(), Refunded("e2", "r1"), Outcome::kAccepted);
  EXPECT_EQ(GcHook(m.store())->WaitForGcPass(0, 0), 0u);  // the clock has not moved

  m.clock()->Advance(8 * kDay);
  Result<GcSummary> last = GcSummary{};
  const uint64_t passes = GcHook(m.store())->WaitForGcPass(0, 60 * kSecond, &last);
  EXPECT_EQ(passes, 1u);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_EQ(last->entities_compacted, 1u);
  EXPECT_FALSE(HasLog(m.store(), "receipt", "r1"));
  EXPECT_EQ(m.store()->Get("receipt", "r1")->state, "refunded");
  // No second pass before another interval on the clock.
  EXPECT_EQ(GcHook(m.store())->WaitForGcPass(1, 0), 1u);
  m.clock()->Advance(3600 * kSecond);
  EXPECT_EQ(GcHook(m.store())->WaitForGcPass(1, 60 * kSecond), 2u);
  m.Close();  // stops the thread
}

// Compaction between random arrival orders with resends: outcomes match a
// store that never compacts; entities not touched after their compaction
// match it exactly; everything replays to the same projections.
TEST(CompactionTest, PropertyMixedWithArrivalOrdersAndDuplicates) {
  const uint64_t seed = TestSeed("CompactionTest.PropertyMixedWithArrivalOrdersAndDuplicates", 5);
  std::mt19937_64 rng(seed);
  std::vector<std::string> events = GenerateEvents(seed, 40, 40);
  std::shuffle(events.begin(), events.end(), rng);
  MemStore reference;
  MemStore m([](Options* o) { o->snapshot_interval = 3; });
  std::vector<std::string> sent;
  // touched_after: got events after its compaction; touched: since the last gc.
  std::set<std::pair<std::string, std::string>> compacted, touched_after, touched;
  auto send = [&](const std::string& body) {
    IngestResult want = reference.store()->Ingest(body);
    IngestResult got = m.store()->Ingest(body);
    EXPECT_EQ(got.outcome, want.outcome) << got.message << " for " << body;
    if (got.outcome == Outcome::kAccepted && got.entity) {
      touched.emplace(got.entity->entity, got.entity->id);
      if (compacted.contains({got.entity->entity, got.entity->id})) {
        touched_after.emplace(got.entity->entity, got.entity->id);
      }
    }
    sent.push_back(body);
  };
  const size_t rounds = 3;
  size_t next = 0;
  for (size_t round = 0; round < rounds; ++round) {
    const size_t end = events.size() * (round + 1) / rounds;
    for (; next < end; ++next) {
      send(events[next]);
      if (rng() % 4 == 0) send(sent[rng() % sent.size()]);  // a resend of anything so far
    }
    m.clock()->Advance(10 * kDay);
    const auto terminal = TerminalEntities(m.store());
    GcSummary g = MustGc(m.store(), CompactAfterDays(7));
    size_t newly = 0;
    for (const auto& ref : terminal) {
      // Compacted now unless nothing arrived since its last compaction.
      if (!compacted.contains(ref) || touched.contains(ref)) ++newly;
      compacted.insert(ref);
    }
    EXPECT_EQ(g.entities_compacted, newly);
    touched.clear();
  }
  for (int i = 0; i < 50; ++i) send(sent[rng() % sent.size()]);

  std::map<std::pair<std::string, std::string>, std::string> want;
  ASSERT_TRUE(reference.store()
                  ->List("",
                         [&](const Projection& p) {
                           want[{p.entity, p.id}] = ProjectionToJson(p);
                           return true;
                         })
                  .ok());
  size_t compared = 0;
  ASSERT_TRUE(m.store()
                  ->List("",
                         [&](const Projection& p) {
                           const std::pair<std::string, std::string> ref{p.entity, p.id};
                           if (!touched_after.contains(ref)) {
                             EXPECT_EQ(ProjectionToJson(p), want[ref]);
                             ++compared;
                           }
                           return true;
                         })
                  .ok());
  EXPECT_EQ(compared, want.size() - touched_after.size());
  EXPECT_FALSE(compacted.empty());
  std::printf("%zu entities, %zu compacted, %zu of them touched after\n", want.size(),
              compacted.size(), touched_after.size());
  ExpectIntact(m.store());
  ExpectReplaysAgree(&m);
}

}  // namespace
}  // namespace eventfold::feed_test
