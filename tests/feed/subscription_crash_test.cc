// At-least-once under crashes: a child process runs a Subscription over a
// store on a real directory while a thread of it keeps ingesting new
// changes; its handler appends each change it handles to a file (write, no
// fsync: a SIGKILL does not lose what write() took) and fails now and then.
// The parent SIGKILLs the child at seeded random moments, restarts it, and
// after every kill checks that the saved checkpoint is no higher than the
// highest seq below which every change was handled. At the end every change
// was handled at least once, none was skipped, the checkpoint is the last
// seq, and within each run the changes of an entity were handled in seq
// order.
//
// EVENTFOLD_CRASH_ITERATIONS sets the kills (default 20); EVENTFOLD_TEST_SEED
// replays a run.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <leveldb/env.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "eventfold/store.h"
#include "eventfold/subscription.h"
#include "tests/common/fork_child.h"
#include "tests/common/own_thread_env.h"
#include "tests/feed/feed_test_util.h"

namespace eventfold::feed_test {
namespace {

using storage_test::ScratchDir;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kName = "crash";
constexpr int kProducts = 40;

int Iterations() {
  const char* env = std::getenv("EVENTFOLD_CRASH_ITERATIONS");
  const int n = env && *env ? std::atoi(env) : 20;
  return n > 0 ? n : 20;
}

using test_util::OwnThreadEnv;

// The child: runs the subscription until it has caught up, then exits 0.
// Nothing here touches gtest; it leaves with _exit.
// Ingests `batches` batches of one change per product; versions (and so
// event ids) are unique per run and batch, and grow with both. After the
// first batch, writes one byte to `started_fd` (when >= 0).
Status IngestBatches(Store* store, int run, int batches, int started_fd = -1) {
  for (int b = 0; b < batches; ++b) {
    std::vector<Delivery> batch;
    const int64_t version = static_cast<int64_t>(run) * 1000 + b + 1;
    for (int p = 0; p < kProducts; ++p) {
      const std::string pid = "p" + std::to_string(p);
      batch.push_back(Delivery{
          {}, InventoryUpdate("evt_" + pid + "_" + std::to_string(version), pid, version)});
    }
    for (const IngestResult& r : store->IngestBatch(batch)) {
      if (r.outcome != Outcome::kAccepted) return Status::IOError("ingest: " + r.message);
    }
    if (b == 0 && started_fd >= 0) {
      const char one = 1;
      if (::write(started_fd, &one, 1) != 1) return Status::IOError("started pipe");
    }
  }
  return Status::OK();
}

[[noreturn]] void RunChild(const std::string& dir, const std::string& handled_path, int run,
                           uint64_t seed, int batches, int started_fd) {
  OwnThreadEnv env;
  Options o;
  o.env = &env;
  o.create_if_missing = false;
  o.durability = Durability::kBuffered;
  Result<std::unique_ptr<Store>> store = Store::Open(dir, o);
  if (!store.ok()) _exit(3);
  const int fd = ::open(handled_path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) _exit(5);
  std::mutex mu;
  std::mt19937_64 rng(seed);
  ChangeHandler handler = [&](const Change& c) {
    // A little work, so kills land mid-flight.
    const auto until = SteadyClock::now() + std::chrono::microseconds(30);
    while (SteadyClock::now() < until) {
    }
    {
      std::lock_guard lock(mu);
      if (rng() % 100 < 15) return Status::Unavailable("flaky");
    }
    const std::string line = std::to_string(run) + " " + std::to_string(c.seq) + "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return Status::IOError("write failed");
    }
    return Status::OK();
  };
  SubscriptionOptions so;
  so.name = kName;
  so.threads = 2;
  so.max_attempts = 1000;  // transient failures only: nothing parks
  so.initial_backoff_micros = 1000;
  so.max_backoff_micros = 20000;
  so.seed = seed;
  so.max_in_flight = 64;  // the checkpoint moves in many small steps
  Result<std::unique_ptr<Subscription>> sub = Subscription::Start(store->get(), so, handler);
  if (!sub.ok()) _exit(4);
  // New changes arrive while it delivers, so kills also land mid-ingest.
  if (!IngestBatches(store->get(), run, batches, started_fd).ok()) _exit(7);
  const bool caught_up = (*sub)->WaitForCheckpoint((*store)->feed().LastSeq(), 60'000'000);
  (*sub)->Stop();
  _exit(caught_up ? 0 : 6);
}

struct ChildRun {
  bool killed = false;
  int exit_code = -1;
};

ChildRun RunAndMaybeKill(const std::string& dir, const std::string& handled_path, int run,
                         uint64_t seed, int batches, double kill_after) {
  ChildRun result;
  const auto start = SteadyClock::now();
  // The child reports what it handled through the handled file, and through
  // the pipe that its first batch is stored: the kill delay counts from
  // there, not from the fork, so on a slow machine (or under a sanitizer)
  // the kills still land mid-ingest and mid-delivery, never all before the
  // child got going.
  const test_util::ForkedChild child = test_util::ForkWithPipe(
      [&](int started_fd) { RunChild(dir, handled_path, run, seed, batches, started_fd); });
  if (child.pid < 0) return result;
  const pid_t pid = child.pid;
  std::optional<SteadyClock::time_point> deadline;
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    const auto now = SteadyClock::now();
    if (!deadline) {
      pollfd started{child.from_child, POLLIN, 0};
      if (::poll(&started, 1, 0) == 1 && (started.revents & POLLIN)) {
        deadline = now + std::chrono::duration_cast<SteadyClock::duration>(
                             std::chrono::duration<double>(kill_after));
      }
    }
    if ((kill_after >= 0 && deadline && now >= *deadline) ||
        now - start > std::chrono::seconds(120)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ::close(child.from_child);
      result.killed = true;
      return result;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  ::close(child.from_child);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

// (run, seq) lines of the handled file; a torn last line is ignored.
std::vector<std::pair<int, uint64_t>> ReadHandled(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::pair<int, uint64_t>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    int run = 0;
    uint64_t seq = 0;
    if (ss >> run >> seq) out.emplace_back(run, seq);
  }
  return out;
}

uint64_t ContiguousPrefix(const std::set<uint64_t>& done) {
  uint64_t h = 0;
  while (done.contains(h + 1)) ++h;
  return h;
}

// The first changes, before any child runs.
void Fill(const std::string& dir, int batches) {
  Options o;
  o.durability = Durability::kBuffered;
  Result<std::unique_ptr<Store>> store = Store::Open(dir, o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(IngestBatches(store->get(), 0, batches).ok());
}

TEST(SubscriptionCrashTest, EveryChangeIsHandledAtLeastOnceAndNoneIsSkipped) {
  const uint64_t seed = TestSeed("EveryChangeIsHandledAtLeastOnceAndNoneIsSkipped", 20261129);
  std::mt19937_64 rng(seed);
  ScratchDir dir;
  const std::string handled_path = dir.path() + ".handled";
  Fill(dir.path(), 20);  // 800 changes

  const int iterations = Iterations();
  int killed = 0;
  for (int it = 1; it <= iterations; ++it) {
    const double kill_after = std::uniform_real_distribution<double>(0, 0.15)(rng);
    ChildRun run = RunAndMaybeKill(dir.path(), handled_path, it, seed + it, 20, kill_after);
    if (run.killed) {
      ++killed;
    } else {
      ASSERT_EQ(run.exit_code, 0) << "iteration " << it;
    }
    // The saved checkpoint never passes a change that was not handled.
    std::set<uint64_t> done;
    for (const auto& [r, s] : ReadHandled(handled_path)) done.insert(s);
    Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), Options());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Result<uint64_t> cp = (*store)->feed().GetCheckpoint(kName);
    ASSERT_TRUE(cp.ok());
    ASSERT_LE(*cp, ContiguousPrefix(done))
        << "iteration " << it << " killed after " << kill_after << " s";
  }
  std::printf("killed %d of %d runs\n", killed, iterations);

  // A last run without a kill catches up.
  ChildRun last_run =
      RunAndMaybeKill(dir.path(), handled_path, iterations + 1, seed + iterations + 1, 1, -1);
  ASSERT_FALSE(last_run.killed);
  ASSERT_EQ(last_run.exit_code, 0);

  Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), Options());
  ASSERT_TRUE(store.ok());
  const uint64_t last = (*store)->feed().LastSeq();
  // Whole batches only: a batch is one atomic write, killed or not.
  EXPECT_EQ(last % kProducts, 0u);
  EXPECT_GT(last, static_cast<uint64_t>(kProducts) * 21);
  EXPECT_EQ(*(*store)->feed().GetCheckpoint(kName), last);
  EXPECT_TRUE(Parked(store->get(), kName).empty());
  std::map<uint64_t, std::string> entity_of;
  for (const Change& c : ReadAll(store->get())) entity_of[c.seq] = c.id;

  const auto handled = ReadHandled(handled_path);
  std::set<uint64_t> done;
  std::map<std::pair<int, std::string>, uint64_t> last_in_run;  // (run, entity) -> seq
  for (const auto& [run, seq] : handled) {
    done.insert(seq);
    uint64_t& prev = last_in_run[{run, entity_of[seq]}];
    EXPECT_GT(seq, prev) << "run " << run << ": " << entity_of[seq] << " out of order";
    prev = seq;
  }
  EXPECT_EQ(done.size(), last);
  EXPECT_EQ(ContiguousPrefix(done), last);
  std::printf("%zu deliveries of %llu changes\n", handled.size(),
              static_cast<unsigned long long>(last));
  std::remove(handled_path.c_str());
}

}  // namespace
}  // namespace eventfold::feed_test
