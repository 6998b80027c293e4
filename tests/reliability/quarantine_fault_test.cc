// The quarantine can never fail the store or delay an acknowledgement: it
// has a database of its own (DIR/quarantine/) written in the background
// from a bounded queue (store/quarantine_log.h). With every write under
// DIR/quarantine failing, refusals still get their 4xx, valid deliveries
// their 200 and are stored, the store stays healthy, and what the
// quarantine could not keep is counted; it reopens on the Clock once the
// disk works. A writer held up by a slow disk fills the queue, and more
// refusals are dropped and counted, never waited for. Entries survive a
// reopen, and those an older build kept in the store's own database move.

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/helpers/memenv.h>
#include <leveldb/write_batch.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/signature.h"
#include "eventfold/backup.h"
#include "eventfold/receiver.h"
#include "eventfold/store.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "store/store_impl.h"
#include "tests/common/quarantined.h"
#include "tests/reliability/fault_env.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold::reliability {
namespace {

using storage_test::Issued;
using test_util::Quarantined;

constexpr int64_t kT0 = 1795000000LL * 1000000;
constexpr char kDir[] = "/mem/qstore";
constexpr char kSecret[] = "quarantine_test_secret_0123456789";
// Real time a test waits at most for a background step it has made due.
constexpr int64_t kBound = 60LL * 1000 * 1000;

storage::StoreImpl* Hook(Store* store) { return static_cast<storage::StoreImpl*>(store); }

Options TestOptions(leveldb::Env* env, Clock* clock) {
  Options o;
  o.env = env;
  o.clock = clock;
  o.quarantine_max_per_second = 0;
  return o;
}

std::unique_ptr<Store> MustOpen(const Options& o) {
  Result<std::unique_ptr<Store>> s = Store::Open(kDir, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

RefusedDelivery Unauthorized(const std::string& id) {
  RefusedDelivery r;
  r.outcome = Outcome::kUnauthorized;
  r.reason = "X-RR-Signature: missing";
  r.headers = {{"X-RR-Event-Id", id}};
  r.body_prefix = "{}";
  return r;
}

// The store at kDir, opened while every write under its quarantine's
// directory fails: the store opens, its quarantine does not.
std::unique_ptr<Store> OpenWithItsQuarantineFailing(FaultEnv* env, const Options& o) {
  env->SetFaultPrefix(std::string(kDir) + "/quarantine/");
  env->SetAppendError(true);
  env->SetSyncError(true);
  return MustOpen(o);
}

// Drives a Receiver the way `serve` does: signed, unsigned, invalid.
struct Sender {
  Clock* clock;
  std::unique_ptr<Receiver> receiver;

  Sender(Store* store, Clock* c) : clock(c) {
    ReceiverOptions ro;
    ro.secrets = {kSecret};
    ro.clock = c;
    Result<std::unique_ptr<Receiver>> r = Receiver::Make(store, ro);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) receiver = std::move(*r);
  }
  int Signed(const std::string& body) {
    const std::string sig = SignRr(kSecret, clock->NowMicros() / 1000000, body);
    return receiver->Handle("POST", "/hooks", {{"X-RR-Signature", sig}}, body).status;
  }
  int Unsigned(const std::string& body) {
    return receiver->Handle("POST", "/hooks", {{"X-Auth-Key", "k"}}, body).status;
  }
};

// Every delivery kind answered as if the quarantine were healthy.
void ExpectAnswersUnaffected(Store* store, Sender* sender, int round) {
  const std::string n = std::to_string(round);
  for (int i = 0; i < 5; ++i) {
    const std::string id = "evt_" + n + "_" + std::to_string(i);
    EXPECT_EQ(sender->Unsigned(Issued(id, "rcp_u")), 401);
    EXPECT_EQ(sender->Signed("{\"event_id\":\"" + id + "\"}"), 400);
    EXPECT_EQ(sender->Signed(Issued(id, "rcp_" + n + "_" + std::to_string(i))), 200);
    EXPECT_EQ(sender->Signed(Issued(id, "rcp_" + n + "_" + std::to_string(i))), 200)
        << "a resend is a duplicate";
  }
  for (int i = 0; i < 5; ++i) {
    Result<Projection> p = store->Get("receipt", "rcp_" + n + "_" + std::to_string(i));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->state, "issued");
  }
  EXPECT_EQ(store->counters().storage_error, 0u);
}

TEST(QuarantineFault, FailingQuarantineDiskNeverFailsTheStore) {
  FaultEnv env;
  ManualClock clock(kT0);
  const Options o = TestOptions(&env, &clock);
  std::unique_ptr<Store> store = OpenWithItsQuarantineFailing(&env, o);
  ASSERT_TRUE(store);
  Sender sender(store.get(), &clock);
  ExpectAnswersUnaffected(store.get(), &sender, 0);
  EXPECT_EQ(store->counters().quarantine_dropped, 10u) << "5 unsigned and 5 invalid";
  EXPECT_TRUE(
      store->quarantine().List([](const RefusedDelivery&) { return true; }).IsUnavailable());

  // A reopen attempt while the disk still fails: still closed, still fine.
  storage::QuarantineLog& q = Hook(store.get())->quarantine_log();
  clock.Advance(2 * storage::QuarantineLog::kFirstRetryDelay);
  bool open = true;
  ASSERT_EQ(q.WaitForReopenAttempt(0, kBound, &open), 1u);
  EXPECT_FALSE(open);
  ExpectAnswersUnaffected(store.get(), &sender, 1);
  EXPECT_EQ(store->counters().quarantine_dropped, 20u);

  // The disk works again: the next attempt (on the Clock) reopens it.
  env.ClearFaults();
  clock.Advance(storage::QuarantineLog::kMaxRetryDelay);
  ASSERT_EQ(q.WaitForReopenAttempt(1, kBound, &open), 2u);
  EXPECT_TRUE(open);
  EXPECT_EQ(sender.Unsigned(Issued("evt_after", "rcp_u")), 401);
  std::vector<RefusedDelivery> kept = Quarantined(store.get());
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].status, 401);
  EXPECT_EQ(store->counters().quarantine_dropped, 20u);
}

// A backup taken while the quarantine is closed leaves it out; the backup's
// own check then makes an empty one in the copy. Its manifest lists what the
// copy holds after that check, so the backup restores (it was refused as
// "holds a quarantine the manifest does not list" when the manifest was
// taken before the check).
TEST(QuarantineFault, ABackupTakenWhileTheQuarantineIsClosedRestores) {
  FaultEnv env;
  ManualClock clock(kT0);
  const Options o = TestOptions(&env, &clock);
  std::unique_ptr<Store> store = OpenWithItsQuarantineFailing(&env, o);
  ASSERT_TRUE(store);
  ASSERT_EQ(store->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kAccepted);
  Result<BackupSummary> b = store->maintenance().Backup("/mem/backup");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  store.reset();
  env.ClearFaults();
  Result<BackupSummary> r = RestoreStore("/mem/backup", "/mem/restored", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Result<std::unique_ptr<Store>> back = Store::Open("/mem/restored", o);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE((*back)->Get("receipt", "rcp_1").ok());
}

TEST(QuarantineFault, WriteFailureAfterOpenDropsCountsAndRecovers) {
  FaultEnv env;
  ManualClock clock(kT0);
  const Options o = TestOptions(&env, &clock);
  std::unique_ptr<Store> store = MustOpen(o);
  ASSERT_TRUE(store);
  Sender sender(store.get(), &clock);
  EXPECT_EQ(sender.Unsigned(Issued("evt_a", "rcp_a")), 401);
  ASSERT_EQ(Quarantined(store.get()).size(), 1u);

  env.SetFaultPrefix(std::string(kDir) + "/quarantine/");
  env.SetAppendError(true);
  EXPECT_EQ(sender.Unsigned(Issued("evt_b", "rcp_b")), 401);  // its write fails
  EXPECT_TRUE(
      store->quarantine().List([](const RefusedDelivery&) { return true; }).IsUnavailable());
  ExpectAnswersUnaffected(store.get(), &sender, 0);
  EXPECT_EQ(store->counters().quarantine_dropped, 11u);
  EXPECT_GT(env.faults_injected(), 0u);

  env.ClearFaults();
  storage::QuarantineLog& q = Hook(store.get())->quarantine_log();
  clock.Advance(storage::QuarantineLog::kMaxRetryDelay);
  bool open = false;
  ASSERT_EQ(q.WaitForReopenAttempt(0, kBound, &open), 1u);
  EXPECT_TRUE(open);
  EXPECT_EQ(sender.Unsigned(Issued("evt_c", "rcp_c")), 401);
  std::vector<RefusedDelivery> kept = Quarantined(store.get());
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_LT(kept[0].seq, kept[1].seq);
  EXPECT_EQ(kept[0].headers, (Headers{}));  // X-Auth-Key is not on the allowlist
}

// An Env whose appends to the quarantine's log wait while the gate is
// closed: a writer held up by a slow disk.
class GateEnv final : public leveldb::EnvWrapper {
 public:
  explicit GateEnv(leveldb::Env* base) : EnvWrapper(base) {}
  void Close() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Waits (bounded, real time) until an append is held at the gate.
  bool AwaitHeld() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return held_ > 0; });
  }
  leveldb::Status NewWritableFile(const std::string& name, leveldb::WritableFile** out) override {
    leveldb::Status s = target()->NewWritableFile(name, out);
    if (s.ok() && name.find("/quarantine/") != std::string::npos && name.ends_with(".log")) {
      *out = new Gated(this, *out);
    }
    return s;
  }

 private:
  class Gated final : public leveldb::WritableFile {
   public:
    Gated(GateEnv* env, leveldb::WritableFile* base) : env_(env), base_(base) {}
    leveldb::Status Append(const leveldb::Slice& data) override {
      env_->Pass();
      return base_->Append(data);
    }
    leveldb::Status Close() override { return base_->Close(); }
    leveldb::Status Flush() override { return base_->Flush(); }
    leveldb::Status Sync() override { return base_->Sync(); }

   private:
    GateEnv* env_;
    std::unique_ptr<leveldb::WritableFile> base_;
  };

  void Pass() {
    std::unique_lock lock(mu_);
    ++held_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    --held_;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int held_ = 0;
};

TEST(QuarantineFault, FullQueueDropsAndCountsWithoutWaiting) {
  std::unique_ptr<leveldb::Env> mem(leveldb::NewMemEnv(leveldb::Env::Default()));
  GateEnv env(mem.get());
  ManualClock clock(kT0);
  std::unique_ptr<Store> store = MustOpen(TestOptions(&env, &clock));
  ASSERT_TRUE(store);
  env.Close();
  ASSERT_TRUE(store->quarantine().Add(Unauthorized("evt_first")).ok());
  ASSERT_TRUE(env.AwaitHeld()) << "the writer never reached the disk";
  // The writer is stuck on the disk with the first: the queue fills...
  constexpr size_t kQueue = storage::QuarantineLog::kQueueEntries;
  for (size_t i = 0; i < kQueue; ++i) {
    ASSERT_TRUE(store->quarantine().Add(Unauthorized("evt_q" + std::to_string(i))).ok());
  }
  EXPECT_EQ(store->counters().quarantine_dropped, 0u);
  // ...and then refusals are dropped and counted, while ingest goes on.
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(store->quarantine().Add(Unauthorized("evt_over" + std::to_string(i))).ok());
  }
  EXPECT_EQ(store->counters().quarantine_dropped, 7u);
  EXPECT_EQ(store->Ingest(Issued("evt_ok", "rcp_ok")).outcome, Outcome::kAccepted);
  EXPECT_EQ(store->Ingest("{not json").outcome, Outcome::kInvalid);
  EXPECT_EQ(store->counters().quarantine_dropped, 8u);
  EXPECT_EQ(store->Stats().refused, 1 + kQueue);
  env.Open();
  std::vector<RefusedDelivery> kept = Quarantined(store.get());
  ASSERT_EQ(kept.size(), 1 + kQueue);
  EXPECT_EQ(kept.front().headers, (Headers{{"X-RR-Event-Id", "evt_first"}}));
  EXPECT_EQ(kept.back().headers,
            (Headers{{"X-RR-Event-Id", "evt_q" + std::to_string(kQueue - 1)}}));
}

TEST(QuarantineFault, EntriesSurviveReopenAndOldStoresMoveTheirs) {
  std::unique_ptr<leveldb::Env> env(leveldb::NewMemEnv(leveldb::Env::Default()));
  ManualClock clock(kT0);
  const Options o = TestOptions(env.get(), &clock);
  { ASSERT_TRUE(MustOpen(o)); }
  // An older build's refusals, in the store's own database.
  {
    leveldb::Options lo;
    lo.env = env.get();
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(lo, kDir, &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    leveldb::WriteBatch batch;
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      RefusedDelivery r = Unauthorized("evt_old" + std::to_string(seq));
      r.status = 401;
      batch.Put(storage::QuarantineKey(seq), storage::EncodeRefused(r));
    }
    ASSERT_TRUE(db->Write(leveldb::WriteOptions(), &batch).ok());
  }
  {
    std::unique_ptr<Store> store = MustOpen(o);
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->quarantine().Add(Unauthorized("evt_new")).ok());
    std::vector<RefusedDelivery> kept = Quarantined(store.get());
    ASSERT_EQ(kept.size(), 4u);
    EXPECT_EQ(kept[0].headers, (Headers{{"X-RR-Event-Id", "evt_old1"}})) << "oldest first";
    EXPECT_EQ(kept[3].headers, (Headers{{"X-RR-Event-Id", "evt_new"}}));
    EXPECT_EQ(kept[3].seq, 4u);
    Result<CheckSummary> check = store->maintenance().Check(
        [](const CheckProblem& p) { ADD_FAILURE() << p.key << ": " << p.message; });
    ASSERT_TRUE(check.ok());
    EXPECT_EQ(check->refused, 4u);
  }
  // Moved, not copied: the store's own database holds none now.
  {
    leveldb::Options lo;
    lo.env = env.get();
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(lo, kDir, &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    it->Seek(std::string(storage::kQuarantinePrefix));
    EXPECT_FALSE(it->Valid() && it->key().starts_with(std::string(storage::kQuarantinePrefix)));
  }
  std::unique_ptr<Store> store = MustOpen(o);
  ASSERT_TRUE(store);
  EXPECT_EQ(Quarantined(store.get()).size(), 4u) << "kept across a reopen";
  EXPECT_EQ(store->Stats().refused, 4u);
}

}  // namespace
}  // namespace eventfold::reliability
