// Repair, restore and destroy hold the store's lock from when they take it
// to their last step: at every file they touch in the directory, a Store
// opening it (here: another lock of the directory's LOCK file) would be
// refused, and they take the lock once, never letting go of it for an open
// of their own.
// Before, repair let go for LevelDB's repairer, a restore before checking
// its copy and destroy between the quarantine and the database, and a Store
// opening the directory in those windows was not refused.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <leveldb/env.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "core/thread_annotations.h"
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
// process would: taking it must fail.
//
// The probe is an open file description lock (F_OFD_SETLK), which conflicts
// with the tool's fcntl record lock even within this process, as another
// process's lock would. Not LevelDB's LockFile: LevelDB refuses a lock its
// process holds only after opening the file, and its close of that
// descriptor drops the process's record locks on the file, the tool's
// included. For the same reason the probe's descriptors stay open until the
// Env is destroyed, after the tool has let go.
class LockProbeEnv : public leveldb::EnvWrapper {
 public:
  explicit LockProbeEnv(const std::string& dir)
      : leveldb::EnvWrapper(leveldb::Env::Default()), dir_(dir), lock_path_(dir + "/LOCK") {}
  ~LockProbeEnv() override {
    MutexLock l(&mu_);
    for (int fd : fds_) ::close(fd);
  }

  leveldb::Status LockFile(const std::string& name, leveldb::FileLock** lock) override {
    if (name == lock_path_) {
      MutexLock l(&mu_);
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
    MutexLock l(&mu_);
    return locks_;
  }
  int probes() {
    MutexLock l(&mu_);
    return probes_;
  }
  std::vector<std::string> windows() {
    MutexLock l(&mu_);
    return windows_;
  }

 private:
  void Probe(const std::string& path) {
    if (!path.starts_with(dir_ + "/")) return;
    MutexLock l(&mu_);
    // What it reads before locking (is there a store at all?) decides
    // nothing a Store opening meanwhile could spoil: the lock is kBusy then.
    if (locks_ == 0) return;
    // Without a LOCK file there is nothing to open yet (and after a
    // destroy has deleted it, nothing to keep).
    const int fd = LockFileDescriptor();
    if (fd < 0) return;
    struct flock probe = {};
    probe.l_type = F_WRLCK;
    probe.l_whence = SEEK_SET;
    const bool taken = ::fcntl(fd, F_OFD_SETLK, &probe) == 0;
    if (taken) {
      probe.l_type = F_UNLCK;
      ::fcntl(fd, F_OFD_SETLK, &probe);
    }
    ++probes_;
    if (taken) windows_.push_back(path);
  }

  // A descriptor of the LOCK file now at lock_path_ (-1: none), opened once
  // for each file that has been there.
  int LockFileDescriptor() REQUIRES(mu_) {
    struct stat now;
    if (::stat(lock_path_.c_str(), &now) != 0) return -1;
    struct stat open_one;
    if (!fds_.empty() && ::fstat(fds_.back(), &open_one) == 0 && open_one.st_dev == now.st_dev &&
        open_one.st_ino == now.st_ino) {
      return fds_.back();
    }
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) fds_.push_back(fd);
    return fd;
  }

  const std::string dir_;
  const std::string lock_path_;
  Mutex mu_;
  int locks_ GUARDED_BY(mu_) = 0;
  int probes_ GUARDED_BY(mu_) = 0;
  // Files touched while another could open the store.
  std::vector<std::string> windows_ GUARDED_BY(mu_);
  std::vector<int> fds_ GUARDED_BY(mu_);  // of each LOCK file probed, the newest last
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
