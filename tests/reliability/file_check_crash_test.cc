// Issue 13's outside test of `eventfold check`: a store SIGKILLed mid-ingest
// six times, then 8 bytes flipped at a quarter of its largest table — check
// exits 1 naming that table (it said {"ok":true} when its own open had
// compacted the damage away). And `eventfold repair` SIGKILLed after each
// of several losses it listed, or after it rewrote a damaged table: the
// next repair lists them all again, and nothing more.
// Forks its children, so it has its own binary: a child of a process whose
// LevelDB background thread already ran would have none.

#include <gtest/gtest.h>
#include <leveldb/env.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "eventfold/repair.h"
#include "eventfold/store.h"
#include "tests/common/fork_child.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"
#include "tests/reliability/file_damage_util.h"
#include "tools/history.h"

#ifndef EVENTFOLD_CLI
#error "EVENTFOLD_CLI must name the eventfold binary"
#endif

namespace eventfold::reliability {
namespace {

namespace fs = std::filesystem;
using test_util::CliResult;
using test_util::RunCli;
using test_util::ScratchDir;
using test_util::TempDir;

TEST(FileCheckCrash, SigkilledStoreWithFlippedTableFailsCheck) {
  const uint64_t seed = test_util::TestSeed("FileCheckCrash", 6);
  ScratchDir dir("killed");
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 3000;
  ho.products = 300;
  const sim::History h = sim::GenerateHistory(ho);
  size_t next = 0;  // the first delivery the next child sends
  for (int kill = 0; kill < 6; ++kill) {
    const size_t stop_after = next + 300 + 30 * kill;  // killed after these are acknowledged
    test_util::ForkedChild child = test_util::ForkWithPipe([&](int to_parent) {
      Options o = SmallTables();
      o.durability = Durability::kSync;
      Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), o);
      if (!store.ok()) std::_Exit(3);
      for (size_t i = next; i < h.deliveries.size(); ++i) {
        (void)(*store)->Ingest(h.deliveries[i]);
        if (i + 1 == stop_after) (void)!::write(to_parent, "k", 1);
      }
      std::_Exit(0);
    });
    ASSERT_GT(child.pid, 0);
    char c = 0;
    const ssize_t n = ::read(child.from_child, &c, 1);  // killed mid-ingest, past stop_after
    ::kill(child.pid, SIGKILL);
    int status = 0;
    ::waitpid(child.pid, &status, 0);
    ::close(child.from_child);
    ASSERT_EQ(n, 1) << "the child ended before it got far enough";
    next = stop_after;
  }
  FileCheckSummary s;
  EXPECT_TRUE(Damages(dir.path(), &s).empty());
  uintmax_t largest_size = 0;
  const std::string largest = LargestLiveTable(dir.path(), s.unreferenced, &largest_size);
  ASSERT_FALSE(largest.empty());
  XorBytes(dir.path() + "/" + largest, largest_size / 4, std::string(8, '\xff'));
  TempDir tmp;
  const CliResult cli = RunCli(EVENTFOLD_CLI, {"check", "--data", dir.path()}, tmp.path() + "/c");
  std::printf("eventfold check, exit %d:\n%s%s", cli.exit_code, cli.err.c_str(), cli.out.c_str());
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.err.find(largest), std::string::npos) << cli.err;
  EXPECT_NE(cli.out.find("\"ok\":false"), std::string::npos) << cli.out;
  // Repair salvages it (listing what was lost, if anything: a left-over
  // compaction output may still hold the damaged block's records) and check
  // is then clean.
  const CliResult repair =
      RunCli(EVENTFOLD_CLI, {"repair", "--data", dir.path()}, tmp.path() + "/r");
  std::printf("eventfold repair, exit %d:\n%s%s", repair.exit_code, repair.out.c_str(),
              repair.err.c_str());
  EXPECT_EQ(repair.exit_code, 0);
  const CliResult again =
      RunCli(EVENTFOLD_CLI, {"check", "--data", dir.path()}, tmp.path() + "/c2");
  EXPECT_EQ(again.exit_code, 0) << again.err << again.out;
}

// The lines of `eventfold repair`'s output that name a loss (the summary,
// a JSON object, left out).
std::set<std::string> LossLines(const std::string& out) {
  std::set<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = out.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = out.substr(start, nl - start);
    if (!line.empty() && line[0] != '{') lines.insert(line);
  }
  return lines;
}

// Runs `eventfold repair --data dir` and SIGKILLs it as soon as it has
// printed `kill_after` loss lines; false when it ended before that.
bool RepairKilledAfter(const std::string& dir, size_t kill_after) {
  const std::string cli = EVENTFOLD_CLI;
  test_util::ForkedChild child = test_util::ForkWithPipe([&](int to_parent) {
    ::dup2(to_parent, STDOUT_FILENO);
    ::execl(cli.c_str(), cli.c_str(), "repair", "--data", dir.c_str(), static_cast<char*>(nullptr));
    std::_Exit(126);
  });
  if (child.pid <= 0) return false;
  std::string out;
  char buf[4096];
  bool reached = false;
  while (!reached) {
    const ssize_t n = ::read(child.from_child, buf, sizeof(buf));
    if (n <= 0) break;  // it ended
    out.append(buf, static_cast<size_t>(n));
    reached = LossLines(out).size() >= kill_after;
  }
  if (reached) ::kill(child.pid, SIGKILL);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  ::close(child.from_child);
  return reached && WIFSIGNALED(status);
}

// A store of a seeded 1,500-receipt history in small tables, with 8 bytes
// flipped at a quarter, half and three quarters of its largest live table.
void MakeDamagedStore(const std::string& dir, uint64_t seed) {
  {
    sim::HistoryOptions ho;
    ho.seed = seed;
    ho.receipts = 1500;
    ho.products = 150;
    Result<std::unique_ptr<Store>> store = Store::Open(dir, SmallTables());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (const Delivery& d : sim::GenerateHistory(ho).deliveries) (void)(*store)->Ingest(d);
  }
  FileCheckSummary files;
  ASSERT_TRUE(Damages(dir, &files).empty());
  uintmax_t largest_size = 0;
  const std::string largest = LargestLiveTable(dir, files.unreferenced, &largest_size);
  ASSERT_FALSE(largest.empty());
  for (uint64_t at : {largest_size / 4, largest_size / 2, largest_size * 3 / 4}) {
    XorBytes(dir + "/" + largest, at, std::string(8, '\x5a'));
  }
}

// The losses `eventfold repair` lists for `dir`, run to its end (its
// output files under `scratch`).
std::set<std::string> UninterruptedLosses(const std::string& dir, const std::string& scratch) {
  const CliResult ref = RunCli(EVENTFOLD_CLI, {"repair", "--data", dir}, scratch);
  EXPECT_EQ(ref.exit_code, 0) << ref.err << ref.out;
  const std::set<std::string> want = LossLines(ref.out);
  EXPECT_GE(want.size(), 3u) << ref.out;
  std::printf("uninterrupted repair: %zu losses listed\n", want.size());
  return want;
}

// A repair killed right after it listed its k-th loss (for k from the
// first to the last) leaves a journal the next repair resumes: that repair
// alone lists exactly the losses an uninterrupted repair of the same
// damage lists, ends clean, and says it took one over; check is then clean.
TEST(RepairCrash, ARepairKilledAfterAnyLossItListedIsResumedWithTheWholeList) {
  ScratchDir base("repair-kill");
  ASSERT_NO_FATAL_FAILURE(MakeDamagedStore(base.path(), test_util::TestSeed("RepairCrash", 17)));
  TempDir tmp;
  const auto copy_of = [&](const std::string& name) {
    const std::string to = tmp.path() + "/" + name;
    fs::copy(base.path(), to, fs::copy_options::recursive);
    return to;
  };
  std::set<std::string> want;
  ASSERT_NO_FATAL_FAILURE(want = UninterruptedLosses(copy_of("ref"), tmp.path() + "/r"));

  size_t killed = 0;
  for (size_t k = 1; k <= want.size(); k += std::max<size_t>(1, want.size() / 6)) {
    SCOPED_TRACE("killed after loss " + std::to_string(k));
    const std::string dir = copy_of("k" + std::to_string(k));
    if (!RepairKilledAfter(dir, k)) continue;  // it finished first
    ++killed;
    const CliResult resumed =
        RunCli(EVENTFOLD_CLI, {"repair", "--data", dir}, tmp.path() + "/k" + std::to_string(k));
    EXPECT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
    EXPECT_EQ(LossLines(resumed.out), want) << resumed.out;
    EXPECT_NE(resumed.out.find("\"resumed\":1"), std::string::npos) << resumed.out;
    const CliResult check =
        RunCli(EVENTFOLD_CLI, {"check", "--data", dir}, tmp.path() + "/c" + std::to_string(k));
    EXPECT_EQ(check.exit_code, 0) << check.err << check.out;
  }
  std::printf("repairs killed and resumed: %zu\n", killed);
  EXPECT_GT(killed, 0u) << "every repair finished before its kill";
}

// Kills its process once a repair's rewritten table (written aside as
// "<table>.salvage") has replaced the damaged one: before LevelDB's
// repairer writes the MANIFEST with the table's new size.
class KillAfterTableRewriteEnv : public leveldb::EnvWrapper {
 public:
  KillAfterTableRewriteEnv() : leveldb::EnvWrapper(leveldb::Env::Default()) {}
  leveldb::Status RenameFile(const std::string& from, const std::string& to) override {
    leveldb::Status s = target()->RenameFile(from, to);
    if (s.ok() && from.ends_with(".salvage")) ::kill(::getpid(), SIGKILL);
    return s;
  }
};

// A repair killed between its rewrite of a damaged table and LevelDB's new
// MANIFEST: the next repair lists exactly what an uninterrupted one lists.
// Before the journal named the rewrite, the table's new size read as a
// table lost whole, and the next repair asked for every event from the
// store's first to now again.
TEST(RepairCrash, ARepairKilledAfterRewritingATableIsResumedWithTheSameList) {
  ScratchDir base("repair-rewrite");
  ASSERT_NO_FATAL_FAILURE(MakeDamagedStore(base.path(), test_util::TestSeed("RepairCrash", 17)));
  TempDir tmp;
  const std::string ref = tmp.path() + "/ref", killed = tmp.path() + "/killed";
  fs::copy(base.path(), ref, fs::copy_options::recursive);
  fs::copy(base.path(), killed, fs::copy_options::recursive);
  std::set<std::string> want;
  ASSERT_NO_FATAL_FAILURE(want = UninterruptedLosses(ref, tmp.path() + "/r"));

  test_util::ForkedChild child = test_util::ForkWithPipe([&](int) {
    KillAfterTableRewriteEnv env;
    Options o;
    o.env = &env;
    (void)RepairStore(killed, o, [](const LostData&) {});
    std::_Exit(0);  // not killed: no table was rewritten
  });
  ASSERT_GT(child.pid, 0);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  ::close(child.from_child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;

  const CliResult resumed = RunCli(EVENTFOLD_CLI, {"repair", "--data", killed}, tmp.path() + "/k");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
  EXPECT_EQ(LossLines(resumed.out), want) << resumed.out;
  EXPECT_NE(resumed.out.find("\"resumed\":1"), std::string::npos) << resumed.out;
  const CliResult check = RunCli(EVENTFOLD_CLI, {"check", "--data", killed}, tmp.path() + "/c");
  EXPECT_EQ(check.exit_code, 0) << check.err << check.out;
}

// `eventfold repair` of a fold worker's partition store (DIR/p<k>,
// docs/CLUSTER.md) that lost events removes the worker's DIR/p<k>.seq, so
// that the worker folds the partition again from the intake stream instead
// of resuming past what was lost; a store of any other name keeps a file so
// named, and the repair says nothing of it.
TEST(RepairCli, APartitionStoreThatLostEventsForgetsItsIntakeSequence) {
  ScratchDir base("repair-partition");
  const uint64_t seed = test_util::TestSeed("RepairCli", 19);
  for (const std::string name : {"p3", "store"}) {
    SCOPED_TRACE(name);
    const std::string dir = base.path() + "/" + name;
    ASSERT_NO_FATAL_FAILURE(MakeDamagedStore(dir, seed));
    test_util::WriteFile(dir + ".seq", "1234 5678\n");
    const CliResult r =
        RunCli(EVENTFOLD_CLI, {"repair", "--data", dir + "/"}, base.path() + "/" + name + "-out");
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("resend "), std::string::npos) << "nothing was listed lost: " << r.out;
    if (name == "p3") {
      EXPECT_FALSE(fs::exists(dir + ".seq")) << "the worker would resume past the lost events";
      EXPECT_NE(r.err.find("removed " + dir + ".seq"), std::string::npos) << r.err;
    } else {
      EXPECT_EQ(test_util::ReadFile(dir + ".seq"), "1234 5678\n");
      EXPECT_EQ(r.err, "");
    }
  }
}

}  // namespace
}  // namespace eventfold::reliability
