// Repair, restore and destroy hold the store's lock from when they take it
// to their last step: at every file they touch in the directory, a Store
// opening it (here: another lock of the directory's LOCK file) would be
// refused, and they take the lock once, never letting go of it for an open
// of their own.
// Before, repair let go for LevelDB's repairer, a restore before checking
// its copy and destroy between the quarantine and the database, and a Store
// opening the directory in those windows was not refused.

#include <gtest/gtest.h>
#include <leveldb/env.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eventfold/backup.h"
#include "eventfold/maintenance.h"
#include "eventfold/repair.h"
#include "eventfold/store.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"
#include "tools/history.h"

namespace eventfold::reliability {
namespace {

using test_util::ScratchDir;

// Counts the locks taken on one directory's LOCK file and, at each file
// opened, removed, renamed or listed there, tries that lock as another
// opener would: taking it must fail (LevelDB refuses a lock its process
// already holds, as another process's is refused by fcntl).
class LockProbeEnv : public leveldb::EnvWrapper {
 public:
  explicit LockProbeEnv(const std::string& dir)
      : leveldb::EnvWrapper(leveldb::Env::Default()), dir_(dir), lock_path_(dir + "/LOCK") {}

  leveldb::Status LockFile(const std::string& name, leveldb::FileLock** lock) override {
    if (name == lock_path_) {
      std::lock_guard<std::mutex> l(mu_);
      ++locks_;
    }
    return target()->LockFile(name, lock);
  }
  leveldb::Status NewSequentialFile(const std::string& f, leveldb::SequentialFile** r) override {
    Probe(f);
    return target()->NewSequentialFile(f, r);
  }
  leveldb::Status NewRandomAccessFile(const std::string& f,
                                      leveldb::RandomAccessFile** r) override {
    Probe(f);
    return target()->NewRandomAccessFile(f, r);
  }
  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override {
    Probe(f);
    return target()->NewWritableFile(f, r);
  }
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override {
    Probe(f);
    return target()->NewAppendableFile(f, r);
  }
  leveldb::Status RemoveFile(const std::string& f) override {
    Probe(f);
    return target()->RemoveFile(f);
  }
  leveldb::Status RenameFile(const std::string& from, const std::string& to) override {
    Probe(from);
    return target()->RenameFile(from, to);
  }
  leveldb::Status GetChildren(const std::string& d, std::vector<std::string>* r) override {
    Probe(d + "/");
    return target()->GetChildren(d, r);
  }

  int locks() {
    std::lock_guard<std::mutex> l(mu_);
    return locks_;
  }
  int probes() {
    std::lock_guard<std::mutex> l(mu_);
    return probes_;
  }
  std::vector<std::string> windows() {
    std::lock_guard<std::mutex> l(mu_);
    return windows_;
  }

 private:
  void Probe(const std::string& path) {
    if (!path.starts_with(dir_ + "/")) return;
    // Without a LOCK file there is nothing to open yet, and the probe would
    // create one (after a destroy has deleted it, one that stays).
    if (!target()->FileExists(lock_path_)) return;
    {
      // What it reads before locking (is there a store at all?) decides
      // nothing a Store opening meanwhile could spoil: the lock is kBusy then.
      std::lock_guard<std::mutex> l(mu_);
      if (locks_ == 0) return;
    }
    leveldb::FileLock* lock = nullptr;
    const bool taken = target()->LockFile(lock_path_, &lock).ok();
    if (taken) (void)target()->UnlockFile(lock);
    std::lock_guard<std::mutex> l(mu_);
    ++probes_;
    if (taken) windows_.push_back(path);
  }

  const std::string dir_;
  const std::string lock_path_;
  std::mutex mu_;
  int locks_ = 0;
  int probes_ = 0;
  std::vector<std::string> windows_;  // files touched while another could open
};

// A store with events, a refusal in its quarantine, and its backup.
void MakeStoreAndBackup(const std::string& dir, const std::string& backup) {
  Result<std::unique_ptr<Store>> s = Store::Open(dir, Options());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  sim::HistoryOptions ho;
  ho.seed = test_util::TestSeed("ExclusiveTools", 4242);
  ho.receipts = 20;
  ho.products = 5;
  for (const Delivery& d : sim::GenerateHistory(ho).deliveries) (void)(*s)->Ingest(d);
  ASSERT_EQ((*s)->Ingest("{not json").outcome, Outcome::kInvalid);
  Result<BackupSummary> b = (*s)->maintenance().Backup(backup);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
}

void ExpectHeldThroughout(LockProbeEnv& env, const std::string& what) {
  EXPECT_EQ(env.locks(), 1) << what << " took the store's lock more than once: it let go between";
  EXPECT_GT(env.probes(), 0) << what << " touched no file the probe saw";
  for (const std::string& f : env.windows()) {
    ADD_FAILURE() << what << " touched " << f << " while another Store could open the store";
  }
}

// A store with events and a refusal (`dir_`), and its backup (`backup_`).
class ExclusiveTools : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(MakeStoreAndBackup(dir_.path(), backup_.path()));
  }
  // Options whose Env is `env`.
  static Options Through(LockProbeEnv* env) {
    Options o;
    o.env = env;
    return o;
  }
  ScratchDir dir_{"excl"}, backup_{"excl-bk"};
};

TEST_F(ExclusiveTools, RepairHoldsTheStoresLockThroughout) {
  LockProbeEnv env(dir_.path());
  Result<RepairSummary> r = RepairStore(dir_.path(), Through(&env), [](const LostData&) {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->problems_left, 0u);
  ExpectHeldThroughout(env, "repair");
}

TEST_F(ExclusiveTools, RestoreHoldsTheStoresLockThroughout) {
  ScratchDir target("excl-restore-to");
  LockProbeEnv env(target.path());
  Result<BackupSummary> r = RestoreStore(backup_.path(), target.path(), Through(&env));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->records, 0u);
  ExpectHeldThroughout(env, "restore");
  Result<std::unique_ptr<Store>> restored = Store::Open(target.path(), Options());
  EXPECT_TRUE(restored.ok()) << "the lock is released at the end: " << restored.status().ToString();
}

TEST_F(ExclusiveTools, DestroyHoldsTheStoresLockThroughout) {
  LockProbeEnv env(dir_.path());
  ASSERT_TRUE(DestroyStore(dir_.path(), Through(&env)).ok());
  ExpectHeldThroughout(env, "destroy");
  EXPECT_FALSE(leveldb::Env::Default()->FileExists(dir_.path())) << "the store is gone";
}

}  // namespace
}  // namespace eventfold::reliability
