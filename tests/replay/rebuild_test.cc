// The replay tool's engine, Store::Rebuild (include/eventfold/store.h):
// a full rebuild equals incremental materialization; it runs blue/green
// beside the live generation while ingest and reads go on, catches up and
// switches atomically; filters re-fold in place; progress is reported;
// snapshots are only a cache, and they bound what a late event re-folds;
// a profile change re-routes stored events.

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "tests/common/check_clean.h"
#include "tests/common/invoice_profile.h"
#include "tests/common/raw_generations.h"
#include "tests/replay/replay_util.h"
#include "tests/storage/storage_test_util.h"
#include "tools/history.h"

namespace eventfold {
namespace {

using storage_test::Body;
using storage_test::TestSeed;
using testing::IngestChunked;
using testing::ListAll;
using testing::MemStore;
using testing::ReferenceModel;
using SteadyClock = std::chrono::steady_clock;

constexpr int64_t kT0 = 1795000000000000;  // 2026-11-18, the history start

using test_util::kInvoiceProfile;
using test_util::RawGeneration;
using test_util::RawGenerations;

Options MemOptions(leveldb::Env* env, ManualClock* clock, uint64_t snapshot_interval) {
  Options o;
  o.env = env;
  o.clock = clock;
  o.durability = Durability::kBuffered;
  o.snapshot_interval = snapshot_interval;
  o.block_cache_bytes = 1 << 20;
  o.write_buffer_bytes = 4 << 20;
  return o;
}

std::unique_ptr<Store> MustOpen(const std::string& path, const Options& o) {
  Result<std::unique_ptr<Store>> s = Store::Open(path, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// Verify's difference count; every difference is a test failure.
uint64_t VerifyDifferences(Store* store) {
  Result<VerifySummary> v = store->maintenance().Verify(
      [](const std::optional<Projection>& live, const std::optional<Projection>& rebuilt) {
        ADD_FAILURE() << "verify difference: live "
                      << (live ? ProjectionToJson(*live) : std::string("none")) << " rebuilt "
                      << (rebuilt ? ProjectionToJson(*rebuilt) : std::string("none"));
      });
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? v->differences : UINT64_MAX;
}

// The closed store's LevelDB, opened directly (to tamper behind its back).
std::unique_ptr<leveldb::DB> RawOpen(leveldb::Env* env, const std::string& path) {
  leveldb::Options lo;
  lo.env = env;
  leveldb::DB* raw = nullptr;
  leveldb::Status s = leveldb::DB::Open(lo, path, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::unique_ptr<leveldb::DB>(raw);
}

// Projections keyed by entity and id, as docs/SPEC.md §5.4 JSON.
std::map<EntityRef, std::string> ProjectionsOf(Store* store) {
  std::map<EntityRef, std::string> out;
  Status st = store->List("", [&](const Projection& p) {
    out.emplace(EntityRef{p.entity, p.id}, ProjectionToJson(p));
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

std::vector<Delivery> Deliveries(const std::vector<std::string>& bodies) {
  std::vector<Delivery> out;
  out.reserve(bodies.size());
  for (const std::string& b : bodies) out.push_back(Delivery{{}, b});
  return out;
}

// Ingests in IngestBatch chunks; every delivery must be accepted.
void MustAcceptAll(Store* store, const std::vector<Delivery>& deliveries, size_t chunk = 1000) {
  for (size_t i = 0; i < deliveries.size(); i += chunk) {
    std::vector<Delivery> batch(
        deliveries.begin() + static_cast<ptrdiff_t>(i),
        deliveries.begin() + static_cast<ptrdiff_t>(std::min(deliveries.size(), i + chunk)));
    std::vector<IngestResult> r = store->IngestBatch(batch);
    for (size_t j = 0; j < r.size(); ++j) {
      ASSERT_EQ(r[j].outcome, Outcome::kAccepted)
          << r[j].message << " for delivery " << i + j << ": " << batch[j].body;
    }
  }
}

// A small random history: a few entities, every kind of disorder.
sim::HistoryOptions SmallHistory(uint64_t seed) {
  std::mt19937_64 rng(seed * 104729 + 7);
  auto in = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  sim::HistoryOptions o;
  o.seed = seed;
  o.receipts = in(2, 12);
  o.products = in(1, 8);
  o.inventory_updates = in(0, 6);
  o.refund_rate = in(10, 70) / 100.0;
  o.delete_rate = in(10, 60) / 100.0;
  o.duplicate_rate = in(0, 60) / 100.0;
  o.impossible_rate = in(0, 30) / 100.0;
  o.malformed = in(0, 3);
  o.conflicts = in(0, 3);
  o.target_body_bytes = static_cast<size_t>(in(150, 500));
  return o;
}

// A bigger history with about `events` distinct events.
sim::History BigHistory(uint64_t seed, size_t events) {
  sim::HistoryOptions o;
  o.seed = seed;
  o.receipts = static_cast<int>(events * 45 / 100);
  o.products = static_cast<int>(events * 9 / 100);
  o.duplicate_rate = 0.1;
  o.malformed = 0;
  o.conflicts = 0;
  o.target_body_bytes = 250;
  return sim::GenerateHistory(o);
}

std::string Issued(const std::string& event_id, const std::string& rid, int64_t at) {
  return Body(event_id, "receipt.issued", FormatTimestamp(at),
              "{\"receipt_id\":\"" + rid + "\",\"amount\":1500,\"currency\":\"THB\"}");
}

std::string Refunded(const std::string& event_id, const std::string& rid, int64_t at) {
  return Body(event_id, "receipt.refunded", FormatTimestamp(at),
              "{\"receipt_id\":\"" + rid + "\"}");
}

std::string InvoicePaid(const std::string& event_id, const std::string& invoice_id, int64_t at) {
  return Body(event_id, "invoice.paid", FormatTimestamp(at),
              "{\"invoice_id\":\"" + invoice_id + "\",\"total\":99}");
}

// ---------------------------------------------------------------------------

// Runs fn(seed, history, store) for `n` seeded small histories from `base`,
// each ingested into a fresh in-memory store whose snapshot interval (every
// event to never) follows from the seed; stops at the first failure.
template <typename Fn>
void ForEachSeededStore(uint64_t base, uint64_t n, Fn fn) {
  for (uint64_t seed = base; seed < base + n; ++seed) {
    SCOPED_TRACE("history seed " + std::to_string(seed));
    const sim::History h = sim::GenerateHistory(SmallHistory(seed));
    const uint64_t interval = std::vector<uint64_t>{1000, 1, 2, 3, 0}[seed % 5];
    SCOPED_TRACE("snapshot interval " + std::to_string(interval));
    MemStore store(interval);
    ASSERT_TRUE(store);
    IngestChunked(store.get(), h.deliveries, seed);
    fn(seed, h, store);
    if (::testing::Test::HasFailure()) return;
  }
}

// Rebuild ≡ incremental materialization: on ~100 seeded random histories the
// listing is byte-identical before and after a full rebuild with 1, 2 and 4
// worker threads, Verify finds nothing, and each rebuild is one generation.
TEST(Rebuild, EqualsIncrementalMaterializationOnSeededHistories) {
  const uint64_t base = TestSeed("Rebuild.EqualsIncrementalMaterializationOnSeededHistories", 1);
  constexpr uint64_t kSeeds = 100;
  size_t events = 0, rebuilt_entities = 0;
  ForEachSeededStore(base, kSeeds, [&](uint64_t seed, const sim::History& h, MemStore& store) {
    const std::string before = ListAll(store.get());
    ASSERT_EQ(before, ReferenceModel(h.deliveries).list) << "live projections are off";
    events += h.events.size();
    const uint32_t gen = store->Stats().generation;
    const uint32_t log_gen = store->Stats().log_generation;
    uint32_t rebuilds = 0;
    for (int threads : {1, 2, 4}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      RebuildOptions ro;
      ro.threads = threads;
      Result<RebuildSummary> sum = store->maintenance().Rebuild(ro);
      ASSERT_TRUE(sum.ok()) << sum.status().ToString();
      ++rebuilds;
      EXPECT_EQ(sum->events, h.events.size());
      EXPECT_EQ(sum->applied + sum->rejected + sum->unrouted, sum->events);
      EXPECT_EQ(store->Stats().generation, gen + rebuilds);
      EXPECT_EQ(store->Stats().log_generation, log_gen) << "the same profile keeps the logs";
      EXPECT_EQ(ListAll(store.get()), before) << "a rebuild changed the projections";
      rebuilt_entities += sum->entities;
    }
    EXPECT_EQ(VerifyDifferences(store.get()), 0u);
    // The rebuilt generation goes on from there: every delivery again is
    // no new event, and a reopen changes nothing either.
    for (Outcome o : IngestChunked(store.get(), h.deliveries, seed + 1)) {
      EXPECT_NE(o, Outcome::kAccepted);
    }
    store.Reopen();
    EXPECT_EQ(ListAll(store.get()), before);
  });
  EXPECT_GT(events, kSeeds * 15) << "histories too small to mean anything";
  EXPECT_GT(rebuilt_entities, kSeeds * 3 * 5);
}

// Every live derived record (logs and unrouted index of the log
// generation, projections and snapshots of the projection generation),
// keyed without the generation (so two stores compare equal when they hold
// the same records), and the live generations. The store is closed
// meanwhile and opened again.
std::map<std::string, std::string> LiveGenerationRecords(MemStore* store,
                                                         storage::Generations* gens = nullptr) {
  std::map<std::string, std::string> out;
  store->Close();
  {
    std::unique_ptr<leveldb::DB> db = RawOpen(store->env(), MemStore::kPath);
    if (!db) return out;
    const storage::Generations live = RawGenerations(db.get());
    if (gens) *gens = live;
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    for (std::string_view family : storage::kGenerationFamilies) {
      const uint32_t gen =
          storage::IsLiveFamily(live, live.logs, family) ? live.logs : live.projections;
      const std::string prefix = storage::GenerationPrefix(gen);
      const std::string from = storage::FamilyPrefix(gen, family);
      for (it->Seek(from); it->Valid() && it->key().starts_with(from); it->Next()) {
        out.emplace(it->key().ToString().substr(prefix.size()), it->value().ToString());
      }
    }
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  }
  store->Reopen();
  return out;
}

// A rebuild under the store's own profile keeps the live logs and folds
// them into new projections, reading event data only for snapshots; one
// with rederive_logs routes every stored event anew into logs of its own
// generation. On seeded random histories, with snapshot intervals from
// every event to never and 1 or 2 threads, both leave the very same live
// records (logs, cursors, snapshots, unrouted index) and count the same;
// the kept logs stay where they were, and nothing else is left behind.
TEST(Rebuild, KeptLogsBuildTheSameGenerationAsRederivedOnes) {
  const uint64_t base = TestSeed("Rebuild.KeptLogsBuildTheSameGenerationAsRederivedOnes", 3);
  constexpr uint64_t kSeeds = 40;
  size_t records = 0, snapshots = 0;
  ForEachSeededStore(base, kSeeds, [&](uint64_t seed, const sim::History& h, MemStore& store) {
    const int threads = 1 + static_cast<int>(seed % 2);
    RebuildOptions rederive;
    rederive.threads = threads;
    rederive.rederive_logs = true;
    Result<RebuildSummary> derived = store->maintenance().Rebuild(rederive);
    ASSERT_TRUE(derived.ok()) << derived.status().ToString();
    storage::Generations derived_gens, kept_gens;
    const std::map<std::string, std::string> want = LiveGenerationRecords(&store, &derived_gens);
    EXPECT_EQ(derived_gens.logs, derived_gens.projections) << "rederived logs are the build's own";
    RebuildOptions keep;
    keep.threads = threads;
    Result<RebuildSummary> kept = store->maintenance().Rebuild(keep);
    ASSERT_TRUE(kept.ok()) << kept.status().ToString();
    const std::map<std::string, std::string> got = LiveGenerationRecords(&store, &kept_gens);
    EXPECT_EQ(kept_gens.projections, derived_gens.projections + 1);
    EXPECT_EQ(kept_gens.logs, derived_gens.logs) << "the logs stay where they were";
    test_util::ExpectCheckClean(store.get());
    EXPECT_EQ(got.size(), want.size());
    for (const auto& [key, value] : want) {
      auto it = got.find(key);
      if (it == got.end()) {
        ADD_FAILURE() << "the rebuild keeping the logs lacks " << ::testing::PrintToString(key);
      } else if (it->second != value) {
        ADD_FAILURE() << "the rebuild keeping the logs has another value under "
                      << ::testing::PrintToString(key);
      }
    }
    EXPECT_EQ(kept->events, derived->events);
    EXPECT_EQ(kept->entities, derived->entities);
    EXPECT_EQ(kept->applied, derived->applied);
    EXPECT_EQ(kept->rejected, derived->rejected);
    EXPECT_EQ(kept->unrouted, derived->unrouted);
    const std::string reference = ReferenceModel(h.deliveries).list;
    EXPECT_EQ(ListAll(store.get()), reference);
    // Again, keeping the same logs (the old projections of a generation
    // that holds no logs go whole), then deriving them anew (the kept logs
    // and the projections beside them go): the same live records each time.
    ASSERT_TRUE(store->maintenance().Rebuild(keep).ok());
    EXPECT_EQ(LiveGenerationRecords(&store, &kept_gens), want);
    EXPECT_EQ(kept_gens.projections, derived_gens.projections + 2);
    EXPECT_EQ(kept_gens.logs, derived_gens.logs);
    test_util::ExpectCheckClean(store.get());
    ASSERT_TRUE(store->maintenance().Rebuild(rederive).ok());
    EXPECT_EQ(LiveGenerationRecords(&store, &kept_gens), want);
    EXPECT_EQ(kept_gens.projections, derived_gens.projections + 3);
    EXPECT_EQ(kept_gens.logs, kept_gens.projections);
    test_util::ExpectCheckClean(store.get());
    EXPECT_EQ(ListAll(store.get()), reference);
    records += want.size();
    for (const auto& [key, value] : want) snapshots += key.starts_with("s/");
  });
  EXPECT_GT(records, kSeeds * 20) << "histories too small to mean anything";
  EXPECT_GT(snapshots, kSeeds * 5) << "too few snapshots to exercise the whole fold";
}

// What arrives while a rebuild that keeps the logs builds is logged by
// ingest in those very logs; the catch-up must fold each such event into
// the new projections exactly once, in fold order, late ones included. On
// seeded histories, shuffled (many late events) with conflicts, the last
// 40% of the deliveries arrive during the build, with snapshot intervals
// from every event to never: the projections then equal those of the
// reference model, Verify finds nothing and Check nothing. One bigger
// history makes the catch-up run in rounds as well.
TEST(Rebuild, KeptLogsCatchUpFoldsWhatArrivedDuringTheBuild) {
  const uint64_t base = TestSeed("Rebuild.KeptLogsCatchUpFoldsWhatArrivedDuringTheBuild", 11);
  constexpr uint64_t kSeeds = 30;
  uint64_t caught_up = 0, in_rounds = 0;
  for (uint64_t seed = base; seed <= base + kSeeds; ++seed) {
    SCOPED_TRACE("history seed " + std::to_string(seed));
    const bool big = seed == base + kSeeds;
    sim::History h = big ? BigHistory(seed, 3000) : sim::GenerateHistory(SmallHistory(seed));
    std::vector<Delivery> arrival = h.deliveries;
    sim::Shuffle(&arrival, seed);
    testing::ConflictsAfterOriginals(h.events, &arrival, seed + 1);
    const size_t cut = arrival.size() * 6 / 10;
    const std::vector<Delivery> before(arrival.begin(),
                                       arrival.begin() + static_cast<ptrdiff_t>(cut));
    const std::vector<Delivery> during(arrival.begin() + static_cast<ptrdiff_t>(cut),
                                       arrival.end());
    const uint64_t interval = std::vector<uint64_t>{1, 2, 3, 1000, 0}[seed % 5];
    SCOPED_TRACE("snapshot interval " + std::to_string(interval));
    MemStore store(interval);
    ASSERT_TRUE(store);
    IngestChunked(store.get(), before, seed + 2);
    RebuildOptions ro;
    ro.threads = 1 + static_cast<int>(seed % 2);
    bool sent = false;
    // The build's last report comes after its input snapshot is taken and
    // before the catch-up: whatever is ingested here is caught up.
    ro.progress = [&](const RebuildProgress&) {
      if (std::exchange(sent, true)) return;
      IngestChunked(store.get(), during, seed + 3);
    };
    Result<RebuildSummary> sum = store->maintenance().Rebuild(ro);
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    ASSERT_TRUE(sent);
    caught_up += sum->events_caught_up + sum->events_caught_up_paused;
    in_rounds += sum->events_caught_up;
    EXPECT_EQ(ListAll(store.get()), ReferenceModel(arrival).list);
    EXPECT_EQ(VerifyDifferences(store.get()), 0u);
    test_util::ExpectCheckClean(store.get());
    // A reopen serves the same.
    store.Reopen();
    EXPECT_EQ(ListAll(store.get()), ReferenceModel(arrival).list);
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("caught up %llu events, %llu of them in rounds\n",
              static_cast<unsigned long long>(caught_up),
              static_cast<unsigned long long>(in_rounds));
  EXPECT_GT(caught_up, kSeeds * 10) << "too little arrived during the builds to mean anything";
  EXPECT_GT(in_rounds, 0u) << "the catch-up never ran in rounds";
}

// After its switch a rebuild drops the old generations' families that are
// no longer live in the background, under the m/drop marker. A drop that
// did not finish (a crash) leaves the marker, and Open deletes every dead
// family then; without the marker Open does not search the live
// generations for dead families (their deleted keys would make it slow),
// and Check reports any that someone left.
TEST(Rebuild, AnUnfinishedDropIsFinishedByOpen) {
  MemStore store(1000);
  ASSERT_TRUE(store);
  MustAcceptAll(store.get(), Deliveries({Issued("evt_1", "r1", kT0), Issued("evt_2", "r2", kT0 + 1),
                                         Refunded("evt_3", "r1", kT0 + 2)}));
  const std::string before = ListAll(store.get());
  ASSERT_TRUE(store->maintenance().Rebuild(RebuildOptions{}).ok());
  store.Close();
  // What a crash during the drop leaves: an old projection beside the kept
  // logs; with the marker, and then without it.
  auto leave = [&](bool marker) {
    std::unique_ptr<leveldb::DB> db = RawOpen(store.env(), MemStore::kPath);
    ASSERT_TRUE(db);
    const storage::Generations live = RawGenerations(db.get());
    ASSERT_NE(live.logs, live.projections) << "the rebuild kept the logs";
    std::string drop;
    EXPECT_TRUE(db->Get({}, storage::MetaKey("drop"), &drop).IsNotFound())
        << "a finished drop clears its marker";
    leveldb::WriteBatch b;
    b.Put(storage::ProjectionKey(live.logs, EntityRef{"receipt", "r9"}), "stale");
    if (marker) b.Put(storage::MetaKey("drop"), storage::EncodeText(""));
    ASSERT_TRUE(db->Write({}, &b).ok());
  };
  auto stale_left = [&] {
    std::unique_ptr<leveldb::DB> db = RawOpen(store.env(), MemStore::kPath);
    const storage::Generations live = RawGenerations(db.get());
    std::string v;
    return db->Get({}, storage::ProjectionKey(live.logs, EntityRef{"receipt", "r9"}), &v).ok();
  };
  leave(/*marker=*/true);
  store.Reopen();
  ASSERT_TRUE(store);
  EXPECT_EQ(ListAll(store.get()), before);
  store.Close();
  EXPECT_FALSE(stale_left()) << "Open finishes a drop its marker names";
  leave(/*marker=*/false);
  store.Reopen();
  ASSERT_TRUE(store);
  std::vector<CheckProblem> problems;
  Result<CheckSummary> check =
      store->maintenance().Check([&](const CheckProblem& p) { problems.push_back(p); });
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].message.find("keys of family p/"), std::string::npos)
      << problems[0].message;
  store.Close();
  EXPECT_TRUE(stale_left()) << "without the marker Open does not search the live generations";
}

// A dropped generation leaves nothing in LevelDB's tables: its deletions
// are compacted away with the values they delete. Left for LevelDB to reach
// in its own time, they sat at the front of g/ and every seek there stepped
// over each of them (every Open makes such seeks: after a re-routing
// rebuild of 1M events, 1.0-1.3 s each). The store's tables are small (64 KiB write
// buffer), so the old generation is in tables, not only in a memtable. (A
// reader's snapshot taken before the deletions keeps them, for that reader,
// until a later compaction: nothing reads here while the drop runs.)
TEST(Rebuild, ADroppedGenerationLeavesNoTableBytes) {
  const uint64_t seed = TestSeed("Rebuild.ADroppedGenerationLeavesNoTableBytes", 31);
  MemStore store(/*snapshot_interval=*/16, /*write_buffer_bytes=*/64 << 10);
  ASSERT_TRUE(store);
  const sim::History h = BigHistory(seed, 3000);
  IngestChunked(store.get(), h.deliveries, seed);
  const std::string before = ListAll(store.get());
  const uint32_t old_gen = store->Stats().generation;
  auto table_bytes = [&](uint32_t gen) {
    std::unique_ptr<leveldb::DB> db = RawOpen(store.env(), MemStore::kPath);
    EXPECT_TRUE(db);
    if (!db) return uint64_t{0};
    const std::string begin = storage::GenerationPrefix(gen);
    const std::string end = storage::PrefixEnd(begin);
    const leveldb::Range range(begin, end);
    uint64_t size = 0;
    db->GetApproximateSizes(&range, 1, &size);
    return size;
  };
  store.Close();
  const uint64_t live_bytes = table_bytes(old_gen);
  ASSERT_GT(live_bytes, 16u << 10) << "the history is too small to reach the tables";
  store.Reopen();
  ASSERT_TRUE(store);
  RebuildOptions o;
  o.rederive_logs = true;  // logs and projections both in a new generation
  ASSERT_TRUE(store->maintenance().Rebuild(o).ok());
  store.Close();  // waits for the background drop
  EXPECT_EQ(table_bytes(old_gen), 0u)
      << "the dropped generation took " << live_bytes << " table bytes before the rebuild";
  store.Reopen();
  ASSERT_TRUE(store);
  EXPECT_NE(store->Stats().generation, old_gen);
  EXPECT_EQ(ListAll(store.get()), before);
}

// A rebuild keeps the live logs as they are: a log record lost behind the
// store's back stays lost in it (and `check` reports it),
// while a rebuild that derives the logs anew restores it.
TEST(Rebuild, ACopyKeepsALostLogRecordAndRederivingRestoresIt) {
  MemStore store(1000);
  ASSERT_TRUE(store);
  MustAcceptAll(store.get(),
                Deliveries({Issued("evt_1", "r1", kT0), Refunded("evt_2", "r1", kT0 + 1),
                            Issued("evt_3", "r2", kT0 + 2)}));
  ASSERT_EQ(store->Get("receipt", "r1")->state, "refunded");
  store.Close();
  {
    std::unique_ptr<leveldb::DB> db = RawOpen(store.env(), MemStore::kPath);
    ASSERT_TRUE(db);
    const std::string log = storage::LogPrefix(RawGeneration(db.get()), EntityRef{"receipt", "r1"});
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    it->Seek(log);
    ASSERT_TRUE(it->Valid() && it->key().starts_with(log));
    it->Next();  // the second event of r1: the refund
    ASSERT_TRUE(it->Valid() && it->key().starts_with(log));
    ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), it->key()).ok());
  }
  store.Reopen();
  ASSERT_TRUE(store);

  Result<RebuildSummary> copied = store->maintenance().Rebuild(RebuildOptions{});
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(copied->events, 2u) << "the rebuild read the logs, not the stored events";
  EXPECT_EQ(store->Get("receipt", "r1")->state, "issued");
  Result<CheckSummary> check = store->maintenance().Check([](const CheckProblem&) {});
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_GT(check->problems, 0u) << "check must report the log record still missing";

  RebuildOptions rederive;
  rederive.rederive_logs = true;
  Result<RebuildSummary> derived = store->maintenance().Rebuild(rederive);
  ASSERT_TRUE(derived.ok()) << derived.status().ToString();
  EXPECT_EQ(derived->events, 3u);
  EXPECT_EQ(store->Get("receipt", "r1")->state, "refunded");
  check = store->maintenance().Check([](const CheckProblem&) {});
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->problems, 0u);
}

// Blue/green: while a full rebuild runs, writers keep ingesting and readers
// keep reading. Readers always find every entity that existed before the
// rebuild, with its final state, never a missing or half-built projection;
// events ingested during the rebuild are visible as soon as they are
// accepted and are all projected after it (the catch-up); each rebuild
// advances the generation by exactly one.
TEST(Rebuild, BlueGreenWhileIngestAndReadsGoOn) {
  const uint64_t seed = TestSeed("Rebuild.BlueGreenWhileIngestAndReadsGoOn", 2024);
  MemStore store(1000, 16 << 20);
  ASSERT_TRUE(store);
  const sim::History h = BigHistory(seed, 20000);
  ASSERT_GT(h.events.size(), 18000u);
  IngestChunked(store.get(), h.deliveries, seed);
  const std::map<EntityRef, std::string> before = ProjectionsOf(store.get());
  ASSERT_GT(before.size(), 5000u);
  std::vector<const std::pair<const EntityRef, std::string>*> entries;
  for (const auto& e : before) entries.push_back(&e);

  constexpr int kRounds = 2;
  constexpr size_t kLivePerRound = 4000;  // receipts the writer may create
  // Ingested before progress returns: ~600 events, more than the switch may
  // catch up with ingest stopped, so the rebuild must catch up in rounds.
  constexpr uint64_t kDuringRebuild = 400;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const uint32_t gen = store->Stats().generation;

    // Live receipts of this round: rcp_live_<round>_<n>. Odd ones get their
    // refund first (a late issued), even ones only an issue.
    std::vector<std::string> ids(kLivePerRound);
    for (size_t n = 0; n < ids.size(); ++n) {
      ids[n] = "rcp_live_" + std::to_string(round) + "_" + std::to_string(n);
    }
    std::atomic<size_t> confirmed{0};  // ids[0, confirmed) are fully accepted
    std::atomic<bool> go{false}, rebuild_done{false}, stop{false};
    std::atomic<uint64_t> ingested_during{0};
    std::atomic<uint64_t> reads{0}, lists{0};
    std::mutex failure_mu;
    std::string failure;
    auto fail = [&](const std::string& what) {
      std::lock_guard lock(failure_mu);
      if (failure.empty()) failure = what;
      stop = true;
    };

    std::thread writer([&] {
      while (!go && !stop) std::this_thread::sleep_for(std::chrono::microseconds(200));
      for (size_t n = 0; n < ids.size() && !stop; ++n) {
        if (rebuild_done && n >= kDuringRebuild) break;
        const std::string id = "evt_live_" + std::to_string(round) + "_" + std::to_string(n);
        const int64_t at = kT0 + 400LL * 86400000000 + static_cast<int64_t>(n) * 1000;
        std::vector<std::string> bodies;
        if (n % 2) {
          bodies = {Refunded(id + "_r", ids[n], at + 500), Issued(id + "_i", ids[n], at)};
        } else {
          bodies = {Issued(id + "_i", ids[n], at)};
        }
        for (const std::string& b : bodies) {
          IngestResult r = store->Ingest(b);
          if (r.outcome != Outcome::kAccepted) {
            fail("live ingest refused: " + std::string(OutcomeName(r.outcome)) + " " + r.message);
            return;
          }
        }
        if (!rebuild_done) ingested_during.fetch_add(1);
        confirmed.store(n + 1);
      }
    });

    auto reader = [&](bool lister, uint64_t reader_seed) {
      std::mt19937_64 rng(reader_seed);
      while (!stop) {
        if (lister) {
          // One consistent listing: every old entity present and unchanged,
          // every confirmed live receipt present.
          const size_t live_floor = confirmed.load();
          size_t old_seen = 0, live_seen = 0;
          std::string bad;
          Status st = store->List("", [&](const Projection& p) {
            auto it = before.find(EntityRef{p.entity, p.id});
            if (it != before.end()) {
              ++old_seen;
              if (ProjectionToJson(p) != it->second) bad = "changed: " + ProjectionToJson(p);
            } else if (p.id.rfind("rcp_live_" + std::to_string(round) + "_", 0) == 0) {
              ++live_seen;
            }
            return bad.empty();
          });
          if (!st.ok()) return fail("List failed: " + st.ToString());
          if (!bad.empty()) return fail("List: " + bad);
          if (old_seen != before.size()) {
            return fail("List saw " + std::to_string(old_seen) + " of " +
                        std::to_string(before.size()) + " old projections");
          }
          if (live_seen < live_floor) {
            return fail("List missed accepted live receipts: " + std::to_string(live_seen) + " < " +
                        std::to_string(live_floor));
          }
          ++lists;
        } else {
          const auto& [ref, json] = *entries[rng() % entries.size()];
          Result<Projection> p = store->Get(ref.entity, ref.id);
          if (!p.ok())
            return fail("Get " + ref.entity + "/" + ref.id + ": " + p.status().ToString());
          if (ProjectionToJson(*p) != json) {
            return fail("Get " + ref.entity + "/" + ref.id + " changed: " + ProjectionToJson(*p));
          }
          if (const size_t c = confirmed.load(); c > 0) {
            const size_t n = rng() % c;
            Result<Projection> live = store->Get("receipt", ids[n]);
            if (!live.ok()) return fail("accepted live receipt " + ids[n] + " not found");
            const std::string want = n % 2 ? "refunded" : "issued";
            if (live->state != want) {
              return fail("live receipt " + ids[n] + " is " + live->state + ", not " + want);
            }
          }
          ++reads;
        }
      }
    };
    std::thread getter(reader, false, seed + round * 10 + 1);
    std::thread lister(reader, true, seed + round * 10 + 2);

    RebuildOptions ro;
    ro.threads = 2;
    std::atomic<int> progress_calls{0};
    ro.progress = [&](const RebuildProgress&) {
      if (progress_calls.fetch_add(1) > 0) return;
      // The rebuild is under way: let the writer ingest a while before it
      // may go on (whether this is a periodic report or the build's last).
      go = true;
      const auto deadline = SteadyClock::now() + std::chrono::seconds(20);
      while (ingested_during.load() < kDuringRebuild && !stop && SteadyClock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
    const auto start = SteadyClock::now();
    Result<RebuildSummary> sum = store->maintenance().Rebuild(ro);
    const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
    rebuild_done = true;
    const uint64_t during = ingested_during.load();
    go = true;
    // Readers keep going a little past the switch.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    writer.join();
    stop = true;
    getter.join();
    lister.join();
    std::printf(
        "round %d: rebuild %.3f s, %llu receipts ingested during it, %llu gets, "
        "%llu lists\n",
        round, seconds, static_cast<unsigned long long>(during),
        static_cast<unsigned long long>(reads.load()),
        static_cast<unsigned long long>(lists.load()));
    ASSERT_TRUE(failure.empty()) << failure;
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    EXPECT_GE(progress_calls.load(), 1);
    EXPECT_GE(during, kDuringRebuild) << "the writer did not get to ingest during the rebuild";
    EXPECT_GT(reads.load(), 0u);
    EXPECT_GT(lists.load(), 0u);
    EXPECT_EQ(store->Stats().generation, gen + 1);
    // What arrived during the build (kDuringRebuild receipts, at least as
    // many events, more than the pause may take) was caught up in rounds
    // while ingest went on; the pause only took what came during the last.
    std::printf("round %d: caught up %llu events in rounds, %llu paused, pause %.3f ms\n", round,
                static_cast<unsigned long long>(sum->events_caught_up),
                static_cast<unsigned long long>(sum->events_caught_up_paused),
                sum->pause_seconds * 1e3);
    EXPECT_GE(sum->events_caught_up, kDuringRebuild);
    // Everything ingested during the rebuild is projected (the catch-up).
    const size_t written = confirmed.load();
    for (size_t n = 0; n < written; ++n) {
      Result<Projection> p = store->Get("receipt", ids[n]);
      ASSERT_TRUE(p.ok()) << ids[n] << ": " << p.status().ToString();
      EXPECT_EQ(p->state, n % 2 ? "refunded" : "issued") << ids[n];
      EXPECT_TRUE(p->rejected.empty()) << ProjectionToJson(*p);
    }
    for (size_t n = written; n < ids.size(); ++n) {
      EXPECT_TRUE(store->Get("receipt", ids[n]).status().IsNotFound());
    }
    EXPECT_EQ(VerifyDifferences(store.get()), 0u);
    for (const auto& [ref, json] : ProjectionsOf(store.get())) {
      auto it = before.find(ref);
      if (it != before.end()) {
        EXPECT_EQ(json, it->second);
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
  // The generation survives a reopen.
  const uint32_t gen = store->Stats().generation;
  store.Reopen();
  EXPECT_EQ(store->Stats().generation, gen);
}

// A second rebuild of the same store while one runs is refused with kBusy,
// whatever its filters; the running one is unaffected.
TEST(Rebuild, ASecondRebuildWhileOneRunsIsBusy) {
  const uint64_t seed = TestSeed("Rebuild.ASecondRebuildWhileOneRunsIsBusy", 77);
  MemStore store(1000);
  ASSERT_TRUE(store);
  sim::HistoryOptions ho = SmallHistory(seed);
  ho.receipts = 50;
  const sim::History h = sim::GenerateHistory(ho);
  IngestChunked(store.get(), h.deliveries, seed);
  const std::string before = ListAll(store.get());
  const uint32_t gen = store->Stats().generation;

  std::mutex mu;
  std::condition_variable cv;
  bool in_progress = false, release = false;
  RebuildOptions held;
  held.threads = 2;
  held.progress = [&](const RebuildProgress&) {
    std::unique_lock lock(mu);
    in_progress = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return release; });
  };
  Result<RebuildSummary> first = Status::Unavailable("not run");
  std::thread running([&] { first = store->maintenance().Rebuild(held); });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return in_progress; }));
  }
  Result<RebuildSummary> again = store->maintenance().Rebuild(nullptr);
  EXPECT_TRUE(again.status().IsBusy()) << again.status().ToString();
  EXPECT_NE(again.status().message().find("rebuild"), std::string::npos)
      << "unclear: " << again.status().message();
  EXPECT_NE(again.status().message().find("already running"), std::string::npos)
      << "unclear: " << again.status().message();
  RebuildOptions filtered;
  filtered.entity = "receipt";
  EXPECT_TRUE(store->maintenance().Rebuild(filtered).status().IsBusy());
  Result<Profile> other = Profile::FromJson(kInvoiceProfile);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(store->maintenance().Rebuild(&*other).status().IsBusy());
  // Reads go on meanwhile.
  EXPECT_EQ(ListAll(store.get()), before);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  running.join();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(store->Stats().generation, gen + 1);
  EXPECT_EQ(store->Stats().profile_name, "receiptroller") << "the refused one changed the profile";
  EXPECT_EQ(ListAll(store.get()), before);
  // Free again.
  Result<RebuildSummary> later = store->maintenance().Rebuild(nullptr);
  EXPECT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ(store->Stats().generation, gen + 2);
}

// Filters: one entity type, or one entity, re-folded in place (same
// generation) repair projections tampered with behind the store's back;
// bad filters are refused.
TEST(Rebuild, FiltersRefoldInPlaceAndRepairTamperedProjections) {
  const uint64_t seed = TestSeed("Rebuild.FiltersRefoldInPlaceAndRepairTamperedProjections", 5);
  MemStore store(2);
  ASSERT_TRUE(store);
  sim::HistoryOptions ho = SmallHistory(seed);
  ho.receipts = 12;
  ho.products = 6;
  ho.inventory_updates = 4;
  const sim::History h = sim::GenerateHistory(ho);
  IngestChunked(store.get(), h.deliveries, seed);
  const std::map<EntityRef, std::string> healthy = ProjectionsOf(store.get());
  std::vector<EntityRef> receipts, products;
  for (const auto& [ref, json] : healthy) {
    if (ref.entity == "receipt") receipts.push_back(ref);
    if (ref.entity == "product") products.push_back(ref);
  }
  ASSERT_GE(receipts.size(), 3u);
  ASSERT_GE(products.size(), 1u);
  const std::vector<EntityRef> tampered = {receipts[0], receipts[2], products[0]};
  const uint32_t gen = store->Stats().generation;

  store.Close();
  {
    std::unique_ptr<leveldb::DB> db = RawOpen(store.env(), MemStore::kPath);
    ASSERT_TRUE(db);
    const uint32_t live = RawGeneration(db.get());
    ASSERT_EQ(live, gen);
    for (const EntityRef& ref : tampered) {
      const std::string key = storage::ProjectionKey(live, ref);
      std::string value;
      ASSERT_TRUE(db->Get(leveldb::ReadOptions(), key, &value).ok()) << ref.id;
      Result<storage::ProjectionState> st = storage::DecodeProjection(key, value);
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      st->projection.state = "damaged";
      st->projection.applied += 7;
      ASSERT_TRUE(db->Put(leveldb::WriteOptions(), key, storage::EncodeProjection(*st)).ok());
    }
  }
  store.Reopen();
  ASSERT_TRUE(store);
  for (const EntityRef& ref : tampered) {
    EXPECT_EQ(store->Get(ref.entity, ref.id)->state, "damaged");
  }
  Result<VerifySummary> v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->differences, 3u);

  auto json_of = [&](const EntityRef& ref) {
    Result<Projection> p = store->Get(ref.entity, ref.id);
    return p.ok() ? ProjectionToJson(*p) : p.status().ToString();
  };

  // One entity.
  RebuildOptions one;
  one.entity = "receipt";
  one.id = receipts[0].id;
  Result<RebuildSummary> sum = store->maintenance().Rebuild(one);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->entities, 1u);
  EXPECT_EQ(json_of(receipts[0]), healthy.at(receipts[0]));
  EXPECT_EQ(store->Get("receipt", receipts[2].id)->state, "damaged");
  EXPECT_EQ(store->Get("product", products[0].id)->state, "damaged");
  EXPECT_EQ(store->Stats().generation, gen) << "an in-place re-fold switched generations";

  // One entity type.
  RebuildOptions type;
  type.entity = "receipt";
  sum = store->maintenance().Rebuild(type);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->entities, receipts.size());
  EXPECT_EQ(json_of(receipts[2]), healthy.at(receipts[2]));
  EXPECT_EQ(store->Get("product", products[0].id)->state, "damaged");
  v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->differences, 1u);

  type.entity = "product";
  sum = store->maintenance().Rebuild(type);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->entities, products.size());
  EXPECT_EQ(ProjectionsOf(store.get()), healthy);
  EXPECT_EQ(VerifyDifferences(store.get()), 0u);
  EXPECT_EQ(store->Stats().generation, gen);

  // Re-folded in place, the entity still takes late events correctly (its
  // snapshots were rewritten along with it).
  const std::string late = Refunded("evt_late_refund", receipts[2].id, kT0 - 1000000);
  EXPECT_EQ(store->Ingest(late).outcome, Outcome::kAccepted);
  EXPECT_EQ(VerifyDifferences(store.get()), 0u);

  // Bad filters.
  RebuildOptions bad;
  bad.id = receipts[0].id;
  Result<RebuildSummary> r = store->maintenance().Rebuild(bad);
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << r.status().ToString();
  EXPECT_FALSE(r.status().message().empty());

  Result<Profile> other = Profile::FromJson(kInvoiceProfile);
  ASSERT_TRUE(other.ok());
  bad = RebuildOptions{};
  bad.entity = "receipt";
  bad.profile = &*other;
  r = store->maintenance().Rebuild(bad);
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << r.status().ToString();
  EXPECT_EQ(store->Stats().profile_name, "receiptroller");

  bad = RebuildOptions{};
  bad.entity = "invoice";  // not in the store's profile
  r = store->maintenance().Rebuild(bad);
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound) << r.status().ToString();
  EXPECT_NE(r.status().message().find("invoice"), std::string::npos) << r.status().message();

  bad = RebuildOptions{};
  bad.entity = "receipt";
  bad.id = "rcp_no_such_receipt";
  r = store->maintenance().Rebuild(bad);
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound) << r.status().ToString();
  EXPECT_NE(r.status().message().find("rcp_no_such_receipt"), std::string::npos);
  EXPECT_EQ(store->Stats().generation, gen);
}

// The progress callback is called, its numbers only grow, and its final
// report counts every stored event and projection. It is timed on the
// store's Clock, not the wall's: with that clock standing still, however
// long the rebuild takes, the final report is the only one and has taken no
// time; so are the other maintenance passes' summaries.
TEST(Rebuild, ProgressIsReportedAndItsFinalReportCountsEveryEvent) {
  const uint64_t seed = TestSeed("Rebuild.ProgressIsReportedAndItsFinalReportCountsEveryEvent", 9);
  MemStore store(1000);
  ASSERT_TRUE(store);
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 300;
  ho.products = 60;
  ho.conflicts = 3;  // conflicts use arrival seqs too: gaps in the a/ range
  ho.malformed = 2;
  const sim::History h = sim::GenerateHistory(ho);
  IngestChunked(store.get(), h.deliveries, seed);
  size_t projections = 0;
  ASSERT_TRUE(store->List("", [&](const Projection&) { return ++projections; }).ok());

  for (int threads : {1, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    std::mutex mu;
    std::vector<RebuildProgress> reports;
    RebuildOptions ro;
    ro.threads = threads;
    ro.progress = [&](const RebuildProgress& p) {
      std::lock_guard lock(mu);
      reports.push_back(p);
    };
    Result<RebuildSummary> sum = store->maintenance().Rebuild(ro);
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    ASSERT_FALSE(reports.empty()) << "no progress reported";
    for (size_t i = 1; i < reports.size(); ++i) {
      EXPECT_GE(reports[i].events_done, reports[i - 1].events_done);
      EXPECT_GE(reports[i].entities_done, reports[i - 1].entities_done);
      EXPECT_GE(reports[i].seconds, reports[i - 1].seconds);
    }
    for (const RebuildProgress& p : reports) EXPECT_LE(p.events_done, p.events_total);
    const RebuildProgress& last = reports.back();
    EXPECT_EQ(reports.size(), 1u) << "a periodic report while the store's clock stood still";
    EXPECT_EQ(last.seconds, 0.0);
    EXPECT_EQ(last.events_done, h.events.size());
    EXPECT_EQ(last.events_total, last.events_done) << "the final report is not at 100%";
    EXPECT_EQ(last.entities_done, projections);
    EXPECT_EQ(sum->events, h.events.size());
  }

  // An in-place re-fold reports too, on the same Clock; its final report is
  // complete and the only one.
  std::vector<RebuildProgress> reports;
  RebuildOptions ro;
  ro.entity = "receipt";
  ro.progress = [&](const RebuildProgress& p) { reports.push_back(p); };
  Result<RebuildSummary> sum = store->maintenance().Rebuild(ro);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports.back().events_done, sum->events);
  EXPECT_EQ(reports.back().events_total, sum->events);
  EXPECT_EQ(reports.back().entities_done, sum->entities);
  EXPECT_EQ(reports.back().seconds, 0.0);
  EXPECT_EQ(sum->seconds, 0.0);
  EXPECT_GT(sum->events, 300u);

  // Every other maintenance summary is timed on the store's Clock too (the
  // full rebuild's, verify's, check's and gc's read the steady clock once).
  Result<RebuildSummary> full = store->maintenance().Rebuild(RebuildOptions());
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->seconds, 0.0) << "full rebuild";
  Result<VerifySummary> verify = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(verify.ok()) << verify.status().ToString();
  EXPECT_EQ(verify->seconds, 0.0) << "verify";
  Result<CheckSummary> check = store->maintenance().Check([](const CheckProblem&) {});
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->seconds, 0.0) << "check";
  Result<GcSummary> gc = store->maintenance().Gc(GcOptions());
  ASSERT_TRUE(gc.ok()) << gc.status().ToString();
  EXPECT_EQ(gc->seconds, 0.0) << "gc";
}

// Snapshots are a cache. A store that loses every fold snapshot lists the
// same projections, and late events then fold exactly as in a twin store
// that kept its snapshots and a store that never takes any.
TEST(Rebuild, SnapshotsAreOnlyACache) {
  const uint64_t seed = TestSeed("Rebuild.SnapshotsAreOnlyACache", 31337);
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 40;
  ho.products = 12;
  ho.inventory_updates = 30;  // long inventory and product logs
  ho.duplicate_rate = 0.3;
  ho.malformed = 2;
  ho.conflicts = 2;
  ho.target_body_bytes = 200;
  const sim::History h = sim::GenerateHistory(ho);
  std::vector<Delivery> arrival = h.deliveries;
  sim::Shuffle(&arrival, seed);  // many late events
  testing::ConflictsAfterOriginals(h.events, &arrival, seed + 1);
  const size_t cut = arrival.size() * 6 / 10;
  const std::vector<Delivery> first(arrival.begin(), arrival.begin() + static_cast<ptrdiff_t>(cut));
  const std::vector<Delivery> second(arrival.begin() + static_cast<ptrdiff_t>(cut), arrival.end());

  MemStore lost(3), kept(3), none(0);
  ASSERT_TRUE(lost && kept && none);
  for (MemStore* s : {&lost, &kept, &none}) IngestChunked(s->get(), first, seed + 2);
  const std::string before = ListAll(lost.get());
  ASSERT_EQ(before, ListAll(kept.get()));
  ASSERT_EQ(before, ListAll(none.get()));
  EXPECT_GT(lost->counters().late, 20u) << "the shuffle made too few late events";

  // Drop every snapshot of the live generation behind the store's back.
  lost.Close();
  size_t dropped = 0;
  {
    std::unique_ptr<leveldb::DB> db = RawOpen(lost.env(), MemStore::kPath);
    ASSERT_TRUE(db);
    const std::string gen_prefix = storage::GenerationPrefix(RawGeneration(db.get()));
    const std::string snaps = gen_prefix + "s/";
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    leveldb::WriteBatch batch;
    for (it->Seek(snaps); it->Valid() && it->key().starts_with(snaps); it->Next()) {
      batch.Delete(it->key());
      ++dropped;
    }
    ASSERT_TRUE(it->status().ok());
    it.reset();
    ASSERT_TRUE(db->Write(leveldb::WriteOptions(), &batch).ok());
    it.reset(db->NewIterator(leveldb::ReadOptions()));
    it->Seek(snaps);
    EXPECT_FALSE(it->Valid() && it->key().starts_with(snaps));
  }
  ASSERT_GT(dropped, 50u) << "the store had too few snapshots to lose";
  lost.Reopen();
  ASSERT_TRUE(lost);
  EXPECT_EQ(ListAll(lost.get()), before);

  // More late events into the same entities.
  const Counters c_lost = lost->counters(), c_kept = kept->counters(), c_none = none->counters();
  std::vector<std::vector<Outcome>> outcomes;
  for (MemStore* s : {&lost, &kept, &none})
    outcomes.push_back(IngestChunked(s->get(), second, seed + 3));
  EXPECT_EQ(outcomes[0], outcomes[1]);
  EXPECT_EQ(outcomes[0], outcomes[2]);
  const std::string after = ListAll(lost.get());
  EXPECT_NE(after, before);
  EXPECT_EQ(after, ListAll(kept.get())) << "lost snapshots changed a fold";
  EXPECT_EQ(after, ListAll(none.get())) << "snapshots changed a fold";
  EXPECT_EQ(after, ReferenceModel(arrival).list);
  for (MemStore* s : {&lost, &kept, &none}) EXPECT_EQ(VerifyDifferences(s->get()), 0u);

  // The same late events; the work differs only by the snapshots at hand:
  // none re-folds from scratch, kept from its nearest snapshot, and lost
  // from scratch until it has taken new ones.
  const uint64_t late = lost->counters().late - c_lost.late;
  EXPECT_GT(late, 10u);
  EXPECT_EQ(kept->counters().late - c_kept.late, late);
  EXPECT_EQ(none->counters().late - c_none.late, late);
  const uint64_t r_lost = lost->counters().refolded - c_lost.refolded;
  const uint64_t r_kept = kept->counters().refolded - c_kept.refolded;
  const uint64_t r_none = none->counters().refolded - c_none.refolded;
  std::printf("late %llu; refolded: no snapshots %llu, lost snapshots %llu, kept %llu\n",
              static_cast<unsigned long long>(late), static_cast<unsigned long long>(r_none),
              static_cast<unsigned long long>(r_lost), static_cast<unsigned long long>(r_kept));
  EXPECT_GE(r_none, r_lost);
  EXPECT_GE(r_lost, r_kept);
  EXPECT_GT(r_none, r_kept) << "snapshots saved no work at all";

  // And a rebuild of each still lists the same.
  for (MemStore* s : {&lost, &kept, &none}) {
    ASSERT_TRUE((*s)->maintenance().Rebuild(nullptr).ok());
    EXPECT_EQ(ListAll(s->get()), after);
  }
}

// A late event re-folds only the events after the nearest snapshot before
// it, however long the entity's log: Counters::refolded says how many.
TEST(Rebuild, LateEventIntoAHundredThousandEventEntityRefoldsOneInterval) {
  constexpr int64_t kEvents = 100000;
  constexpr uint64_t kInterval = 1000;
  auto env = storage_test::NewMemEnv();
  ManualClock clock(kT0);
  const std::string path = "/mem/long";
  std::unique_ptr<Store> store = MustOpen(path, MemOptions(env.get(), &clock, kInterval));
  ASSERT_TRUE(store);
  // Event #i (1-based) at kT0 + i ms, version i: in order.
  auto at = [](int64_t i) { return kT0 + i * 1000; };
  const auto start = SteadyClock::now();
  std::vector<Delivery> chunk;
  for (int64_t i = 1; i <= kEvents; ++i) {
    chunk.push_back(
        Delivery{{},
                 Body("inv_" + std::to_string(i), "inventory.updated", FormatTimestamp(at(i)),
                      "{\"product_id\":\"prd_big\",\"qty\":" + std::to_string(i % 1000) + "}", i)});
    if (chunk.size() == 5000 || i == kEvents) {
      MustAcceptAll(store.get(), chunk, chunk.size());
      chunk.clear();
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  const double ingest_s = std::chrono::duration<double>(SteadyClock::now() - start).count();
  Counters c = store->counters();
  EXPECT_EQ(c.late, 0u);
  EXPECT_EQ(c.refolded, 0u);
  Result<Projection> p = store->Get("inventory", "prd_big");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->applied, static_cast<uint64_t>(kEvents));
  EXPECT_EQ(p->version, kEvents);

  // Late, between #99,500 and #99,501, without a version (never stale): the
  // nearest snapshot before it is the one after #99,000.
  const auto late_start = SteadyClock::now();
  IngestResult r =
      store->Ingest(Body("inv_late_1", "inventory.updated", FormatTimestamp(at(99500) + 500),
                         R"({"product_id":"prd_big","qty":-1,"note":"late"})"));
  const double late_s = std::chrono::duration<double>(SteadyClock::now() - late_start).count();
  ASSERT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  Counters c1 = store->counters();
  EXPECT_EQ(c1.late, c.late + 1);
  const uint64_t near_end = c1.refolded - c.refolded;
  EXPECT_GE(near_end, 501u) << "must re-fold at least the events after it";
  EXPECT_LE(near_end, kInterval + 5) << "re-folded more than one snapshot interval";
  p = store->Get("inventory", "prd_big");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->applied, static_cast<uint64_t>(kEvents) + 1);
  EXPECT_EQ(p->version, kEvents);
  EXPECT_EQ(p->state, "tracked");
  EXPECT_EQ(VerifyDifferences(store.get()), 0u);

  // Late near the beginning (between #10 and #11): no snapshot before it,
  // so the whole log is re-folded — the counter means what it says.
  r = store->Ingest(Body("inv_late_2", "inventory.updated", FormatTimestamp(at(10) + 500),
                         R"({"product_id":"prd_big","qty":-2})"));
  ASSERT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  Counters c2 = store->counters();
  EXPECT_EQ(c2.late, c1.late + 1);
  const uint64_t near_start = c2.refolded - c1.refolded;
  EXPECT_GE(near_start, static_cast<uint64_t>(kEvents));
  EXPECT_LE(near_start, static_cast<uint64_t>(kEvents) + 5);

  // And the projection equals a from-scratch rebuild's.
  const std::string live = ProjectionToJson(*store->Get("inventory", "prd_big"));
  EXPECT_EQ(VerifyDifferences(store.get()), 0u);
  ASSERT_TRUE(store->maintenance().Rebuild(nullptr).ok());
  EXPECT_EQ(ProjectionToJson(*store->Get("inventory", "prd_big")), live);
  // After the rebuild a late event is still cheap (the rebuild's snapshots).
  r = store->Ingest(Body("inv_late_3", "inventory.updated", FormatTimestamp(at(99990) + 1),
                         R"({"product_id":"prd_big","qty":-3})"));
  ASSERT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  EXPECT_LE(store->counters().refolded - c2.refolded, kInterval + 5);
  EXPECT_EQ(VerifyDifferences(store.get()), 0u);
  std::printf(
      "ingest of %lld events %.2f s; near-end late event %.4f s refolded %llu; "
      "near-start late event refolded %llu\n",
      static_cast<long long>(kEvents), ingest_s, late_s, static_cast<unsigned long long>(near_end),
      static_cast<unsigned long long>(near_start));
}

// A profile change: events the old profile did not route are projected by a
// rebuild under the new one, which the store then reports and remembers; a
// store opened asking for the old profile reports it as stale.
TEST(Rebuild, AProfileChangeProjectsUnroutedEventsAndIsRemembered) {
  auto env = storage_test::NewMemEnv();
  ManualClock clock(kT0);
  const std::string path = "/mem/profiles";
  const Profile& a = Profile::ReceiptRoller();
  Result<Profile> b = Profile::FromJson(kInvoiceProfile);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_NE(a.Fingerprint(), b->Fingerprint());

  Options oa = MemOptions(env.get(), &clock, 2);
  oa.profile = a;
  std::unique_ptr<Store> store = MustOpen(path, oa);
  ASSERT_TRUE(store);
  std::vector<std::string> bodies;
  for (int i = 0; i < 20; ++i) {
    const std::string n = std::to_string(i);
    bodies.push_back(Issued("evt_i" + n, "rcp_" + n, kT0 + i * 1000000));
    bodies.push_back(InvoicePaid("evt_inv" + n, "inv_" + n, kT0 + i * 1000000));
  }
  // One invoice paid twice (the second is an impossible none-only transition).
  bodies.push_back(InvoicePaid("evt_inv_again", "inv_0", kT0 + 99000000));
  MustAcceptAll(store.get(), Deliveries(bodies), 7);
  EXPECT_EQ(store->counters().unrouted, 21u);
  EXPECT_TRUE(store->Get("invoice", "inv_0").status().IsNotFound());
  const std::string listing_a = ListAll(store.get());
  StoreStats s = store->Stats();
  EXPECT_EQ(s.profile_name, "receiptroller");
  EXPECT_EQ(s.profile_fingerprint, a.Fingerprint());
  EXPECT_FALSE(s.profile_stale);
  const uint32_t gen = s.generation;

  Result<RebuildSummary> sum = store->maintenance().Rebuild(&*b);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->events, bodies.size());
  EXPECT_EQ(sum->unrouted, 0u);
  EXPECT_EQ(sum->entities, 40u);
  s = store->Stats();
  EXPECT_EQ(s.profile_name, "receiptroller-invoices");
  EXPECT_EQ(s.profile_fingerprint, b->Fingerprint());
  EXPECT_EQ(s.generation, gen + 1);
  EXPECT_EQ(store->profile()->Fingerprint(), b->Fingerprint());
  Result<Projection> inv = store->Get("invoice", "inv_0");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->state, "paid");
  EXPECT_EQ(inv->applied, 1u);
  ASSERT_EQ(inv->rejected.size(), 1u);
  EXPECT_EQ(inv->rejected[0].reason, "impossible transition paid -> paid");
  EXPECT_EQ(store->Get("invoice", "inv_19")->state, "paid");
  EXPECT_EQ(store->Get("receipt", "rcp_19")->state, "issued");
  EXPECT_EQ(VerifyDifferences(store.get()), 0u);
  // Under the new profile a re-delivered invoice is a duplicate (its stored
  // identity is re-routed), and new ones are projected as they arrive.
  EXPECT_EQ(store->Ingest(InvoicePaid("evt_inv3", "inv_3", kT0 + 3000000)).outcome,
            Outcome::kDuplicate);
  EXPECT_EQ(store->Ingest(InvoicePaid("evt_inv_new", "inv_new", kT0)).outcome, Outcome::kAccepted);
  EXPECT_EQ(store->Get("invoice", "inv_new")->state, "paid");
  const std::string listing_b = ListAll(store.get());
  store.reset();

  // Reopened asking for A: the store keeps B, and says A's view is stale.
  store = MustOpen(path, oa);
  ASSERT_TRUE(store);
  s = store->Stats();
  EXPECT_EQ(s.profile_name, "receiptroller-invoices");
  EXPECT_EQ(s.profile_fingerprint, b->Fingerprint());
  EXPECT_TRUE(s.profile_stale);
  EXPECT_EQ(s.requested_fingerprint, a.Fingerprint());
  EXPECT_EQ(ListAll(store.get()), listing_b);
  store.reset();

  // Reopened asking for B, or for nothing: not stale.
  Options ob = MemOptions(env.get(), &clock, 2);
  ob.profile = *b;
  store = MustOpen(path, ob);
  ASSERT_TRUE(store);
  EXPECT_FALSE(store->Stats().profile_stale);
  EXPECT_TRUE(store->Stats().requested_fingerprint.empty());
  store.reset();
  store = MustOpen(path, MemOptions(env.get(), &clock, 2));
  ASSERT_TRUE(store);
  EXPECT_FALSE(store->Stats().profile_stale);

  // Back to A: the invoices are unrouted again, the rest is as before.
  ASSERT_TRUE(store->maintenance().Rebuild(&a).ok());
  EXPECT_EQ(store->Stats().profile_name, "receiptroller");
  EXPECT_TRUE(store->Get("invoice", "inv_0").status().IsNotFound());
  EXPECT_EQ(ListAll(store.get()), listing_a);
}

}  // namespace
}  // namespace eventfold
