// A backup or a restore SIGKILLed at every step of its copy never leaves a
// directory that passes for a store: Store::Open, a restore from it and a
// second copy into it refuse it, naming the copy that did not finish, until
// it is removed (DestroyStore); `check` and repair name it and neither
// takes its files for damage to mend; then the copy runs again and opens. The
// child kills itself just before its k-th change under the target (a file
// made, renamed or removed, a directory made or removed), for every k up to
// the change after which it finishes. Forks its children, so it has its own
// binary: a child of a process whose LevelDB background thread already ran
// would have none.

#include <gtest/gtest.h>
#include <leveldb/env.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "eventfold/backup.h"
#include "eventfold/maintenance.h"
#include "eventfold/repair.h"
#include "eventfold/store.h"
#include "tests/common/fork_child.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tools/history.h"

#ifndef EVENTFOLD_CLI
#error "EVENTFOLD_CLI must name the eventfold binary"
#endif

namespace eventfold::reliability {
namespace {

namespace fs = std::filesystem;
using test_util::ScratchDir;

// The default Env, except that the process kills itself before its
// `kill_at`-th change under `target` (1: before the first).
class KillingEnv : public leveldb::EnvWrapper {
 public:
  KillingEnv(std::string target, int kill_at)
      : leveldb::EnvWrapper(leveldb::Env::Default()),
        target_(std::move(target)),
        kill_at_(kill_at) {}

  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override {
    Change(f);
    return target()->NewWritableFile(f, r);
  }
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override {
    Change(f);
    return target()->NewAppendableFile(f, r);
  }
  leveldb::Status RenameFile(const std::string& from, const std::string& to) override {
    Change(from);
    return target()->RenameFile(from, to);
  }
  leveldb::Status RemoveFile(const std::string& f) override {
    Change(f);
    return target()->RemoveFile(f);
  }
  leveldb::Status CreateDir(const std::string& d) override {
    Change(d);
    return target()->CreateDir(d);
  }
  leveldb::Status RemoveDir(const std::string& d) override {
    Change(d);
    return target()->RemoveDir(d);
  }

 private:
  void Change(const std::string& path) {
    if (path != target_ && !path.starts_with(target_ + "/")) return;
    if (++changes_ == kill_at_) ::raise(SIGKILL);
  }

  const std::string target_;
  const int kill_at_;
  std::atomic<int> changes_{0};
};

// Runs `copy` (OK: exit 0) in a child that is killed before its `kill_at`-th
// change under `target`; true when it was killed, false when it finished.
bool CopyKilledAt(const std::string& target, int kill_at,
                  const std::function<Status(leveldb::Env*)>& copy) {
  test_util::ForkedChild child = test_util::ForkWithPipe([&](int) {
    KillingEnv env(target, kill_at);
    std::_Exit(copy(&env).ok() ? 0 : 1);
  });
  EXPECT_GT(child.pid, 0);
  if (child.pid <= 0) return false;
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  ::close(child.from_child);
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    return true;
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the copy itself failed";
  return false;
}

// What a killed copy left at `target` is no store to anyone: nothing of
// the copy (killed before its mark), or refused, naming the copy, by
// Store::Open, by a restore from it and by a backup or restore into it.
// Then it is removed, and `again` (the copy, uninterrupted) makes a store.
void ExpectRefusedUntilRemoved(const std::string& target, const std::string& what, int k,
                               const std::string& live, const std::string& scratch) {
  SCOPED_TRACE(what + " killed before its change " + std::to_string(k));
  // Nothing of the copy: absent, empty, or LevelDB's lock file alone (a
  // restore locks the directory before it marks it).
  bool empty = true;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(target, ec)) empty &= e.path().filename() == "LOCK";
  Options o;
  o.create_if_missing = true;                           // as `eventfold ingest` and `serve` open
  const Status open = Store::Open(target, o).status();  // closed again at once
  if (empty) {
    // A store made in an empty directory is a new store, not a partial one.
    EXPECT_TRUE(open.ok()) << open.ToString();
  } else {
    ASSERT_FALSE(open.ok()) << "a stopped copy opened as a store";
    EXPECT_TRUE(open.IsCorruption()) << open.ToString();
    EXPECT_NE(open.message().find(what + " that did not finish"), std::string::npos)
        << open.ToString();
    Result<BackupSummary> from = RestoreStore(target, scratch + "/from", Options());
    EXPECT_FALSE(from.ok()) << "restored from a backup that did not finish";
    EXPECT_FALSE(fs::exists(scratch + "/from"));
    Result<BackupSummary> into = RestoreStore(live + "-backup", target, Options());
    ASSERT_FALSE(into.ok());
    EXPECT_TRUE(into.status().IsInvalidArgument()) << into.status().ToString();
    EXPECT_NE(into.status().message().find("did not finish"), std::string::npos)
        << into.status().ToString();
    Result<RepairSummary> repair = RepairStore(target, Options(), [](const LostData&) {});
    EXPECT_TRUE(repair.status().IsCorruption()) << repair.status().ToString();
    size_t damage = 0;
    Result<FileCheckSummary> files =
        CheckStoreFiles(target, Options(), [&](const FileDamage&) { ++damage; });
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    EXPECT_EQ(files->unfinished_copy, what);
    EXPECT_EQ(damage, 0u) << "a copy cut short named as damage to repair";
    if (k % 8 == 0) {  // the command's answer, on some of the steps
      test_util::TempDir tmp;
      const test_util::CliResult check =
          test_util::RunCli(EVENTFOLD_CLI, {"check", "--data", target}, tmp.path() + "/c");
      EXPECT_EQ(check.exit_code, 1) << check.err;
      EXPECT_NE(check.err.find(what + " that did not finish"), std::string::npos) << check.err;
      EXPECT_EQ(check.err.find("repair"), std::string::npos) << check.err;
    }
  }
  const Status destroyed = DestroyStore(target, Options());
  ASSERT_TRUE(destroyed.ok()) << destroyed.ToString();
  EXPECT_FALSE(fs::exists(target) && !fs::is_empty(target, ec)) << "DestroyStore left files";
}

class StoppedCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::HistoryOptions ho;
    ho.receipts = 120;
    ho.products = 20;
    Options o;
    o.write_buffer_bytes = 64 << 10;  // tables, not only a log, in the copies
    Result<std::unique_ptr<Store>> s = Store::Open(live_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (const Delivery& d : sim::GenerateHistory(ho).deliveries) (void)(*s)->Ingest(d);
    ASSERT_EQ((*s)->Ingest("{not json").outcome, Outcome::kInvalid);  // a quarantine to copy
    ASSERT_TRUE((*s)->maintenance().Backup(live_ + "-backup").ok());
  }

  // Kills `copy` ("a backup of ..." or "a restore of ...", as `what`)
  // before each of its changes in `target` in turn, checking what each kill
  // left; then lets it finish, and the store it made opens.
  void KillAtEveryStep(const std::string& target, const std::string& what,
                       const std::function<Status(leveldb::Env*)>& copy) {
    int k = 1;
    for (; k < 400; ++k) {
      if (!CopyKilledAt(target, k, copy)) break;
      ExpectRefusedUntilRemoved(target, what, k, live_, scratch_.path());
      if (HasFatalFailure()) return;
    }
    std::printf("%s killed before each of its first %d changes\n", what.c_str(), k - 1);
    ASSERT_LT(k, 400) << "the copy never finished";
    EXPECT_GT(k, 10) << "too few steps to have killed it mid-copy";
    Result<std::unique_ptr<Store>> whole = Store::Open(target, Options());
    EXPECT_TRUE(whole.ok()) << whole.status().ToString();
  }

  ScratchDir scratch_{"stopped-copy"};
  const std::string live_ = scratch_.path() + "/live";
};

TEST_F(StoppedCopy, ABackupKilledAtAnyStepIsRefusedUntilRemoved) {
  const std::string target = scratch_.path() + "/made/backup";
  KillAtEveryStep(target, "a backup of " + live_, [&](leveldb::Env* env) {
    Options o;
    o.env = env;
    Result<std::unique_ptr<Store>> s = Store::Open(live_, o);
    return s.ok() ? (*s)->maintenance().Backup(target).status() : s.status();
  });
}

TEST_F(StoppedCopy, ARestoreKilledAtAnyStepIsRefusedUntilRemoved) {
  const std::string target = scratch_.path() + "/made/restored";
  const std::string backup = live_ + "-backup";
  KillAtEveryStep(target, "a restore of " + backup, [&](leveldb::Env* env) {
    Options o;
    o.env = env;
    return RestoreStore(backup, target, o).status();
  });
}

}  // namespace
}  // namespace eventfold::reliability
