// Power cuts, I/O errors and a full disk, injected with FaultEnv
// (tests/reliability/fault_env.h) under a store using the default
// durability (kSync) unless a test says otherwise.
//
//  - What LevelDB 1.23 itself does after a failed sync and a failed append
//    (the reason for storage/guarded_db.h).
//  - Every fault answers kStorageError (503 through a Receiver), makes nothing
//    partial visible, keeps reads working, and once it clears the store
//    reopens itself in the background on its Clock: no caller reopen needed.
//  - A power cut (unsynced data dropped) at random moments of a concurrent
//    ingest loses nothing acknowledged under kSync; under kBuffered
//    acknowledged events may be lost but the store reopens consistent.
//  - A disk that fills up mid-ingest never damages the store.
//
// EVENTFOLD_TEST_SEED replays a run; EVENTFOLD_POWERCUT_CYCLES sets the
// power cuts of the kSync test (default 40).

#include <gtest/gtest.h>
#include <leveldb/db.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "eventfold/receiver.h"
#include "eventfold/store.h"
#include "store/store_impl.h"
#include "tests/common/test_seed.h"
#include "tests/reliability/fault_env.h"
#include "tests/reliability/reliability_util.h"
#include "tests/storage/storage_test_util.h"
#include "tools/history.h"

namespace eventfold::reliability {
namespace {

using storage_test::Issued;
using storage_test::Refunded;
using storage_test::TestSeed;
using test_util::TestSeedChosen;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kPath = "/fault/store";

Options FaultOptions(FaultEnv* env, Durability durability = Durability::kSync,
                     Clock* clock = nullptr) {
  Options o;
  o.env = env;
  o.durability = durability;
  o.clock = clock;
  return o;
}

// Longer than the store's recovery backoff (1 s on its Clock).
constexpr int64_t kPastRecoveryBackoff = 1100 * 1000;

std::unique_ptr<Store> MustOpen(const Options& o) {
  Result<std::unique_ptr<Store>> s = Store::Open(kPath, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

std::string Str(Outcome o) { return std::string(OutcomeName(o)); }

// The sender's stream: shuffled, duplicated ReceiptRoller deliveries.
std::vector<Delivery> StreamOf(uint64_t seed, int receipts) {
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = receipts;
  ho.products = receipts / 5;
  ho.malformed = 3;
  ho.conflicts = 2;
  ho.target_body_bytes = 300;
  return sim::GenerateHistory(ho).deliveries;
}

// Everything a reader can see, to show that a failed write changed nothing.
struct Visible {
  std::vector<std::string> projections;
  std::vector<Change> feed;
  uint64_t last_change = 0;
  std::string log;
  bool operator==(const Visible&) const = default;
};

Visible See(Store* store) {
  Visible v;
  v.projections = storage_test::ListAll(store);
  EXPECT_TRUE(store->feed().Read(0, 1 << 20, AppendTo<Change>(&v.feed)).ok());
  v.last_change = store->feed().LastSeq();
  Result<EntityLog> log = store->Log("receipt", "rcp_1");
  v.log = log.ok() ? EntityLogToJson(*log) : log.status().ToString();
  return v;
}

// All stores consistent with `acked`: in the logs, verified, checked, feed
// without gap; then, closed, each event stored once.
// `full`: also the integrity check (Store::Check).
void ExpectConsistent(const Options& o, FaultEnv* env, const Acked& acked, bool full = true) {
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    ExpectInLogs(store.get(), acked);
    ExpectVerifyClean(store.get());
    ExpectFeedWithoutGap(store.get());
    if (full) ExpectCheckClean(store.get());
  }
  ExpectStoredOnce(kPath, acked, env);
}

// ---- What LevelDB 1.23 does ------------------------------------------------

// A bare LevelDB at kPath on `env`, to watch LevelDB itself; null (with a
// test failure) when it does not open.
std::unique_ptr<leveldb::DB> OpenLevelDb(leveldb::Env* env) {
  leveldb::Options lo;
  lo.env = env;
  lo.create_if_missing = true;
  leveldb::DB* raw = nullptr;
  const leveldb::Status s = leveldb::DB::Open(lo, kPath, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::unique_ptr<leveldb::DB>(s.ok() ? raw : nullptr);
}

TEST(LevelDbFaults, FailedSyncIsStickyUntilReopen) {
  FaultEnv env;
  std::unique_ptr<leveldb::DB> db = OpenLevelDb(&env);
  ASSERT_TRUE(db);
  leveldb::WriteOptions sync;
  sync.sync = true;
  ASSERT_TRUE(db->Put(sync, "k0", "v").ok());
  env.SetSyncError(true);
  EXPECT_FALSE(db->Put(sync, "k1", "v").ok());
  env.SetSyncError(false);
  const leveldb::Status after = db->Put(sync, "k2", "v");
  EXPECT_FALSE(after.ok()) << "a failed sync is a sticky background error";
  EXPECT_FALSE(db->Put(leveldb::WriteOptions(), "k3", "v").ok()) << "unsynced writes too";
  std::string v;
  EXPECT_TRUE(db->Get(leveldb::ReadOptions(), "k0", &v).ok()) << "reads keep working";
  std::printf("LevelDB 1.23 after a failed sync, with the disk healthy again: %s\n",
              after.ToString().c_str());
  db.reset();
  db = OpenLevelDb(&env);
  ASSERT_TRUE(db);
  EXPECT_TRUE(db->Put(sync, "k4", "v").ok()) << "a reopen clears it";
  // The record whose sync failed was appended: it is back after the reopen.
  const bool k1 = db->Get(leveldb::ReadOptions(), "k1", &v).ok();
  std::printf("  the write whose sync failed is %s after the reopen\n", k1 ? "present" : "absent");
}

TEST(LevelDbFaults, FailedAppendIsNotStickyAndLaterWritesAreLostOnReopen) {
  FaultEnv env;
  std::unique_ptr<leveldb::DB> db = OpenLevelDb(&env);
  ASSERT_TRUE(db);
  leveldb::WriteOptions sync;
  sync.sync = true;
  ASSERT_TRUE(db->Put(sync, "k0", "v").ok());
  env.FailNthAppend(1);  // the next record's header: nothing of it is written
  EXPECT_FALSE(db->Put(sync, "lost", std::string(1000, 'x')).ok());
  int acknowledged = 0;
  for (int i = 1; i <= 400; ++i) {
    if (db->Put(sync, "k" + std::to_string(i), std::string(300, 'v')).ok()) ++acknowledged;
  }
  EXPECT_EQ(acknowledged, 400) << "a failed append is not sticky: later writes succeed";
  db.reset();
  db = OpenLevelDb(&env);
  ASSERT_TRUE(db);
  int lost = 0;
  std::string v;
  for (int i = 1; i <= 400; ++i) {
    if (!db->Get(leveldb::ReadOptions(), "k" + std::to_string(i), &v).ok()) ++lost;
  }
  std::printf(
      "LevelDB 1.23 after one failed log append: %d of %d later synced, acknowledged "
      "writes are gone after a reopen (the log writer's block offset moved past the "
      "bytes it never wrote)\n",
      lost, acknowledged);
  EXPECT_GT(lost, 0) << "if LevelDB stops losing them, revisit storage/guarded_db.h";
}

// ---- Faults through the store ------------------------------------------------

enum class Fault { kAppend, kPartialAppend, kSync, kDiskFull, kClose };

std::string FaultName(Fault f) {
  switch (f) {
    case Fault::kAppend:
      return "append";
    case Fault::kPartialAppend:
      return "partial_append";
    case Fault::kSync:
      return "sync";
    case Fault::kDiskFull:
      return "disk_full";
    case Fault::kClose:
      return "close";
  }
  return "?";
}

void Inject(FaultEnv* env, Fault f) {
  switch (f) {
    case Fault::kAppend:
      env->SetAppendError(true);
      break;
    case Fault::kPartialAppend:
      env->SetPartialWrites(true);
      env->SetAppendError(true);
      break;
    case Fault::kSync:
      env->SetSyncError(true);
      break;
    case Fault::kDiskFull:
      env->SetSpaceLeft(100);
      break;
    case Fault::kClose:
      env->SetCloseError(true);
      break;
  }
}

// Retries like the sender (every 50 ms here) until the answer is not 503;
// returns it and how long that took. With a ManualClock (the store's), the
// 50 ms pass on it instead of the wall clock, and `seconds` is its time.
IngestResult RetryUntilStored(Store* store, const std::string& body, double* seconds,
                              double limit = 10, ManualClock* clock = nullptr) {
  const auto start = SteadyClock::now();
  const int64_t clock_start = clock ? clock->NowMicros() : 0;
  IngestResult r;
  for (;;) {
    r = store->Ingest(body);
    *seconds = clock ? static_cast<double>(clock->NowMicros() - clock_start) / 1e6
                     : std::chrono::duration<double>(SteadyClock::now() - start).count();
    if (r.http_status() != 503 || *seconds > limit) return r;
    if (clock) {
      clock->Advance(50 * 1000);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

class StoreFaults : public ::testing::TestWithParam<Fault> {};

// The write path fails: 503, nothing partial, reads go on; the fault stays
// a while (the store keeps answering 503, reads keep working); it clears:
// the store reopens itself in the background and takes the retries.
TEST_P(StoreFaults, Answer503ShowNothingPartialAndRecoverInPlace) {
  const Fault fault = GetParam();
  SCOPED_TRACE(FaultName(fault));
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  Acked acked;
  uint64_t last_seq_at_close = 0;
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    for (int i = 0; i < 10; ++i) {
      const std::string n = std::to_string(i);
      ASSERT_EQ(store->Ingest(Issued("evt_i" + n, "rcp_" + n)).outcome, Outcome::kAccepted);
      acked["evt_i" + n] = EntityRef{"receipt", "rcp_" + n};
    }
    ReceiverOptions ro;
    ro.allow_unsigned = true;
    Result<std::unique_ptr<Receiver>> receiver = Receiver::Make(store.get(), ro);
    ASSERT_TRUE(receiver.ok());
    const Visible before = See(store.get());
    const uint64_t stored_seq = store->Stats().last_seq;
    EXPECT_EQ(stored_seq, 10u);

    Inject(&env, fault);
    if (fault == Fault::kClose) {
      // Close is called when a file is finished: force a memtable switch.
      env.SetCloseError(true);
      [[maybe_unused]] const Status compacted =
          store->maintenance().Compact();  // the armed fault may fail it
    }
    const std::string fresh = Issued("evt_new", "rcp_new");
    const std::string refund = Refunded("evt_ref", "rcp_1");
    const HttpResponse http = (*receiver)->Handle("POST", "/hooks", {}, fresh);
    EXPECT_EQ(http.status, 503) << http.body;
    EXPECT_EQ(http.body.find(kPath), std::string::npos)
        << "the sender is told where the store lives: " << http.body;
    IngestResult r = store->Ingest(refund);
    EXPECT_EQ(r.outcome, Outcome::kStorageError) << r.message;
    std::vector<IngestResult> batch =
        store->IngestBatch({{{}, Issued("evt_b1", "rcp_b1")}, {{}, Issued("evt_i1", "rcp_1")}});
    EXPECT_EQ(batch[0].outcome, Outcome::kStorageError);
    EXPECT_EQ(batch[1].outcome, Outcome::kDuplicate) << "a duplicate needs no write";
    EXPECT_TRUE(before == See(store.get())) << "a failed write made something visible";
    EXPECT_EQ(store->Stats().last_seq, stored_seq) << "seqs of failed writes counted as stored";
    EXPECT_GT(env.faults_injected(), 0u);

    // The fault persists past the recovery interval: still 503 (the disk
    // probe fails, nothing is reopened), reads unaffected.
    clock.Advance(kPastRecoveryBackoff);
    r = store->Ingest(fresh);
    EXPECT_EQ(r.outcome, Outcome::kStorageError) << r.message;
    r = store->Ingest(fresh);
    EXPECT_EQ(r.outcome, Outcome::kStorageError) << r.message;
    EXPECT_TRUE(before == See(store.get()));
    EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "issued");

    // The fault clears: the sender's retries get through, same store object.
    env.ClearFaults();
    double waited = 0;
    r = RetryUntilStored(store.get(), fresh, &waited, 10, &clock);
    ASSERT_TRUE(Acknowledged(r.outcome)) << Str(r.outcome) << ": " << r.message;
    acked[r.event_id] = r.entity;
    for (const std::string& body : {refund, Issued("evt_b1", "rcp_b1")}) {
      double ignored = 0;
      r = RetryUntilStored(store.get(), body, &ignored, 10, &clock);
      ASSERT_TRUE(Acknowledged(r.outcome)) << Str(r.outcome) << ": " << r.message;
      acked[r.event_id] = r.entity;
    }
    std::printf(
        "%s fault: %llu faults injected; stored again %.2f s after the fault cleared, "
        "without reopening the store\n",
        FaultName(fault).c_str(), static_cast<unsigned long long>(env.faults_injected()), waited);
    EXPECT_EQ(store->Get("receipt", "rcp_1")->state, "refunded");
    EXPECT_EQ(store->Get("receipt", "rcp_new")->state, "issued");
    // New events still go in after the recovery.
    for (int i = 0; i < 50; ++i) {
      const std::string n = std::to_string(i);
      r = store->Ingest(Issued("evt_after" + n, "rcp_after" + n));
      ASSERT_EQ(r.outcome, Outcome::kAccepted) << r.message;
      acked[r.event_id] = r.entity;
    }
    ExpectFeedWithoutGap(store.get());
    ExpectVerifyClean(store.get());
    ExpectCheckClean(store.get());
    last_seq_at_close = store->Stats().last_seq;
    EXPECT_GE(last_seq_at_close, stored_seq + 53);
  }
  ExpectConsistent(o, &env, acked);
  EXPECT_EQ(MustOpen(o)->Stats().last_seq, last_seq_at_close)
      << "the running store's last_seq is not what its stored events say";
  // And a power cut now loses nothing acknowledged either.
  env.DropUnsyncedData();
  ExpectConsistent(o, &env, acked);
}

INSTANTIATE_TEST_SUITE_P(Faults, StoreFaults,
                         ::testing::Values(Fault::kAppend, Fault::kPartialAppend, Fault::kSync,
                                           Fault::kDiskFull, Fault::kClose),
                         [](const auto& info) { return FaultName(info.param); });

// The known LevelDB hazard through the store: one failed append, then many
// more ingests (the store reopens itself once the disk works): after a
// close and reopen, every acknowledged event is there.
TEST(StoreFaultRecovery, NothingAcknowledgedIsLostAfterAFailedAppend) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);  // the retries' waits pass on it
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  Acked acked;
  size_t refused = 0;
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    env.FailNthAppend(1);
    for (int i = 0; i < 400; ++i) {
      const std::string n = std::to_string(i);
      double waited = 0;
      const IngestResult first = store->Ingest(Issued("evt_" + n, "rcp_" + n));
      if (first.http_status() == 503) ++refused;
      const IngestResult r =
          first.http_status() == 503
              ? RetryUntilStored(store.get(), Issued("evt_" + n, "rcp_" + n), &waited, 10, &clock)
              : first;
      ASSERT_TRUE(Acknowledged(r.outcome)) << n << ": " << r.message;
      acked[r.event_id] = r.entity;
    }
  }
  EXPECT_GE(refused, 1u);
  ExpectConsistent(o, &env, acked);
  EXPECT_EQ(ExpectStoredOnce(kPath, acked, &env), 400u);
}

// A List callback that throws must not leak the scan's snapshot: a leaked
// one is a use of the database that never ends, so the reopen after a
// failed write would wait for it and give up, and the store would answer
// 503 for ever.
TEST(StoreFaultRecovery, ThrowingListCallbackDoesNotBlockTheReopen) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  std::unique_ptr<Store> store = MustOpen(o);
  ASSERT_TRUE(store);
  ASSERT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kAccepted);
  EXPECT_THROW((void)store->List(
                   "receipt",
                   [](const Projection&) -> bool { throw std::runtime_error("the caller's bug"); }),
               std::runtime_error);
  env.FailNthAppend(1);
  EXPECT_EQ(store->Ingest(Issued("evt_2", "rcp_2")).outcome, Outcome::kStorageError);
  double waited = 0;
  const IngestResult r =
      RetryUntilStored(store.get(), Issued("evt_2", "rcp_2"), &waited, 5, &clock);
  EXPECT_TRUE(Acknowledged(r.outcome)) << Str(r.outcome) << ": " << r.message;
}

storage::StoreImpl* Hook(Store* store) { return static_cast<storage::StoreImpl*>(store); }

// Ingests evt_0 .. evt_<n-1> (receipts rcp_0 ..), each accepted, into
// `acked`.
void IngestReceipts(Store* store, int n, Acked* acked) {
  for (int i = 0; i < n; ++i) {
    const std::string id = std::to_string(i);
    const IngestResult r = store->Ingest(Issued("evt_" + id, "rcp_" + id));
    ASSERT_EQ(r.outcome, Outcome::kAccepted) << r.message;
    (*acked)[r.event_id] = r.entity;
  }
}

// After a recovery: evt_x is accepted, the feed has no gap and a verify
// is clean.
void AcceptEvtXAndCheck(Store* store, Acked* acked) {
  const IngestResult r = store->Ingest(Issued("evt_x", "rcp_x"));
  ASSERT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  (*acked)[r.event_id] = r.entity;
  ExpectFeedWithoutGap(store);
  ExpectVerifyClean(store);
}

// The name and size of every file of the store's database.
std::map<std::string, uint64_t> FileSizes(FaultEnv* env) {
  std::vector<std::string> children;
  EXPECT_TRUE(env->GetChildren(kPath, &children).ok());
  std::map<std::string, uint64_t> sizes;
  for (const std::string& c : children) {
    uint64_t size = 0;
    if (env->GetFileSize(std::string(kPath) + "/" + c, &size).ok()) sizes[c] = size;
  }
  return sizes;
}

// Past any recovery delay (the backoff stops doubling at 30 s).
constexpr int64_t kPastAnyRecoveryDelay = 31LL * 1000 * 1000;

// The store recovers on its Clock in the background: once the disk works
// again and the clock passes the backoff, writes that are not ingests (a
// checkpoint) work again without any ingest having come by.
TEST(StoreFaultRecovery, RecoversInTheBackgroundWithoutAnIngest) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  std::unique_ptr<Store> store = MustOpen(o);
  ASSERT_TRUE(store);
  ASSERT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kAccepted);
  env.FailNthAppend(1);
  EXPECT_EQ(store->Ingest(Issued("evt_2", "rcp_2")).outcome, Outcome::kStorageError);
  EXPECT_FALSE(store->feed().SetCheckpoint("sub", 1).ok());        // writes are refused
  EXPECT_EQ(Hook(store.get())->WaitForRecoveryAttempt(0, 0), 0u);  // the clock has not moved
  clock.Advance(kPastRecoveryBackoff);
  uint64_t recovered = 0;
  EXPECT_EQ(Hook(store.get())->WaitForRecoveryAttempt(0, 60LL * 1000 * 1000, &recovered), 1u);
  EXPECT_EQ(recovered, 1u);
  const Status st = store->feed().SetCheckpoint("sub", 1);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(store->Ingest(Issued("evt_2", "rcp_2")).outcome, Outcome::kAccepted);
}

// The disk lets the recovery's probe through but fails the reopen itself:
// reads are still served (the database is open for reading), writes stay
// refused, and the next attempt, after a longer backoff, reopens it.
TEST(StoreFaultRecovery, ReadsServedWhenTheReopenFails) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  Acked acked;
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    ASSERT_NO_FATAL_FAILURE(IngestReceipts(store.get(), 20, &acked));
    env.FailNthAppend(1);
    EXPECT_EQ(store->Ingest(Issued("evt_x", "rcp_x")).outcome, Outcome::kStorageError);
    // The probe's append is the first; the reopen's table write the second.
    env.FailNthAppend(2);
    clock.Advance(kPastRecoveryBackoff);
    uint64_t recovered = 0;
    ASSERT_EQ(Hook(store.get())->WaitForRecoveryAttempt(0, 60LL * 1000 * 1000, &recovered), 1u);
    EXPECT_EQ(recovered, 0u);
    Result<Projection> p = store->Get("receipt", "rcp_7");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->state, "issued");
    size_t listed = 0;
    Status st = store->List("receipt", [&](const Projection&) { return ++listed, true; });
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(listed, 20u);
    std::vector<Change> feed;
    st = store->feed().Read(0, 100, AppendTo<Change>(&feed));
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(feed.size(), 20u);
    EXPECT_EQ(store->Ingest(Issued("evt_x", "rcp_x")).outcome, Outcome::kStorageError);
    // The database open for reads changes no file, not even asked to compact.
    const std::map<std::string, uint64_t> files = FileSizes(&env);
    (void)store->maintenance().Compact();
    EXPECT_EQ(FileSizes(&env), files) << "the read-only database changed a file";
    p = store->Get("receipt", "rcp_7");
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    // The next attempt waits twice as long.
    env.ClearFaults();
    clock.Advance(kPastRecoveryBackoff);
    EXPECT_EQ(Hook(store.get())->WaitForRecoveryAttempt(1, 0), 1u);
    clock.Advance(kPastRecoveryBackoff);
    ASSERT_EQ(Hook(store.get())->WaitForRecoveryAttempt(1, 60LL * 1000 * 1000, &recovered), 2u);
    EXPECT_EQ(recovered, 1u);
    ASSERT_NO_FATAL_FAILURE(AcceptEvtXAndCheck(store.get(), &acked));
  }
  ExpectConsistent(o, &env, acked);
}

// A reader that holds the database (an iterator) keeps a reopen waiting
// for as long as the store's Clock allows, however long that takes in real
// time: on a busy machine a reader may be descheduled for a second. Once
// the Clock passes the wait, the attempt gives up and leaves all as it was
// (reads served, writes refused), and the next attempt after the reader
// ends recovers.
TEST(StoreFaultRecovery, AReopenWaitsForAReaderOnTheStoresClock) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  Acked acked;
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    ASSERT_NO_FATAL_FAILURE(IngestReceipts(store.get(), 5, &acked));
    env.FailNthAppend(1);
    EXPECT_EQ(store->Ingest(Issued("evt_x", "rcp_x")).outcome, Outcome::kStorageError);
    std::promise<void> entered, release;
    std::shared_future<void> released = release.get_future().share();
    std::thread reader([&] {
      bool first = true;
      const Status st = store->List("receipt", [&](const Projection&) {
        if (std::exchange(first, false)) {
          entered.set_value();
          released.wait();
        }
        return true;
      });
      EXPECT_TRUE(st.ok()) << st.ToString();
    });
    entered.get_future().wait();
    clock.Advance(kPastRecoveryBackoff);
    // The attempt waits for the reader: real time alone does not end it.
    EXPECT_EQ(Hook(store.get())->WaitForRecoveryAttempt(0, 1500LL * 1000), 0u);
    // Moving the clock past the reopen's wait (1 s) does; each step may
    // land before the attempt has begun to wait, so step until it ends.
    uint64_t recovered = 0;
    uint64_t attempts = 0;
    for (int i = 0; i < 600 && attempts == 0; ++i) {
      clock.Advance(1100 * 1000);
      attempts = Hook(store.get())->WaitForRecoveryAttempt(0, 100LL * 1000, &recovered);
    }
    ASSERT_EQ(attempts, 1u);
    EXPECT_EQ(recovered, 0u);
    Result<Projection> p = store->Get("receipt", "rcp_3");
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(store->Ingest(Issued("evt_x", "rcp_x")).outcome, Outcome::kStorageError);
    release.set_value();
    reader.join();
    // The next attempt, after the doubled backoff, finds no reader.
    clock.Advance(2 * kPastRecoveryBackoff);
    ASSERT_EQ(Hook(store.get())->WaitForRecoveryAttempt(1, 60LL * 1000 * 1000, &recovered), 2u);
    EXPECT_EQ(recovered, 1u);
    ASSERT_NO_FATAL_FAILURE(AcceptEvtXAndCheck(store.get(), &acked));
  }
  ExpectConsistent(o, &env, acked);
}

// A write that fails its sync is in LevelDB's log, invisible until the
// reopen replays it. The store's filter of stored event ids, built from a
// scan in between (here the first ingest of a new store asks for it), never
// saw it. The reopen must drop that filter: with it, the filter answered
// "absent" for the replayed event, and its retry was stored a second time.
TEST(StoreFaultRecovery, ARetryOfAWriteWhoseSyncFailedIsADuplicateAfterTheReopen) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  Acked acked;
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    env.SetSyncError(true);
    EXPECT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kStorageError);
    env.ClearFaults();
    storage::StoreImpl* hook = Hook(store.get());
    ASSERT_GT(hook->AwaitKeyFiltersForTesting().dedup, 0u) << "no filter was built meanwhile";
    clock.Advance(kPastRecoveryBackoff);
    uint64_t recovered = 0;
    ASSERT_EQ(hook->WaitForRecoveryAttempt(0, 60LL * 1000 * 1000, &recovered), 1u);
    ASSERT_EQ(recovered, 1u);
    // The reopen replayed the write: the retry is its duplicate.
    const IngestResult r = store->Ingest(Issued("evt_1", "rcp_1"));
    EXPECT_EQ(r.outcome, Outcome::kDuplicate) << r.message;
    if (Acknowledged(r.outcome)) acked[r.event_id] = r.entity;
    // And a new event after it is stored once, with the filter built anew.
    const IngestResult next = store->Ingest(Issued("evt_2", "rcp_2"));
    ASSERT_EQ(next.outcome, Outcome::kAccepted) << next.message;
    acked[next.event_id] = next.entity;
    EXPECT_GT(hook->AwaitKeyFiltersForTesting().dedup, 0u);
    EXPECT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kDuplicate);
    ExpectFeedWithoutGap(store.get());
    ExpectVerifyClean(store.get());
  }
  ExpectConsistent(o, &env, acked);
}

// The database opened for reads after a failed reopen replays the whole
// log, a write whose sync failed included: its event shows as stored but
// may not be on disk. So while that database serves reads, no delivery is
// answered duplicate (200) from it; once a reopen works (and makes what it
// replays durable), the retry is a duplicate.
TEST(StoreFaultRecovery, NoDuplicateIsAnsweredFromTheReadOnlyDatabase) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  Acked acked;
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    const IngestResult first = store->Ingest(Issued("evt_0", "rcp_0"));
    ASSERT_EQ(first.outcome, Outcome::kAccepted) << first.message;
    acked[first.event_id] = first.entity;
    env.SetSyncError(true);
    EXPECT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kStorageError);
    env.ClearFaults();
    env.FailNthAppend(2);  // the probe's append passes, the reopen's fails
    clock.Advance(kPastRecoveryBackoff);
    storage::StoreImpl* hook = Hook(store.get());
    uint64_t recovered = 0;
    ASSERT_EQ(hook->WaitForRecoveryAttempt(0, 60LL * 1000 * 1000, &recovered), 1u);
    ASSERT_EQ(recovered, 0u);
    env.ClearFaults();
    // The read-only database shows the write whose sync failed.
    Result<Projection> p = store->Get("receipt", "rcp_1");
    ASSERT_TRUE(p.ok()) << "the read-only open did not replay the write: " << p.status().ToString();
    for (const char* id : {"evt_1", "evt_0"}) {
      const IngestResult r = store->Ingest(Issued(id, std::string("rcp_") + (id + 4)));
      EXPECT_EQ(r.outcome, Outcome::kStorageError) << id << ": " << r.message;
      std::vector<Delivery> one(1);
      one[0].body = Issued(id, std::string("rcp_") + (id + 4));
      const std::vector<IngestResult> batch = store->IngestBatch(one);
      EXPECT_EQ(batch[0].outcome, Outcome::kStorageError) << id << " in a batch";
    }
    clock.Advance(kPastAnyRecoveryDelay);
    ASSERT_GE(hook->WaitForRecoveryAttempt(1, 60LL * 1000 * 1000, &recovered), 2u);
    ASSERT_EQ(recovered, 1u);
    for (const char* id : {"evt_1", "evt_0"}) {
      const IngestResult r = store->Ingest(Issued(id, std::string("rcp_") + (id + 4)));
      EXPECT_EQ(r.outcome, Outcome::kDuplicate) << id << ": " << r.message;
      if (Acknowledged(r.outcome)) acked[r.event_id] = r.entity;
    }
    ExpectFeedWithoutGap(store.get());
    ExpectVerifyClean(store.get());
  }
  ExpectConsistent(o, &env, acked);
}

// The disk takes writes again and the reopen works, but a table the reopen
// did not need cannot be read (a bad sector), so re-deriving the store's
// sequence and feed from it fails. That is no recovery: writes stay
// refused, each later attempt reopens and reads again, and only once the
// table reads do ingests go on, with nothing acknowledged lost and the feed
// without a gap.
TEST(StoreFaultRecovery, AReadFailingAfterTheReopenKeepsWritesRefused) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  Acked acked;
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    ASSERT_NO_FATAL_FAILURE(IngestReceipts(store.get(), 20, &acked));
    // Everything so far, the store's meta records too, into tables.
    ASSERT_TRUE(store->maintenance().Compact().ok());
    std::set<std::string> tables;
    for (const auto& [name, size] : FileSizes(&env)) {
      if (name.ends_with(".ldb")) tables.insert(std::string(kPath) + "/" + name);
    }
    ASSERT_FALSE(tables.empty());

    env.FailNthAppend(1);
    EXPECT_EQ(store->Ingest(Issued("evt_x", "rcp_x")).outcome, Outcome::kStorageError);
    env.ClearFaults();
    env.SetUnreadable(tables);
    storage::StoreImpl* hook = Hook(store.get());
    uint64_t attempts = 0, recovered = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      const uint64_t faults = env.faults_injected();
      clock.Advance(kPastAnyRecoveryDelay);
      const uint64_t got = hook->WaitForRecoveryAttempt(attempts, 60LL * 1000 * 1000, &recovered);
      ASSERT_GT(got, attempts) << "no recovery attempt";
      attempts = got;
      EXPECT_GT(env.faults_injected(), faults) << "attempt " << attempt << " read no table";
      ASSERT_EQ(recovered, 0u) << "attempt " << attempt << " counted as a recovery";
      EXPECT_EQ(store->Ingest(Issued("evt_x", "rcp_x")).outcome, Outcome::kStorageError);
    }
    env.ClearFaults();
    clock.Advance(kPastAnyRecoveryDelay);
    ASSERT_GT(hook->WaitForRecoveryAttempt(attempts, 60LL * 1000 * 1000, &recovered), attempts);
    EXPECT_EQ(recovered, 1u);
    ASSERT_NO_FATAL_FAILURE(AcceptEvtXAndCheck(store.get(), &acked));
  }
  ExpectConsistent(o, &env, acked);
}

// A manifest append torn halfway (a short write, then an error) leaves a
// partial record at the end of LevelDB's MANIFEST, which an open reads as
// its end. When the reopen then fails too, the database is opened for
// reads only, reusing that MANIFEST: an edit LevelDB appended to it there
// (a level-0 table of the replayed log, a compaction) would follow the
// partial record, never be read, and the tables it replaced would be gone.
// That fallback must write nothing, even asked to compact (here it cannot
// open without writing, so reads are refused until the disk works), and
// the next reopen finds every acknowledged event.
TEST(StoreFaultRecovery, TheReadOnlyFallbackWritesNothingBehindATornManifest) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  Acked acked;
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    ASSERT_NO_FATAL_FAILURE(IngestReceipts(store.get(), 20, &acked));
    env.SetFaultPrefix(std::string(kPath) + "/MANIFEST");
    env.SetPartialWrites(true);
    env.SetAppendError(true);
    const uint64_t before = env.faults_injected();
    (void)store->maintenance().Compact();  // its edit's append is torn
    ASSERT_GT(env.faults_injected(), before) << "no manifest append was torn";
    env.ClearFaults();
    env.SetFaultPrefix("");
    EXPECT_EQ(store->Ingest(Issued("evt_x", "rcp_x")).outcome, Outcome::kStorageError);

    // The reopen fails (the probe's append is the first, the reopen's own
    // the second), so the database is opened for reads.
    env.FailNthAppend(2);
    clock.Advance(kPastRecoveryBackoff);
    storage::StoreImpl* hook = Hook(store.get());
    uint64_t recovered = 0;
    ASSERT_EQ(hook->WaitForRecoveryAttempt(0, 60LL * 1000 * 1000, &recovered), 1u);
    ASSERT_EQ(recovered, 0u);
    env.ClearFaults();
    const std::map<std::string, uint64_t> files = FileSizes(&env);
    (void)store->maintenance().Compact();  // asked of the read-only database
    EXPECT_EQ(FileSizes(&env), files) << "the read-only database changed a file";

    clock.Advance(kPastAnyRecoveryDelay);
    ASSERT_GE(hook->WaitForRecoveryAttempt(1, 60LL * 1000 * 1000, &recovered), 2u);
    ASSERT_EQ(recovered, 1u) << "the reopen after the read-only fallback failed";
    ASSERT_NO_FATAL_FAILURE(AcceptEvtXAndCheck(store.get(), &acked));
  }
  ExpectConsistent(o, &env, acked);
}

// A disk that keeps failing and recovering (append, partial append, sync
// errors, a full disk, and reopens that fail too) under 4 ingesting threads
// that retry every 503 like the sender, and 2 threads reading all the
// while: reads never fail, the store reopens itself whenever the disk works
// again, and in the end every acknowledged event is there.
//
// Nothing here depends on how fast the machine is: the fault schedule is
// driven by the test's Clock and FaultEnv, round by round — a seeded fault
// goes on, stays until a write has met it (a 503), goes off, and the
// test's clock moves past the recovery backoff until a recovery attempt
// reopens the store; only then do refused writers retry.
void FlappingDisk(uint64_t seed) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  const Options o = FaultOptions(&env, Durability::kSync, &clock);
  // The store's database is the disk that flaps. The quarantine (tested on
  // its own in quarantine_fault_test.cc) writes in the background and fails
  // no ingest: a one-shot fault it met would leave the round waiting for a
  // 503 that never comes.
  env.SetFaultExemptPrefix(std::string(kPath) + "/quarantine/");
  constexpr size_t kMinDeliveries = 1000, kRounds = 12;
  constexpr int64_t kWaitMicros = 120LL * 1000 * 1000;  // a bound, never reached when all is well
  const std::vector<Delivery> stream = StreamOf(seed, 8000);
  Acked acked;
  // fresh_503: answers 503 to ingests that began after the last recovery,
  // so met this round's fault (a slow writer's 503 of an earlier round
  // must not end a round whose fault no write has met yet).
  size_t answers_503 = 0, fresh_503 = 0, rounds = 0, failed_reopens = 0;
  std::atomic<size_t> reads{0};
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    std::mutex mu;  // guards acked, the 503 counts, epoch, writers_left, stop
    std::condition_variable cv;
    uint64_t epoch = 0;  // bumped after each recovery: refused writers retry
    int writers_left = 4;
    bool stop = false;
    std::atomic<size_t> next{0};
    std::atomic<bool> rounds_done{false}, done{false};
    auto ingest = [&] {
      for (size_t i; (i = next.fetch_add(1)) < stream.size();) {
        if (i >= kMinDeliveries && rounds_done) break;
        for (int attempt = 0;; ++attempt) {
          uint64_t seen;
          {
            std::lock_guard lock(mu);
            seen = epoch;
          }
          const IngestResult r = store->Ingest(stream[i]);
          std::unique_lock lock(mu);
          if (r.outcome == Outcome::kStorageError) {
            ++answers_503;
            if (seen == epoch) ++fresh_503;
            cv.notify_all();
            ASSERT_LT(attempt, 1000) << "never stored: " << r.message;
            cv.wait(lock, [&] { return epoch != seen || stop; });
            if (stop) break;
            continue;
          }
          if (Acknowledged(r.outcome)) acked[r.event_id] = r.entity;
          break;
        }
      }
      std::lock_guard lock(mu);
      --writers_left;
      cv.notify_all();
    };
    auto read = [&] {
      while (!done) {
        uint64_t last = 0;
        bool gap = false;
        // A page, not the whole store: a List holds its use of the database
        // to its end, and the reopen waits for uses to end only until the
        // store's clock, which this test moves round by round, has moved a
        // second. Listing every projection (each folded from its log since
        // format 4) outlasts a round under TSan, and a reopen would seldom
        // get its turn.
        int listed = 0;
        Status st = store->List("", [&](const Projection&) { return ++listed < 100; });
        EXPECT_TRUE(st.ok()) << "List: " << st.ToString();
        std::vector<Change> feed;
        st = store->feed().Read(0, 1 << 20, AppendTo<Change>(&feed));
        EXPECT_TRUE(st.ok()) << "feed: " << st.ToString();
        for (const Change& c : feed) gap |= c.seq != ++last;
        EXPECT_FALSE(gap) << "the feed has a gap";
        const Result<Projection> p = store->Get("receipt", "rcp_000001");
        EXPECT_TRUE(p.ok() || p.status().IsNotFound()) << "Get: " << p.status().ToString();
        ++reads;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // pacing, not timing
      }
    };
    std::vector<std::thread> writers, readers;
    for (int t = 0; t < 4; ++t) writers.emplace_back(ingest);
    for (int t = 0; t < 2; ++t) readers.emplace_back(read);

    std::mt19937_64 rng(seed);
    storage::StoreImpl* hook = Hook(store.get());
    uint64_t attempts = 0, recovered = 0;
    for (; rounds < kRounds; ++rounds) {
      // Counted before the fault goes on: every writer may meet it, answer
      // 503 and wait for the next epoch before this thread looks again.
      size_t before;
      {
        std::lock_guard lock(mu);
        before = fresh_503;
      }
      const int kind = static_cast<int>(rng() % 5);
      switch (kind) {
        case 0:
          env.SetAppendError(true);
          break;
        case 1:
          env.SetPartialWrites(true);
          env.SetAppendError(true);
          break;
        case 2:
          env.SetSyncError(true);
          break;
        case 3:
          env.SetSpaceLeft(rng() % 8192);
          break;
        case 4:
          env.FailNthAppend(static_cast<int>(rng() % 8 + 1));
          break;
      }
      {
        // The fault stays until a write meets it (or the writers are done).
        std::unique_lock lock(mu);
        ASSERT_TRUE(cv.wait_for(lock, std::chrono::microseconds(kWaitMicros),
                                [&] { return fresh_503 > before || writers_left == 0; }))
            << "round " << rounds << " (fault kind " << kind << "): no write met it; "
            << env.faults_injected() << " faults injected, " << fresh_503 << " fresh 503s";
        if (writers_left == 0) break;
      }
      env.ClearFaults();
      // One round in three the disk lets the probe through and fails the
      // reopen (its level-0 table write): reads must go on regardless.
      const bool fail_reopen = rng() % 3 == 0;
      if (fail_reopen) env.FailNthAppend(2);
      const uint64_t recovered_before = recovered;
      for (int attempt = 0; recovered == recovered_before; ++attempt) {
        ASSERT_LT(attempt, 50) << "the store never recovered";
        clock.Advance(kPastAnyRecoveryDelay);
        const uint64_t got = hook->WaitForRecoveryAttempt(attempts, kWaitMicros, &recovered);
        ASSERT_GT(got, attempts) << "no recovery attempt";
        attempts = got;
        if (recovered == recovered_before) {
          ++failed_reopens;
          env.ClearFaults();
        }
      }
      env.ClearFaults();  // a one-shot fault the reopen did not meet
      std::lock_guard lock(mu);
      ++epoch;
      cv.notify_all();
    }
    rounds_done = true;
    for (std::thread& t : writers) t.join();
    done = true;
    for (std::thread& t : readers) t.join();
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    env.ClearFaults();
    ExpectFeedWithoutGap(store.get());
    ExpectVerifyClean(store.get());
  }
  ExpectConsistent(o, &env, acked);
  env.DropUnsyncedData();
  ExpectConsistent(o, &env, acked);
  std::printf(
      "flapping disk: %zu fault rounds (%llu faults injected, %zu failed reopen attempts), %zu "
      "answers 503 retried, %zu acknowledged events all stored, %zu reads meanwhile\n",
      rounds, static_cast<unsigned long long>(env.faults_injected()), failed_reopens, answers_503,
      acked.size(), reads.load());
  EXPECT_GE(rounds, 8u);
  EXPECT_GT(answers_503, 0u);
}

// Four schedules a run (one when EVENTFOLD_TEST_SEED names one): a single
// seed hid for many runs a fault that seeds 62, 70, 94 and 101 each showed
// about one run in six (a retry stored twice after a reopen). Under TSan,
// which looks for races, not schedules, one: a schedule takes ~35 s there.
#if defined(__SANITIZE_THREAD__)
constexpr uint64_t kFlappingSchedules = 1;
#else
constexpr uint64_t kFlappingSchedules = 4;
#endif

TEST(StoreFaultRecovery, FlappingDiskUnderConcurrentIngestAndReads) {
  const uint64_t seed =
      TestSeed("StoreFaultRecovery.FlappingDiskUnderConcurrentIngestAndReads", 7200);
  for (uint64_t k = 0; k < (TestSeedChosen() ? 1 : kFlappingSchedules); ++k) {
    SCOPED_TRACE("seed " + std::to_string(seed + k));
    std::printf("flapping disk: seed %llu\n", static_cast<unsigned long long>(seed + k));
    FlappingDisk(seed + k);
    if (HasFatalFailure()) return;
  }
}

// ---- Power cuts ----------------------------------------------------------------

struct CutResult {
  size_t acks = 0;       // acknowledgements in this run
  uint64_t dropped = 0;  // unsynced bytes the cut dropped
};

// Counts delivery `index` of the stream, whose ingest answered `r`, as
// stored: it is not sent again, and its event must survive every later cut.
void CountStored(size_t index, const IngestResult& r, std::vector<bool>* acked_delivery,
                 Acked* acked) {
  (*acked_delivery)[index] = true;
  auto [it, added] = acked->try_emplace(r.event_id, r.entity);
  EXPECT_EQ(it->second, r.entity);
}

// One way of ingesting `work` (indices into the stream) into `store`,
// counting (CountStored) what it may; returns how many it counted.
using IngestWork = std::function<size_t(Store* store, const std::vector<size_t>& work)>;

// Opens the store, has `ingest` ingest the deliveries not yet counted
// stored, and cuts the power at the `cut_at`-th file append or sync (or
// after `ingest` returns). Then the store is closed, what was not synced is
// dropped, and the env is revived.
CutResult IngestAndCut(const Options& o, FaultEnv* env, const std::vector<bool>& acked_delivery,
                       uint64_t cut_at, const IngestWork& ingest) {
  CutResult out;
  std::vector<size_t> work;
  for (size_t i = 0; i < acked_delivery.size(); ++i) {
    if (!acked_delivery[i]) work.push_back(i);
  }
  {
    std::unique_ptr<Store> store = MustOpen(o);
    if (!store) return out;
    env->CutPowerAfter(cut_at);
    out.acks = ingest(store.get(), work);
    env->PowerCut();  // also when the stream ended first
  }
  out.dropped = env->DropUnsyncedData();
  env->Revive();
  env->ClearFaults();
  return out;
}

// Ingests `work` one delivery at a time from 4 threads, as a receiver does,
// counting each acknowledged one.
IngestWork FromFourThreads(FaultEnv* env, const std::vector<Delivery>& stream,
                           std::vector<bool>* acked_delivery, Acked* acked) {
  // `stream` by reference: it outlives every cut of the test.
  return [env, &stream, acked_delivery, acked](Store* store, const std::vector<size_t>& work) {
    std::mutex mu;
    std::atomic<size_t> next{0};
    size_t acks = 0;
    auto worker = [&] {
      for (size_t k; (k = next.fetch_add(1)) < work.size();) {
        const IngestResult r = store->Ingest(stream[work[k]]);
        if (r.outcome == Outcome::kStorageError) {
          if (!env->dead()) ADD_FAILURE() << "503 with the power on: " << r.message;
          return;  // the machine is off
        }
        if (!Acknowledged(r.outcome)) continue;
        std::lock_guard lock(mu);
        CountStored(work[k], r, acked_delivery, acked);
        ++acks;
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back(worker);
    for (std::thread& t : threads) t.join();
    return acks;
  };
}

TEST(PowerCut, SyncedIngestLosesNothingAcknowledged) {
  const uint64_t seed = TestSeed("PowerCut.SyncedIngestLosesNothingAcknowledged", 7300);
  const int cycles = static_cast<int>(test_util::EnvCount("EVENTFOLD_POWERCUT_CYCLES", 40));
  std::mt19937_64 rng(seed);
  FaultEnv env;
  const Options o = FaultOptions(&env);  // kSync
  const std::vector<Delivery> stream = StreamOf(seed, 700);
  std::vector<bool> acked_delivery(stream.size(), false);
  Acked acked;
  uint64_t dropped = 0;
  size_t acks = 0, cuts_dropping = 0;
  const auto start = SteadyClock::now();
  for (int c = 0; c < cycles; ++c) {
    const uint64_t cut_at = std::uniform_int_distribution<uint64_t>(1, 400)(rng);
    const CutResult r = IngestAndCut(o, &env, acked_delivery, cut_at,
                                     FromFourThreads(&env, stream, &acked_delivery, &acked));
    dropped += r.dropped;
    acks += r.acks;
    if (r.dropped > 0) ++cuts_dropping;
    ExpectConsistent(o, &env, acked, /*full=*/c % 5 == 4 || c + 1 == cycles);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "cycle " << c << " (seed " << seed << ", power cut at file operation "
                    << cut_at << ") failed";
      return;
    }
  }
  std::printf(
      "PowerCut kSync: %d power cuts during 4-thread ingest (%zu of them dropping "
      "unsynced bytes, %llu in all), %zu acknowledgements, %zu distinct events "
      "acknowledged, every one present after every cut; %.1f s\n",
      cycles, cuts_dropping, static_cast<unsigned long long>(dropped), acks, acked.size(),
      std::chrono::duration<double>(SteadyClock::now() - start).count());
  EXPECT_GT(cuts_dropping, 0u) << "no cut landed between a write and its sync";
  EXPECT_GT(acked.size(), static_cast<size_t>(cycles));
}

// kBuffered: an acknowledged event reached the OS, not the disk. A power cut
// may lose it (the sender will not resend: that is the trade this mode
// makes), but whatever survives is consistent: a prefix of the log.
TEST(PowerCut, BufferedIngestMayLoseAcknowledgedEventsButStaysConsistent) {
  const uint64_t seed =
      TestSeed("PowerCut.BufferedIngestMayLoseAcknowledgedEventsButStaysConsistent", 7400);
  std::mt19937_64 rng(seed);
  FaultEnv env;
  const Options o = FaultOptions(&env, Durability::kBuffered);
  const std::vector<Delivery> stream = StreamOf(seed, 600);
  std::vector<bool> acked_delivery(stream.size(), false);
  Acked all_acked;
  size_t lost = 0, acks = 0;
  constexpr int kCycles = 10;
  for (int c = 0; c < kCycles; ++c) {
    Acked acked;
    const uint64_t cut_at = std::uniform_int_distribution<uint64_t>(20, 400)(rng);
    acks += IngestAndCut(o, &env, acked_delivery, cut_at,
                         FromFourThreads(&env, stream, &acked_delivery, &acked))
                .acks;
    std::map<std::string, int> stored = RawEventIds(kPath, &env);
    Acked survived;
    for (const auto& [id, ref] : acked) {
      if (stored.contains(id)) {
        survived[id] = ref;
      } else {
        ++lost;
      }
    }
    for (const auto& [id, n] : stored) EXPECT_EQ(n, 1) << id << " stored twice";
    all_acked.insert(survived.begin(), survived.end());
    // Consistent with what survived; and the lost ones are retried later,
    // like a sender that never got an answer would.
    for (size_t i = 0; i < stream.size(); ++i) acked_delivery[i] = false;
    ExpectConsistent(o, &env, all_acked);
    if (::testing::Test::HasFailure()) return;
  }
  std::printf(
      "PowerCut kBuffered: %d power cuts, %zu acknowledgements, %zu acknowledged "
      "events lost, store consistent after every cut\n",
      kCycles, acks, lost);
  EXPECT_GT(lost, 0u) << "kBuffered acknowledges before the disk has the data";
}

// kBuffered with Store::Sync, as `eventfold ingest` loads a file: each batch
// is written unsynced, synced on another thread while the next one is
// written, and counted as stored only once its sync returned OK. A power
// cut at any file operation loses nothing so counted.
TEST(PowerCut, BufferedBatchesSyncedBehindLoseNothingCounted) {
  const uint64_t seed = TestSeed("PowerCut.BufferedBatchesSyncedBehindLoseNothingCounted", 7450);
  std::mt19937_64 rng(seed);
  FaultEnv env;
  const Options o = FaultOptions(&env, Durability::kBuffered);
  const std::vector<Delivery> stream = StreamOf(seed, 600);
  std::vector<bool> acked_delivery(stream.size(), false);
  Acked acked;
  size_t counted = 0, cuts_dropping = 0;
  constexpr int kCycles = 20;
  constexpr size_t kBatch = 25;
  // Batches of kBatch, each synced on another thread while the next is
  // written; a batch is counted only once its sync returned OK.
  const IngestWork synced_behind = [&](Store* store, const std::vector<size_t>& work) {
    struct Written {
      std::vector<size_t> indices;
      std::vector<IngestResult> results;
      std::future<Status> synced;
    };
    size_t n = 0;
    auto count = [&](Written& w) {
      if (!w.synced.get().ok()) return;
      for (size_t k = 0; k < w.indices.size(); ++k) {
        if (!Acknowledged(w.results[k].outcome)) continue;
        CountStored(w.indices[k], w.results[k], &acked_delivery, &acked);
        ++n;
      }
    };
    std::optional<Written> behind;
    for (size_t from = 0; from < work.size() && !env.dead(); from += kBatch) {
      Written w;
      std::vector<Delivery> batch;
      for (size_t k = from; k < std::min(work.size(), from + kBatch); ++k) {
        w.indices.push_back(work[k]);
        batch.push_back(stream[work[k]]);
      }
      w.results = store->IngestBatch(batch);
      w.synced = std::async(std::launch::async, [store] { return store->Sync(); });
      if (behind) count(*behind);
      behind = std::move(w);
    }
    if (behind) count(*behind);
    return n;
  };
  for (int c = 0; c < kCycles; ++c) {
    const uint64_t cut_at = std::uniform_int_distribution<uint64_t>(1, 300)(rng);
    const CutResult r = IngestAndCut(o, &env, acked_delivery, cut_at, synced_behind);
    counted += r.acks;
    if (r.dropped > 0) ++cuts_dropping;
    ExpectConsistent(o, &env, acked, /*full=*/c % 5 == 4 || c + 1 == kCycles);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "cycle " << c << " (seed " << seed << ") failed";
      return;
    }
  }
  std::printf(
      "PowerCut kBuffered + Sync: %d power cuts (%zu of them dropping unsynced bytes), %zu "
      "deliveries counted after their batch's sync, every one present after every cut\n",
      kCycles, cuts_dropping, counted);
  EXPECT_GT(cuts_dropping, 0u) << "no cut landed between a write and its sync";
  EXPECT_GT(acked.size(), static_cast<size_t>(kCycles));
}

// A Sync that fails says so, and the store then refuses writes as after any
// failed write: nobody counts unsynced ingests as stored.
TEST(PowerCut, FailedSyncIsReportedAndStopsWrites) {
  FaultEnv env;
  ManualClock clock(1795000000LL * 1000000);
  std::unique_ptr<Store> store = MustOpen(FaultOptions(&env, Durability::kBuffered, &clock));
  ASSERT_TRUE(store);
  ASSERT_EQ(store->Ingest(Issued("evt_s1", "rcp_1")).outcome, Outcome::kAccepted);
  EXPECT_TRUE(store->Sync().ok());
  ASSERT_EQ(store->Ingest(Issued("evt_s2", "rcp_2")).outcome, Outcome::kAccepted);
  env.SetSyncError(true);
  const Status synced = store->Sync();
  EXPECT_FALSE(synced.ok());
  EXPECT_NE(synced.message().find("writing events"), std::string::npos) << synced.ToString();
  const IngestResult after = store->Ingest(Issued("evt_s3", "rcp_3"));
  EXPECT_EQ(after.outcome, Outcome::kStorageError) << after.message;
  EXPECT_FALSE(store->Sync().ok());
}

// ---- A full disk ------------------------------------------------------------------

TEST(DiskFull, FillingUpMidIngestNeverDamagesTheStore) {
  const uint64_t seed = TestSeed("DiskFull.FillingUpMidIngestNeverDamagesTheStore", 7500);
  std::mt19937_64 rng(seed);
  FaultEnv env;
  Options o = FaultOptions(&env);
  o.write_buffer_bytes = 256 << 10;  // memtable flushes and compactions hit the full disk too
  const std::vector<Delivery> stream = StreamOf(seed, 1200);
  Acked acked;
  size_t full_503 = 0, rounds = 0;
  size_t pos = 0;
  for (int round = 0; round < 4 && pos < stream.size(); ++round, ++rounds) {
    const uint64_t space = std::uniform_int_distribution<uint64_t>(20 << 10, 400 << 10)(rng);
    {
      std::unique_ptr<Store> store = MustOpen(o);
      ASSERT_TRUE(store);
      env.SetSpaceLeft(space);
      std::atomic<size_t> next{pos};
      std::atomic<int> errors{0};
      std::mutex mu;
      auto worker = [&] {
        for (size_t i; errors < 50 && (i = next.fetch_add(1)) < stream.size();) {
          const IngestResult r = store->Ingest(stream[i]);
          if (r.outcome == Outcome::kStorageError) {
            ++errors;
            EXPECT_EQ(r.http_status(), 503);
          } else if (Acknowledged(r.outcome)) {
            std::lock_guard lock(mu);
            acked[r.event_id] = r.entity;
          }
        }
      };
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) threads.emplace_back(worker);
      for (std::thread& t : threads) t.join();
      full_503 += static_cast<size_t>(errors.load());
      EXPECT_GT(errors.load(), 0) << "the disk never filled up (" << space << " bytes)";
      // Reads work while the disk is full.
      ExpectFeedWithoutGap(store.get());
      EXPECT_TRUE(store->List("", [](const Projection&) { return true; }).ok());
      pos = std::min(next.load(), stream.size());
      env.SetSpaceLeft(std::nullopt);  // space freed
    }
    ExpectConsistent(o, &env, acked);
    env.DropUnsyncedData();
    ExpectConsistent(o, &env, acked);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "round " << round << " (seed " << seed << ", " << space << " bytes left)";
      return;
    }
    pos = pos > 200 ? pos - 200 : 0;  // the sender retries what got 503
  }
  std::printf(
      "DiskFull: %zu rounds filled the disk mid-ingest (%zu answers 503), %zu "
      "acknowledged events all intact, store checked clean after each\n",
      rounds, full_503, acked.size());
}

}  // namespace
}  // namespace eventfold::reliability
