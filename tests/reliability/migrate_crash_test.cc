// A format upgrade (Store::Open with Options::upgrade_format, what
// `eventfold migrate` runs) SIGKILLed at any moment leaves a store that is
// either upgraded or still the older format, never a third thing: opened
// without the option it is refused naming `eventfold migrate`, or opens
// because the upgrade had finished; the upgrade run again then gives the
// same projections, change feed and duplicate answers as the store had
// before it was put back into the older format, and its check is clean.
//
// The store is a seeded history of this build's format whose derived keys
// (under g/) are rewritten in format 7's grammar and m/format set to 7: the
// records the upgrade rewrites, in batches of 1 MiB. A child upgrades a copy
// of it and kills itself just before its k-th append to the store's
// write-ahead log, for k spread over the whole upgrade (an uninterrupted
// child counts them first): between batches and inside one. Forks its
// children, so it has its own binary.

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/write_batch.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "eventfold/maintenance.h"
#include "eventfold/store.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "tests/common/check_clean.h"
#include "tests/common/fork_child.h"
#include "tests/common/own_thread_env.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"
#include "tests/reliability/reliability_util.h"
#include "tests/storage/legacy_records.h"
#include "tests/storage/storage_test_util.h"
#include "tools/history.h"

namespace eventfold::reliability {
namespace {

namespace fs = std::filesystem;
using test_util::ScratchDir;

// The default Env, counting the appends to the write-ahead logs directly
// in `dir` (not the quarantine's), and killing the process just before the
// `kill_at`-th (0: never).
class LogAppendKillEnv : public leveldb::EnvWrapper {
 public:
  LogAppendKillEnv(std::string dir, uint64_t kill_at)
      : leveldb::EnvWrapper(leveldb::Env::Default()), dir_(std::move(dir)), kill_at_(kill_at) {}

  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override {
    leveldb::Status s = target()->NewWritableFile(f, r);
    if (s.ok() && IsStoreLog(f)) *r = new Counted(this, *r);
    return s;
  }
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override {
    leveldb::Status s = target()->NewAppendableFile(f, r);
    if (s.ok() && IsStoreLog(f)) *r = new Counted(this, *r);
    return s;
  }
  uint64_t appends() const { return appends_.load(); }

 private:
  class Counted : public leveldb::WritableFile {
   public:
    Counted(LogAppendKillEnv* env, leveldb::WritableFile* base) : env_(env), base_(base) {}
    leveldb::Status Append(const leveldb::Slice& data) override {
      if (env_->appends_.fetch_add(1) + 1 == env_->kill_at_) ::raise(SIGKILL);
      return base_->Append(data);
    }
    leveldb::Status Close() override { return base_->Close(); }
    leveldb::Status Flush() override { return base_->Flush(); }
    leveldb::Status Sync() override { return base_->Sync(); }

   private:
    LogAppendKillEnv* env_;
    std::unique_ptr<leveldb::WritableFile> base_;
  };

  bool IsStoreLog(const std::string& f) const {
    const fs::path p(f);
    return p.extension() == ".log" && p.parent_path() == fs::path(dir_);
  }

  const std::string dir_;
  const uint64_t kill_at_;
  std::atomic<uint64_t> appends_{0};
};

// What the store answered before it was put back into format 7.
struct Expected {
  std::vector<std::string> projections;
  std::vector<Change> feed;
  std::vector<Delivery> sample;  // stored deliveries: each a duplicate now
};

// Puts the closed store at `dir` back into format 7: its derived keys in
// format 7's grammar, m/format 7. Returns how many keys moved.
uint64_t BackToFormat7(const std::string& dir) {
  test_util::OwnThreadEnv env;  // a later child must not inherit the default Env's thread
  leveldb::Options lo;
  lo.env = &env;
  leveldb::DB* raw = nullptr;
  EXPECT_TRUE(leveldb::DB::Open(lo, dir, &raw).ok());
  std::unique_ptr<leveldb::DB> db(raw);
  if (!db) return 0;
  leveldb::WriteBatch batch;
  uint64_t moved = 0;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator({}));
  const std::string prefix(storage::kGenerationPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::string key = it->key().ToString();
    const std::string old_key = storage_test::LegacyGenerationKey(key);
    if (old_key == key) continue;
    batch.Delete(key);
    batch.Put(old_key, it->value());
    ++moved;
  }
  EXPECT_TRUE(it->status().ok());
  it.reset();
  batch.Put(storage::MetaKey("format"), storage::EncodeText("7"));
  EXPECT_TRUE(db->Write(leveldb::WriteOptions(), &batch).ok());
  return moved;
}

// What an upgrade that ran to its end did.
struct UpgradeRun {
  uint64_t appends = 0;  // to the store's write-ahead logs; 0: killed
  uint64_t batches = 0;  // of rewritten keys (progress reports)
};

// Upgrades the store at `dir` in a child killed before its `kill_at`-th log
// append (0: never).
UpgradeRun UpgradeInChild(const std::string& dir, uint64_t kill_at) {
  test_util::ForkedChild child = test_util::ForkWithPipe([&](int to_parent) {
    LogAppendKillEnv env(dir, kill_at);
    UpgradeRun run;
    Options o;
    o.env = &env;
    o.upgrade_format = true;
    o.upgrade_progress = [&run](uint64_t) { ++run.batches; };
    o.gc_interval_micros = 0;
    const bool ok = Store::Open(dir, o).ok();  // closed again at once
    run.appends = env.appends();
    (void)!::write(to_parent, &run, sizeof(run));
    std::_Exit(ok ? 0 : 1);
  });
  EXPECT_GT(child.pid, 0);
  if (child.pid <= 0) return {};
  UpgradeRun run;
  const ssize_t n = ::read(child.from_child, &run, sizeof(run));
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  ::close(child.from_child);
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    return {};
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the upgrade failed";
  EXPECT_EQ(n, static_cast<ssize_t>(sizeof(run)));
  return run;
}

// The store at `dir` after an upgrade ran (killed or not): upgraded, or
// refused as older; upgraded again, as it was before. Returns whether the
// upgrade that ran had finished.
bool ExpectWholeAfterKill(const std::string& dir, const Expected& expected) {
  Options plain;
  plain.gc_interval_micros = 0;
  plain.create_if_missing = false;
  bool finished = false;
  {
    Result<std::unique_ptr<Store>> s = Store::Open(dir, plain);
    finished = s.ok();
    if (!finished) {
      EXPECT_TRUE(s.status().IsInvalidArgument()) << s.status().ToString();
      EXPECT_NE(s.status().message().find("eventfold migrate --data"), std::string::npos)
          << s.status().ToString();
    }
  }
  Options upgrading = plain;
  upgrading.upgrade_format = true;
  Result<std::unique_ptr<Store>> s = Store::Open(dir, upgrading);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return finished;
  Store* store = s->get();
  EXPECT_EQ(storage_test::ListAll(store), expected.projections);
  EXPECT_EQ(AllChanges(store), expected.feed);
  for (const Delivery& d : expected.sample) {
    EXPECT_EQ(store->Ingest(d).outcome, Outcome::kDuplicate) << d.body.substr(0, 120);
  }
  test_util::ExpectCheckClean(store);
  return finished;
}

TEST(MigrateCrash, AnUpgradeKilledAtAnyAppendIsFinishedByTheNextOne) {
  const uint64_t seed = test_util::TestSeed("MigrateCrash", 8080);
  ScratchDir scratch("migrate-crash");
  const std::string original = scratch.path() + "/format7";
  Expected expected;
  {
    sim::HistoryOptions ho;
    ho.seed = seed;
    ho.receipts = 7500;
    ho.products = 1500;
    ho.duplicate_rate = 0.02;
    ho.target_body_bytes = 200;
    const sim::History h = sim::GenerateHistory(ho);
    Options o;
    o.durability = Durability::kBuffered;
    o.gc_interval_micros = 0;
    Result<std::unique_ptr<Store>> s = Store::Open(original, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (size_t i = 0; i < h.deliveries.size(); i += 1000) {
      const size_t end = std::min(h.deliveries.size(), i + 1000);
      (void)(*s)->IngestBatch(
          std::vector<Delivery>(h.deliveries.begin() + i, h.deliveries.begin() + end));
    }
    ASSERT_TRUE((*s)->Sync().ok());
    expected.projections = storage_test::ListAll(s->get());
    expected.feed = AllChanges(s->get());
    for (size_t i = 0; i < h.deliveries.size(); i += h.deliveries.size() / 40) {
      if ((*s)->Ingest(h.deliveries[i]).outcome == Outcome::kDuplicate) {
        expected.sample.push_back(h.deliveries[i]);
      }
    }
    std::printf("%zu deliveries, %zu projections, %zu kept to send again\n", h.deliveries.size(),
                expected.projections.size(), expected.sample.size());
  }
  ASSERT_GT(expected.sample.size(), 20u);
  const uint64_t moved = BackToFormat7(original);

  const auto fresh_copy = [&](const std::string& name) {
    const std::string dir = scratch.path() + "/" + name;
    fs::remove_all(dir);
    fs::copy(original, dir, fs::copy_options::recursive);
    return dir;
  };
  // Calibrate: an upgrade not killed, and its appends.
  const std::string whole = fresh_copy("whole");
  const UpgradeRun calibration = UpgradeInChild(whole, 0);
  const uint64_t total = calibration.appends;
  std::printf("%llu keys moved back; an upgrade makes %llu log appends in %llu batches\n",
              static_cast<unsigned long long>(moved), static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(calibration.batches));
  ASSERT_GE(calibration.batches, 3u) << "kills between batches need more than one";
  ASSERT_GT(total, 8u) << "too few appends to kill the upgrade inside it";
  EXPECT_TRUE(ExpectWholeAfterKill(whole, expected));

  int killed = 0, finished = 0;
  constexpr uint64_t kKills = 12;
  for (uint64_t i = 0; i < kKills; ++i) {
    const uint64_t k = 1 + i * (total - 1) / (kKills - 1);  // the first to the last append
    SCOPED_TRACE("killed before log append " + std::to_string(k) + " of " + std::to_string(total) +
                 " (seed " + std::to_string(seed) + ")");
    const std::string dir = fresh_copy("killed");
    if (UpgradeInChild(dir, k).appends != 0) {
      ADD_FAILURE() << "the upgrade made fewer appends than the calibration";
      continue;
    }
    ++killed;
    finished += ExpectWholeAfterKill(dir, expected);
    if (HasFatalFailure()) return;
  }
  std::printf("%d upgrades killed, %d of them after their last write\n", killed, finished);
  EXPECT_EQ(killed, static_cast<int>(kKills));
}

}  // namespace
}  // namespace eventfold::reliability
