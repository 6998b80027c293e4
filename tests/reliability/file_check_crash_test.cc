// Issue 13's outside test of `eventfold check`: a store SIGKILLed mid-ingest
// six times, then 8 bytes flipped at a quarter of its largest table — check
// exits 1 naming that table (it said {"ok":true} when its own open had
// compacted the damage away). Forks its children, so it has its own binary:
// a child of a process whose LevelDB background thread already ran would
// have none.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
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
  std::string largest;
  uintmax_t largest_size = 0;
  for (const std::string& t : FilesEndingIn(dir.path(), ".ldb")) {
    if (std::find(s.unreferenced.begin(), s.unreferenced.end(), t) != s.unreferenced.end()) {
      continue;  // a compaction's left-over, not the store's data
    }
    const uintmax_t size = fs::file_size(dir.path() + "/" + t);
    if (size > largest_size) largest = t, largest_size = size;
  }
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

}  // namespace
}  // namespace eventfold::reliability
