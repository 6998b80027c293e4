// Concurrency of the Store: dedup under racing deliveries of one event_id,
// parallel ingest of distinct entities, racing events of one entity (the
// result must equal the sequential fold), and group commit on a real disk.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "eventfold/store.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold {
namespace {

using storage_test::GenerateEvents;
using storage_test::Issued;
using storage_test::ListAll;
using storage_test::Refunded;
using storage_test::ScratchDir;
using storage_test::TestSeed;

constexpr int kThreads = 8;

std::unique_ptr<Store> OpenOrDie(const std::string& path, const Options& o) {
  Result<std::unique_ptr<Store>> s = Store::Open(path, o);
  if (!s.ok()) {
    ADD_FAILURE() << s.status().ToString();
    return nullptr;
  }
  return std::move(*s);
}

TEST(storage_concurrency, OneEventIdFromEightThreadsIsAcceptedOnce) {
  auto env = storage_test::NewMemEnv();
  Options o;
  o.env = env.get();
  auto store = OpenOrDie("/mem/dedup", o);
  ASSERT_TRUE(store);
  constexpr int kRounds = 50;
  std::barrier start(kThreads);
  // outcomes[round][thread]
  std::vector<std::vector<Outcome>> outcomes(kRounds, std::vector<Outcome>(kThreads));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        // Every round half the ids share a receipt with the previous round,
        // so the entity stripe is contended as well as the event_id one.
        const std::string body =
            Issued("evt_" + std::to_string(round), "rcp_" + std::to_string(round / 2),
                   round % 2 ? "2026-11-29T11:00:00Z" : "2026-11-29T10:00:00Z");
        start.arrive_and_wait();
        outcomes[round][t] = store->Ingest(body).outcome;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int round = 0; round < kRounds; ++round) {
    const auto accepted =
        std::count(outcomes[round].begin(), outcomes[round].end(), Outcome::kAccepted);
    const auto duplicate =
        std::count(outcomes[round].begin(), outcomes[round].end(), Outcome::kDuplicate);
    EXPECT_EQ(accepted, 1) << "round " << round;
    EXPECT_EQ(duplicate, kThreads - 1) << "round " << round;
  }
  const Counters c = store->counters();
  EXPECT_EQ(c.accepted, uint64_t{kRounds});
  EXPECT_EQ(c.duplicate, uint64_t{kRounds} * (kThreads - 1));
  // Each receipt got two issues (one per round of the pair): one applied.
  for (int r = 0; r < kRounds / 2; ++r) {
    Result<Projection> p = store->Get("receipt", "rcp_" + std::to_string(r));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->applied, 1u);
    EXPECT_EQ(p->rejected.size(), 1u);
    Result<EntityLog> log = store->Log("receipt", "rcp_" + std::to_string(r));
    ASSERT_TRUE(log.ok());
    EXPECT_EQ(log->fold_order.size(), 2u) << "a log entry per event, none duplicated";
  }
}

TEST(storage_concurrency, DistinctEntitiesInParallel) {
  auto env = storage_test::NewMemEnv();
  Options o;
  o.env = env.get();
  auto store = OpenOrDie("/mem/parallel", o);
  ASSERT_TRUE(store);
  constexpr int kReceiptsPerThread = 250;  // 2 events each: 8 x 500 events
  std::barrier start(kThreads);
  std::atomic<int> not_accepted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kReceiptsPerThread; ++i) {
        const std::string rid = "rcp_" + std::to_string(t) + "_" + std::to_string(i);
        const std::string id = std::to_string(t) + "_" + std::to_string(i);
        // Half the receipts get their refund first (a re-fold).
        std::vector<std::string> bodies = {Issued("i_" + id, rid), Refunded("r_" + id, rid)};
        if (i % 2) std::swap(bodies[0], bodies[1]);
        for (const std::string& b : bodies) {
          if (store->Ingest(b).outcome != Outcome::kAccepted) ++not_accepted;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(not_accepted.load(), 0);
  const Counters c = store->counters();
  EXPECT_EQ(c.accepted, uint64_t{kThreads} * kReceiptsPerThread * 2);
  EXPECT_EQ(c.duplicate, 0u);
  EXPECT_EQ(c.storage_error, 0u);
  size_t listed = 0;
  ASSERT_TRUE(store
                  ->List("receipt",
                         [&](const Projection& p) {
                           ++listed;
                           EXPECT_EQ(p.state, "refunded") << p.id;
                           EXPECT_EQ(p.applied, 2u) << p.id;
                           EXPECT_TRUE(p.rejected.empty()) << p.id;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(listed, size_t{kThreads} * kReceiptsPerThread);
}

// Ingests `deliveries` from kThreads threads, round-robin, after a barrier.
void IngestConcurrently(Store* store, const std::vector<std::string>& deliveries) {
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (size_t i = t; i < deliveries.size(); i += kThreads) {
        const IngestResult r = store->Ingest(deliveries[i]);
        if (r.outcome != Outcome::kAccepted && r.outcome != Outcome::kDuplicate) {
          ADD_FAILURE() << OutcomeName(r.outcome) << ": " << r.message;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
}

TEST(storage_concurrency, RacingEventsOfOneEntityGiveTheSequentialFold) {
  const uint64_t seed = TestSeed("RacingEventsOfOneEntityGiveTheSequentialFold", 20261129);
  std::mt19937_64 rng(seed);
  // Issue + refund (+ sometimes an impossible re-issue) of the same
  // receipts, plus versioned products and inventory; every event delivered
  // 1-3 times, shuffled, spread over threads.
  const std::vector<std::string> events = GenerateEvents(seed, 150, 40);
  std::vector<std::string> deliveries;
  for (const std::string& e : events) {
    const int copies = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < copies; ++k) deliveries.push_back(e);
  }
  std::shuffle(deliveries.begin(), deliveries.end(), rng);

  // The reference: one thread, each event once, in generation order.
  auto ref_env = storage_test::NewMemEnv();
  Options ro;
  ro.env = ref_env.get();
  ro.durability = Durability::kBuffered;
  auto reference = OpenOrDie("/mem/reference", ro);
  ASSERT_TRUE(reference);
  for (const std::string& e : events) {
    ASSERT_EQ(reference->Ingest(e).outcome, Outcome::kAccepted) << e;
  }
  const std::vector<std::string> want = ListAll(reference.get());

  for (int trial = 0; trial < 3; ++trial) {
    auto env = storage_test::NewMemEnv();
    Options o;
    o.env = env.get();
    // Late events re-fold from fold snapshots; with small intervals racing
    // transactions keep rewriting them.
    o.snapshot_interval = trial == 0 ? 1000 : trial == 1 ? 1 : 3;
    auto store = OpenOrDie("/mem/racing", o);
    ASSERT_TRUE(store);
    std::shuffle(deliveries.begin(), deliveries.end(), rng);
    IngestConcurrently(store.get(), deliveries);
    const Counters c = store->counters();
    EXPECT_EQ(c.accepted, events.size()) << "trial " << trial;
    EXPECT_EQ(c.duplicate, deliveries.size() - events.size()) << "trial " << trial;
    const std::vector<std::string> got = ListAll(store.get());
    ASSERT_EQ(got.size(), want.size()) << "trial " << trial;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i], want[i]) << "trial " << trial << ", projection " << i;
    }
    Result<VerifySummary> v = store->maintenance().Verify([](const auto&, const auto&) {});
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->differences, 0u) << "trial " << trial;
  }
}

TEST(storage_concurrency, IssueAndRefundFromDifferentThreads) {
  const uint64_t seed = TestSeed("IssueAndRefundFromDifferentThreads", 77);
  std::mt19937_64 rng(seed);
  auto env = storage_test::NewMemEnv();
  Options o;
  o.env = env.get();
  auto store = OpenOrDie("/mem/pairs", o);
  ASSERT_TRUE(store);
  constexpr int kReceipts = 400;
  // Thread t issues receipts while thread (t+1)%8 refunds them; each thread
  // works through its share in its own random order.
  std::vector<std::vector<std::string>> work(kThreads);
  for (int r = 0; r < kReceipts; ++r) {
    const std::string rid = "rcp_" + std::to_string(r);
    const int t = static_cast<int>(rng() % kThreads);
    work[t].push_back(Issued("i_" + std::to_string(r), rid));
    work[(t + 1) % kThreads].push_back(Refunded("r_" + std::to_string(r), rid));
    if (r % 10 == 0) {  // an impossible re-issue from a third thread
      work[(t + 2) % kThreads].push_back(
          Issued("x_" + std::to_string(r), rid, "2026-11-30T00:00:00Z"));
    }
  }
  for (auto& w : work) std::shuffle(w.begin(), w.end(), rng);
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (const std::string& b : work[t]) {
        const IngestResult res = store->Ingest(b);
        if (res.outcome != Outcome::kAccepted) ADD_FAILURE() << res.message;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int r = 0; r < kReceipts; ++r) {
    Result<Projection> p = store->Get("receipt", "rcp_" + std::to_string(r));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->state, "refunded") << r;
    EXPECT_EQ(p->applied, 2u) << r;
    if (r % 10 == 0) {
      ASSERT_EQ(p->rejected.size(), 1u) << r;
      EXPECT_EQ(p->rejected[0].reason, "impossible transition refunded -> issued");
    } else {
      EXPECT_TRUE(p->rejected.empty()) << r;
    }
  }
}

// Rebuilds (switching profiles back and forth) while other threads ingest
// and read. Regression test: ingest used to decode and route a delivery
// before taking the rebuild lock, so a rebuild that switched profiles in
// between made it stage the event under an entity the new profile lacks
// (null dereference in Stage); and Get/Log/List ran during a rebuild's
// drop-and-refold, reporting existing entities as not found.
TEST(storage_concurrency, RebuildWhileIngestingAndReading) {
  Result<Profile> receipts_only = Profile::FromJson(R"({"name":"receipts","entities":[
    {"name":"receipt","key":"data.receipt_id",
     "transitions":[{"type":"receipt.issued","from":["none"],"to":"issued"},
                    {"type":"receipt.refunded","from":["issued"],"to":"refunded"}]}]})");
  ASSERT_TRUE(receipts_only.ok());
  auto env = storage_test::NewMemEnv();
  Options o;
  o.env = env.get();
  o.durability = Durability::kBuffered;
  auto store = OpenOrDie("/mem/rebuilding", o);
  ASSERT_TRUE(store);
  constexpr int kReceipts = 1000;
  for (int i = 0; i < kReceipts; ++i) {
    ASSERT_EQ(store->Ingest(Issued("pre_" + std::to_string(i), "rcp_" + std::to_string(i))).outcome,
              Outcome::kAccepted);
  }
  constexpr int kWriters = 3, kPerWriter = 600;
  std::atomic<bool> stop{false};
  std::atomic<int> refused{0}, missing{0}, short_lists{0}, reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerWriter; ++i) {
        const std::string id = std::to_string(t) + "_" + std::to_string(i);
        const IngestResult r =
            store->Ingest(storage_test::Body("prd_" + id, "product.created", "2026-11-29T10:00:00Z",
                                             "{\"product_id\":\"p" + id + "\"}"));
        if (r.outcome != Outcome::kAccepted) ++refused;
      }
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; !stop; i = (i + 37) % kReceipts) {
      const std::string rid = "rcp_" + std::to_string(i);
      if (!store->Get("receipt", rid).ok()) ++missing;
      if (!store->Log("receipt", rid).ok()) ++missing;
      if (i < 37) {
        if (ListAll(store.get(), "receipt").size() != kReceipts) ++short_lists;
      }
      ++reads;
    }
  });
  for (int k = 0; k < 8; ++k) {
    Result<RebuildSummary> r =
        store->maintenance().Rebuild(k % 2 ? &Profile::ReceiptRoller() : &*receipts_only);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  for (int t = 0; t < kWriters; ++t) threads[t].join();
  stop = true;
  threads.back().join();
  std::printf("reads during rebuilds: %d\n", reads.load());
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(missing.load(), 0) << "an entity with events read as not found";
  EXPECT_EQ(short_lists.load(), 0) << "List missed projections";
  // Under the built-in profile again, every product is projected.
  ASSERT_TRUE(store->maintenance().Rebuild(&Profile::ReceiptRoller()).ok());
  EXPECT_EQ(ListAll(store.get(), "product").size(), size_t{kWriters} * kPerWriter);
  Result<VerifySummary> v = store->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->differences, 0u);
}

// profile() while rebuilds switch the profile back and forth: each reader
// holds a whole, unchanging profile (TSan saw profile() read the member a
// rebuild move-assigned, and a held Profile& dangled after the switch).
TEST(storage_concurrency, ProfileReadWhileRebuildSwitchesIt) {
  Result<Profile> receipts_only = Profile::FromJson(R"({"name":"receipts","entities":[
    {"name":"receipt","key":"data.receipt_id",
     "transitions":[{"type":"receipt.issued","from":["none"],"to":"issued"}]}]})");
  ASSERT_TRUE(receipts_only.ok());
  auto env = storage_test::NewMemEnv();
  Options o;
  o.env = env.get();
  o.durability = Durability::kBuffered;
  auto store = OpenOrDie("/mem/profile-switch", o);
  ASSERT_TRUE(store);
  ASSERT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kAccepted);
  const std::string full = Profile::ReceiptRoller().Fingerprint();
  const std::string narrow = receipts_only->Fingerprint();
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, torn{0};
  std::thread reader([&] {
    while (!stop.load()) {
      const std::shared_ptr<const Profile> p = store->profile();
      const std::string before = p->Fingerprint();
      const size_t entities = p->entities().size();
      if (before != full && before != narrow) ++torn;
      // The snapshot is immutable: a switch meanwhile does not change it.
      std::this_thread::yield();
      if (p->Fingerprint() != before || p->entities().size() != entities) ++torn;
      ++reads;
    }
  });
  for (int k = 0; k < 12; ++k) {
    Result<RebuildSummary> r =
        store->maintenance().Rebuild(k % 2 ? &Profile::ReceiptRoller() : &*receipts_only);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(store->profile()->Fingerprint(), k % 2 ? full : narrow);
  }
  stop = true;
  reader.join();
  std::printf("profile reads during rebuilds: %d\n", reads.load());
  EXPECT_EQ(torn.load(), 0);
}

TEST(storage_concurrency, VerifyWhileIngesting) {
  auto env = storage_test::NewMemEnv();
  Options o;
  o.env = env.get();
  auto store = OpenOrDie("/mem/verifying", o);
  ASSERT_TRUE(store);
  const std::vector<std::string> events = GenerateEvents(11, 300, 60);
  const size_t half = events.size() / 2;
  for (size_t i = 0; i < half; ++i) ASSERT_EQ(store->Ingest(events[i]).outcome, Outcome::kAccepted);
  std::thread writer([&] {
    for (size_t i = half; i < events.size(); ++i) {
      if (store->Ingest(events[i]).outcome != Outcome::kAccepted) ADD_FAILURE() << events[i];
    }
  });
  for (int k = 0; k < 3; ++k) {
    Result<VerifySummary> v = store->maintenance().Verify(
        [](const std::optional<Projection>& live, const std::optional<Projection>& rebuilt) {
          ADD_FAILURE() << "difference: " << (live ? ProjectionToJson(*live) : "none") << " vs "
                        << (rebuilt ? ProjectionToJson(*rebuilt) : "none");
        });
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->differences, 0u);
  }
  writer.join();
}

TEST(storage_concurrency, GroupCommitWithSyncOnDisk) {
  ScratchDir dir;
  Options o;  // durability: kSync, the default
  ASSERT_EQ(o.durability, Durability::kSync);
  constexpr int kPerThread = 250;  // 2000 synced events
  const auto t0 = std::chrono::steady_clock::now();
  {
    auto store = OpenOrDie(dir.path(), o);
    ASSERT_TRUE(store);
    std::barrier start(kThreads);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        for (int i = 0; i < kPerThread; ++i) {
          // Receipts shared between neighbouring threads: their issue and
          // refund commit in different groups.
          const std::string rid = "rcp_" + std::to_string((t / 2) * kPerThread + i);
          const std::string id = std::to_string(t) + "_" + std::to_string(i);
          const std::string body = t % 2 ? Refunded("r_" + id, rid) : Issued("i_" + id, rid);
          if (store->Ingest(body).outcome != Outcome::kAccepted) ++failures;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(store->counters().accepted, uint64_t{kThreads} * kPerThread);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("2000 synced ingests from %d threads: %.2f s\n", kThreads, seconds);
  // Everything acknowledged is there after a reopen.
  auto store = OpenOrDie(dir.path(), o);
  ASSERT_TRUE(store);
  size_t listed = 0;
  ASSERT_TRUE(store
                  ->List("receipt",
                         [&](const Projection& p) {
                           ++listed;
                           EXPECT_EQ(p.state, "refunded") << p.id;
                           EXPECT_EQ(p.applied, 2u) << p.id;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(listed, size_t{kThreads / 2} * kPerThread);
}

}  // namespace
}  // namespace eventfold
