// Crash harness: SIGKILL during ingest never loses an acknowledged event.
//
// Each iteration forks a child that opens the store (a real directory under
// the temp dir, default durability Durability::kSync) and ingests a seeded
// stream of ReceiptRoller deliveries (tools/history.h: shuffled, duplicated,
// late, some malformed or conflicting) from 4 threads. After each
// acknowledged delivery (kAccepted or kDuplicate: a 200) it writes
// "<delivery> <outcome> <event_id> <entity> <id>" to a pipe. The parent
// SIGKILLs it 5-80 ms (seeded) after its store is open, then reopens the
// store and checks (tests/reliability/reliability_util.h): every event ever
// acknowledged is stored, once, and in its entity's log; every projection
// equals a from-scratch fold (Verify); the change feed has no gap; and
// every few iterations the full integrity check (Store::Check). The next
// iteration goes on ingesting into the same store: first the deliveries not
// acknowledged yet (the sender's retries), then more of the stream.
//
// EVENTFOLD_CRASH_ITERATIONS: kills (default 100; the `soak` entry 2000).
// EVENTFOLD_CRASH_SEGMENT: kills per store (default 100): a long run starts
// a fresh store and stream that often, so its per-kill checks stay cheap.
// EVENTFOLD_CRASH_CHECK_EVERY: the full Store::Check every n kills (5).
// EVENTFOLD_TEST_SEED replays a run; EVENTFOLD_CRASH_DIR sets the parent
// directory of the store (default: the temp dir, a real disk).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "eventfold/store.h"
#include "tests/common/fork_child.h"
#include "tests/common/test_seed.h"
#include "tests/reliability/reliability_util.h"
#include "tests/storage/storage_test_util.h"
#include "tools/history.h"

namespace eventfold::reliability {
namespace {

using SteadyClock = std::chrono::steady_clock;

double Since(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

class CrashDir {
 public:
  CrashDir() {
    std::filesystem::path base = std::filesystem::temp_directory_path();
    if (const char* env = std::getenv("EVENTFOLD_CRASH_DIR"); env && *env) base = env;
    path_ = (base / ("eventfold-crash-harness-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(path_);
  }
  ~CrashDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::remove_all(path_ + ".verify", ec);
    std::filesystem::remove_all(path_ + ".check", ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The sender's stream: ReceiptRoller histories, one after another (each with
// its own seed, so its own event ids), generated as the harness needs more.
class Stream {
 public:
  explicit Stream(uint64_t seed) : seed_(seed) {}
  const Delivery& at(size_t i) {
    while (i >= deliveries_.size()) Grow();
    return deliveries_[i];
  }
  size_t generated() const { return deliveries_.size(); }

 private:
  void Grow() {
    sim::HistoryOptions ho;
    ho.seed = seed_ + 1000003 * ++histories_;
    ho.receipts = 300;
    ho.products = 60;
    ho.malformed = 4;
    ho.conflicts = 3;
    ho.target_body_bytes = 400;
    sim::History h = sim::GenerateHistory(ho);
    for (Delivery& d : h.deliveries) deliveries_.push_back(std::move(d));
  }
  uint64_t seed_;
  uint64_t histories_ = 0;
  std::deque<Delivery> deliveries_;  // grows without moving what it holds
};

void WriteLine(int fd, const std::string& line) {
  // One write per line (< PIPE_BUF): lines from several threads never mix.
  [[maybe_unused]] ssize_t n = ::write(fd, line.data(), line.size());
}

// The child: ingests `work` (indices into the stream) from 4 threads,
// reporting each acknowledgement; leaves with _exit, never through gtest.
[[noreturn]] void RunChild(const std::string& dir, const std::vector<const Delivery*>& work,
                           const std::vector<size_t>& index, int fd) {
  int code = 0;
  {
    OwnThreadEnv env;
    Options o;  // durability: the default, kSync
    o.env = &env;
    Result<std::unique_ptr<Store>> opened = Store::Open(dir, o);
    if (!opened.ok()) {
      WriteLine(fd, "error open " + opened.status().ToString() + "\n");
      _exit(3);
    }
    Store* store = opened->get();
    WriteLine(fd, "open\n");
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1)) < work.size();) {
        const IngestResult r = store->Ingest(*work[i]);
        if (Acknowledged(r.outcome)) {
          std::string line = "ack " + std::to_string(index[i]) + " " +
                             std::string(OutcomeName(r.outcome)) + " " + r.event_id;
          if (r.entity) line += " " + r.entity->entity + " " + r.entity->id;
          WriteLine(fd, line + "\n");
        } else if (r.outcome != Outcome::kConflict && r.outcome != Outcome::kInvalid) {
          WriteLine(fd, "error ingest " + std::to_string(index[i]) + " " +
                            std::string(OutcomeName(r.outcome)) + " " + r.message + "\n");
          failed = true;
        }
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back(worker);
    for (std::thread& t : threads) t.join();
    code = failed ? 4 : 0;
  }
  WriteLine(fd, "done\n");
  _exit(code);
}

struct ChildRun {
  bool killed = false;
  int exit_code = -1;
  bool opened = false;
  std::vector<std::string> lines;
};

// Forks the child; SIGKILLs it `kill_after` after it reports its store open.
ChildRun RunAndKill(const std::string& dir, const std::vector<const Delivery*>& work,
                    const std::vector<size_t>& index, std::chrono::microseconds kill_after) {
  ChildRun run;
  const test_util::ForkedChild child =
      test_util::ForkWithPipe([&](int to_parent) { RunChild(dir, work, index, to_parent); });
  if (child.pid < 0) return run;
  const pid_t pid = child.pid;
  const int from_child = child.from_child;
  std::string buffer;
  auto take_lines = [&] {
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
      run.lines.push_back(buffer.substr(0, nl));
      if (run.lines.back() == "open") run.opened = true;
      buffer.erase(0, nl + 1);
    }
  };
  const auto start = SteadyClock::now();
  std::optional<SteadyClock::time_point> deadline;
  bool eof = false;
  while (!eof) {
    if (!deadline && run.opened) deadline = SteadyClock::now() + kill_after;
    int timeout_ms = 100;
    if (deadline) {
      const auto left =
          std::chrono::duration_cast<std::chrono::microseconds>(*deadline - SteadyClock::now());
      if (left.count() <= 0) break;
      timeout_ms = static_cast<int>((left.count() + 999) / 1000);
    }
    pollfd p{from_child, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) > 0) {
      char buf[8192];
      const ssize_t n = ::read(from_child, buf, sizeof(buf));
      if (n <= 0) {
        eof = true;  // the child ended by itself
      } else {
        buffer.append(buf, static_cast<size_t>(n));
        take_lines();
      }
    }
    if (Since(start) > 120) {
      ADD_FAILURE() << "the child hung";
      break;
    }
  }
  ::kill(pid, SIGKILL);  // harmless when it already ended
  int status = 0;
  ::waitpid(pid, &status, 0);
  // What it wrote before dying is still in the pipe.
  char buf[8192];
  for (ssize_t n; (n = ::read(from_child, buf, sizeof(buf))) > 0;)
    buffer.append(buf, static_cast<size_t>(n));
  take_lines();
  ::close(from_child);
  run.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

TEST(CrashHarness, SigkillDuringIngestLosesNothingAcknowledged) {
  const uint64_t seed =
      storage_test::TestSeed("CrashHarness.SigkillDuringIngestLosesNothingAcknowledged", 7001);
  const int iterations = static_cast<int>(test_util::EnvCount("EVENTFOLD_CRASH_ITERATIONS", 100));
  // The full integrity check (Store::Check: every record, a second rebuild
  // aside) every few iterations; the other checks after every kill.
  const int check_every = static_cast<int>(test_util::EnvCount("EVENTFOLD_CRASH_CHECK_EVERY", 5));
  // A fresh store (and stream) every `segment` iterations, so that a long
  // run's per-kill checks stay as cheap as the first hundred's.
  const int segment = static_cast<int>(test_util::EnvCount("EVENTFOLD_CRASH_SEGMENT", 100));
  std::printf("%d iterations, a fresh store every %d\n", iterations, segment);
  std::optional<CrashDir> dir;
  std::mt19937_64 rng(seed);
  std::optional<Stream> stream;
  std::vector<bool> acked_delivery;  // by stream index
  size_t cursor = 0;                 // first stream index not yet acknowledged
  Acked acked;
  int killed = 0, completed = 0;
  size_t acks = 0, stored = 0, acked_events = 0, stored_events = 0;
  double child_seconds = 0, check_seconds = 0;
  double phase[7] = {};  // open, logs, verify, feed, check, close, raw scan
  const auto start = SteadyClock::now();

  for (int iter = 0; iter < iterations; ++iter) {
    if (iter % segment == 0) {
      acked_events += acked.size();
      stored_events += stored;
      dir.reset();
      dir.emplace();
      stream.emplace(seed + static_cast<uint64_t>(iter));
      acked_delivery.clear();
      cursor = 0;
      acked.clear();
      stored = 0;
      std::printf("iteration %d: a fresh store at %s\n", iter, dir->path().c_str());
    }
    // The work: every delivery from the cursor on not acknowledged yet (the
    // sender's retries), up to a window a child cannot finish in 80 ms.
    std::vector<const Delivery*> work;
    std::vector<size_t> index;
    for (size_t i = cursor; work.size() < 600; ++i) {
      stream->at(i);
      if (i >= acked_delivery.size()) acked_delivery.resize(i + 1, false);
      if (!acked_delivery[i]) {
        work.push_back(&stream->at(i));
        index.push_back(i);
      }
    }
    const auto kill_after =
        std::chrono::microseconds(std::uniform_int_distribution<int64_t>(5000, 80000)(rng));
    const auto child_start = SteadyClock::now();
    const ChildRun run = RunAndKill(dir->path(), work, index, kill_after);
    child_seconds += Since(child_start);
    ASSERT_TRUE(run.opened) << "iteration " << iter << ": the child never opened the store: "
                            << (run.lines.empty() ? "" : run.lines.front());
    (run.killed ? killed : completed) += 1;
    if (!run.killed) {
      EXPECT_EQ(run.exit_code, 0) << "iteration " << iter;
    }

    std::set<EntityRef> touched;
    for (const std::string& line : run.lines) {
      std::istringstream in(line);
      std::string word;
      in >> word;
      if (word == "open" || word == "done") continue;
      ASSERT_EQ(word, "ack") << "iteration " << iter << ": " << line;
      size_t i = 0;
      std::string outcome, event_id, entity, id;
      in >> i >> outcome >> event_id >> entity >> id;
      ASSERT_LT(i, acked_delivery.size());
      acked_delivery[i] = true;
      ++acks;
      std::optional<EntityRef> ref;
      if (!entity.empty()) ref = EntityRef{entity, id};
      auto [it, added] = acked.try_emplace(event_id, ref);
      EXPECT_EQ(it->second, ref) << event_id << " acknowledged under two entities";
      if (ref) touched.insert(*ref);
    }
    while (cursor < acked_delivery.size() && acked_delivery[cursor]) ++cursor;

    // After the kill: reopen and check everything the contract promises.
    const auto check_start = SteadyClock::now();
    const bool full = (iter + 1) % check_every == 0 || iter + 1 == iterations;
    {
      auto t = SteadyClock::now();
      Result<std::unique_ptr<Store>> store = Store::Open(dir->path(), Options());
      ASSERT_TRUE(store.ok()) << "iteration " << iter << ": " << store.status().ToString();
      phase[0] += Since(t), t = SteadyClock::now();
      ExpectInLogs(store->get(), acked, full ? nullptr : &touched);
      phase[1] += Since(t), t = SteadyClock::now();
      ExpectVerifyClean(store->get());
      phase[2] += Since(t), t = SteadyClock::now();
      ExpectFeedWithoutGap(store->get());
      phase[3] += Since(t), t = SteadyClock::now();
      if (full) ExpectCheckClean(store->get());
      phase[4] += Since(t), t = SteadyClock::now();
      store->reset();
      phase[5] += Since(t), t = SteadyClock::now();
      stored = ExpectStoredOnce(dir->path(), acked);
      phase[6] += Since(t);
    }
    check_seconds += Since(check_start);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "iteration " << iter << " (seed " << seed << ", killed after "
                    << kill_after.count() << " us) failed";
      return;
    }
    if ((iter + 1) % 100 == 0) {
      std::printf("  %d iterations: %zu acks, %zu events in this store, %.1f s\n", iter + 1, acks,
                  stored, Since(start));
      std::fflush(stdout);
    }
  }
  acked_events += acked.size();
  stored_events += stored;
  std::printf(
      "CrashHarness: %d iterations survived (%d killed mid-ingest, %d finished first); "
      "%zu acknowledgements, %zu distinct acknowledged events, %zu events stored; "
      "children %.1f s, checks %.1f s, %.1f s in all\n",
      iterations, killed, completed, acks, acked_events, stored_events, child_seconds,
      check_seconds, Since(start));
  std::printf(
      "  check phases: open %.1f s, logs %.1f s, verify %.1f s, feed %.1f s, full check "
      "%.1f s, close %.1f s, raw scan %.1f s\n",
      phase[0], phase[1], phase[2], phase[3], phase[4], phase[5], phase[6]);
  EXPECT_GT(killed, iterations / 2) << "too few kills landed mid-ingest";
  EXPECT_GT(acked_events, static_cast<size_t>(iterations)) << "too little was ingested";
}

}  // namespace
}  // namespace eventfold::reliability
