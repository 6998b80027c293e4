// Under a limit on threads, every thread the store cannot start is a clear
// refusal, never a crash or a hang: Store::Open fails with kUnavailable
// naming the thread it could not start and leaves the directory free (an
// open once the limit is lifted sees everything stored), a store that
// opened serves ingests and rebuilds on fewer threads, a repair or a
// restore refused changes nothing, the HTTP server either does not start
// or answers every delivery, a subscription either is refused whole or
// delivers every change, `eventfold serve` either exits naming the thread
// or answers on both its listeners, `eventfold ingest` either is refused
// whole or stores every line, and every other command that ends by itself
// either is refused whole or runs whole.
//
// Each case is a child process under a user id of its own (the limit,
// RLIMIT_NPROC, counts every thread of the real user, and root is exempt)
// that fills its store, closes it, and lowers its limit to its own thread
// count plus a headroom of 0, 1, 2, ... The LevelDB background work is
// among the threads the store asks for (storage/background_env.h): on
// LevelDB's own lazy thread, a refusal at the first compaction hung the
// store for good. Forks, so its own binary. Skipped (with the reason) when
// not run as root.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eventfold/backup.h"
#include "eventfold/http_server.h"
#include "eventfold/maintenance.h"
#include "eventfold/receiver.h"
#include "eventfold/repair.h"
#include "eventfold/store.h"
#include "eventfold/subscription.h"
#include "tests/common/raw_http_client.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/serve_process.h"
#include "tests/common/test_seed.h"
#include "tools/history.h"

namespace eventfold::reliability {
namespace {

using test_util::ScratchDir;

constexpr int kExitSkip = 77;
constexpr int kMaxHeadroom = 8;

int ThreadsOfThisProcess() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// The names in `dir`, sorted.
std::vector<std::string> DirNames(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

constexpr rlim_t kHardThreadLimit = 4096;

// Sets the soft limit on this user's threads. The hard one stays at
// kHardThreadLimit: up to it anyone may raise the soft limit again.
bool SetThreadLimit(rlim_t n) {
  rlimit r{n, kHardThreadLimit};
  return ::setrlimit(RLIMIT_NPROC, &r) == 0;
}

// Raises the soft limit back to the hard one.
bool LiftThreadLimit() { return SetThreadLimit(kHardThreadLimit); }

// What one child found, as one line to the parent.
std::string Case(const std::string& dir, const std::vector<Delivery>& deliveries, int headroom) {
  Options o;
  o.gc_interval_micros = 60'000'000;    // the gc thread too
  std::vector<const Delivery*> stored;  // accepted, or a duplicate of one
  {
    Result<std::unique_ptr<Store>> s = Store::Open(dir, o);
    if (!s.ok()) return "FAIL first open: " + s.status().ToString();
    for (const Delivery& d : deliveries) {
      const Outcome outcome = (*s)->Ingest(d).outcome;
      if (outcome == Outcome::kAccepted || outcome == Outcome::kDuplicate) stored.push_back(&d);
    }
  }
  const int base = ThreadsOfThisProcess();
  if (!SetThreadLimit(base + headroom)) return "FAIL setrlimit: " + std::string(strerror(errno));
  Result<std::unique_ptr<Store>> s = Store::Open(dir, o);
  if (!s.ok()) {
    const std::string refusal = s.status().ToString();
    if (!s.status().IsUnavailable() || refusal.find("cannot start") == std::string::npos) {
      return "FAIL open refused without naming a thread: " + refusal;
    }
    if (ThreadsOfThisProcess() != base) {
      return "FAIL a refused open left " + std::to_string(ThreadsOfThisProcess() - base) +
             " threads running";
    }
    // The directory is free and nothing is lost.
    if (!LiftThreadLimit()) return "FAIL raising the limit";
    Result<std::unique_ptr<Store>> again = Store::Open(dir, o);
    if (!again.ok()) return "FAIL reopen after the refusal: " + again.status().ToString();
    uint64_t duplicates = 0;
    for (const Delivery* d : stored) {
      duplicates += (*again)->Ingest(*d).outcome == Outcome::kDuplicate;
    }
    if (duplicates != stored.size()) {
      return "FAIL after the refusal only " + std::to_string(duplicates) + " of the " +
             std::to_string(stored.size()) + " stored deliveries were duplicates";
    }
    return "refused: " + refusal;
  }
  // Open: ingest and a two-thread rebuild on whatever threads are left.
  if ((*s)->Ingest(*stored.back()).outcome != Outcome::kDuplicate) return "FAIL ingest after open";
  RebuildOptions ro;
  ro.threads = 2;
  Result<RebuildSummary> rebuilt = (*s)->maintenance().Rebuild(ro);
  if (!rebuilt.ok()) return "FAIL rebuild: " + rebuilt.status().ToString();
  Result<VerifySummary> verified = (*s)->maintenance().Verify([](const auto&, const auto&) {});
  if (!verified.ok() || verified->differences != 0) return "FAIL verify after the rebuild";
  return "opened: " + std::to_string(rebuilt->events) + " events rebuilt with " +
         std::to_string(ThreadsOfThisProcess() - base) + " of " + std::to_string(headroom) +
         " threads to spare in use";
}

// Runs `fn` in a child process under a user id of its own (in a scratch
// directory it may write) and returns its line; *skip when the child could
// not change user. A child that dies of a signal (a crash, or the alarm
// that ends a hang) fails the test.
std::string InChild(const std::function<std::string(const std::string& scratch)>& fn, bool* skip) {
  ScratchDir scratch("thread-limit");
  EXPECT_EQ(::mkdir(scratch.path().c_str(), 0777), 0);
  EXPECT_EQ(::chmod(scratch.path().c_str(), 0777), 0);  // past the umask
  int fds[2];
  // Close-on-exec: a command the child runs must not hold the parent's
  // read open.
  if (::pipe2(fds, O_CLOEXEC) != 0) return "FAIL pipe";
  // Nothing buffered for the child to print again (a sanitizer's exit
  // flushes stdio even through _exit).
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return "FAIL fork";
  if (pid == 0) {
    ::close(fds[0]);
    // A user id no other process has: the limit counts only this child.
    const uid_t uid = 200000 + static_cast<uid_t>(::getpid() % 100000);
    std::string line;
    int code = 0;
    if (::setgid(uid) != 0 || ::setuid(uid) != 0) {
      line = "cannot change user: " + std::string(strerror(errno));
      code = kExitSkip;
    } else {
      ::alarm(120);  // a hang ends as SIGALRM, which fails the case
      line = fn(scratch.path());
      code = line.starts_with("FAIL") ? 1 : 0;
    }
    (void)!::write(fds[1], line.data(), line.size());
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string line;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) line.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status)) {
    ADD_FAILURE() << "the child died of signal " << WTERMSIG(status) << " (" << line << ")";
    return "FAIL signal";
  }
  *skip = WEXITSTATUS(status) == kExitSkip;
  if (!*skip) {
    EXPECT_EQ(WEXITSTATUS(status), 0) << line;
  }
  return line;
}

// Runs `fn(scratch, headroom)` in a child (InChild) for each of `headrooms`
// and prints its line. Counts the lines that say "refused" and
// those that start with `ok`; `skipped` is the line of a child that could
// not change user (the sweep stops there).
struct Sweep {
  int refused = 0;
  int ok = 0;
  std::string skipped;
};
Sweep SweepHeadroom(const std::vector<int>& headrooms, const std::string& ok,
                    const std::function<std::string(const std::string&, int)>& fn) {
  Sweep sweep;
  for (const int headroom : headrooms) {
    bool skip = false;
    const std::string line =
        InChild([&](const std::string& scratch) { return fn(scratch, headroom); }, &skip);
    if (skip) {
      sweep.skipped = line;
      return sweep;
    }
    std::printf("headroom %d: %s\n", headroom, line.c_str());
    sweep.refused += line.starts_with("refused");
    sweep.ok += line.starts_with(ok);
  }
  return sweep;
}

// For a child that runs commands under the limit. LeakSanitizer checks at
// exit on a thread of its own, which the limit may refuse, and a sanitizer
// build then aborts however clean the command was: the commands do without
// that check here (the other end-to-end tests keep it).
void WithoutLeakCheckAtExit() {
  const char* options = std::getenv("ASAN_OPTIONS");
  ::setenv("ASAN_OPTIONS", (std::string(options ? options : "") + ":detect_leaks=0").c_str(), 1);
}

// Runs `eventfold args...` through RunCli with `headroom` threads to spare
// beyond this process's own, RunCli's `timeout` and the command's main
// thread, then lifts the limit; nullopt when the limit could not be set or
// lifted.
std::optional<test_util::CliResult> RunCliWithHeadroom(int headroom,
                                                       const std::vector<std::string>& args,
                                                       const std::string& scratch_prefix) {
  if (!SetThreadLimit(ThreadsOfThisProcess() + 2 + headroom)) return std::nullopt;
  test_util::CliResult r = test_util::RunCli(EVENTFOLD_CLI, args, scratch_prefix);
  if (!LiftThreadLimit()) return std::nullopt;
  return r;
}

// 0, 1, ..., max.
std::vector<int> UpTo(int max) {
  std::vector<int> all;
  for (int n = 0; n <= max; ++n) all.push_back(n);
  return all;
}

std::vector<Delivery> History() {
  sim::HistoryOptions ho;
  ho.seed = test_util::TestSeed("ThreadLimit", 8080);
  ho.receipts = 30;
  ho.products = 8;
  return sim::GenerateHistory(ho).deliveries;
}

TEST(ThreadLimit, EveryThreadTheStoreCannotStartIsAClearRefusal) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: to run each case under a user id of its own";
  const std::vector<Delivery> deliveries = History();
  const Sweep sweep =
      SweepHeadroom(UpTo(kMaxHeadroom), "opened", [&](const std::string& scratch, int headroom) {
        return Case(scratch + "/store", deliveries, headroom);
      });
  if (!sweep.skipped.empty()) GTEST_SKIP() << sweep.skipped;
  EXPECT_GT(sweep.refused, 0) << "no limit was tight enough to refuse a thread";
  EXPECT_GT(sweep.ok, 0) << "no limit let the store open";
}

// Repair and restore open databases of their own: without a thread to
// spare, each is refused before it changes anything.
TEST(ThreadLimit, ARepairOrARestoreWithoutAThreadChangesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: to run each case under a user id of its own";
  const std::vector<Delivery> deliveries = History();
  bool skip = false;
  const std::string line = InChild(
      [&](const std::string& scratch) -> std::string {
        const std::string dir = scratch + "/store", backup = scratch + "/backup";
        const std::string restored = scratch + "/restored";
        {
          Result<std::unique_ptr<Store>> s = Store::Open(dir, Options());
          if (!s.ok()) return "FAIL open: " + s.status().ToString();
          for (const Delivery& d : deliveries) (void)(*s)->Ingest(d);
          Result<BackupSummary> b = (*s)->maintenance().Backup(backup);
          if (!b.ok()) return "FAIL backup: " + b.status().ToString();
        }
        const std::vector<std::string> before = DirNames(dir);
        if (!SetThreadLimit(ThreadsOfThisProcess())) return "FAIL setrlimit";
        Result<RepairSummary> r = RepairStore(dir, Options(), [](const LostData&) {});
        Result<BackupSummary> t = RestoreStore(backup, restored, Options());
        if (!LiftThreadLimit()) return "FAIL raising the limit";
        if (r.ok() || !r.status().IsUnavailable()) {
          return "FAIL repair: " + (r.ok() ? std::string("ran") : r.status().ToString());
        }
        if (t.ok() || !t.status().IsUnavailable()) {
          return "FAIL restore: " + (t.ok() ? std::string("ran") : t.status().ToString());
        }
        // Not even a journal: the thread is asked for first.
        if (DirNames(dir) != before) return "FAIL the repair changed the store's files";
        if (::access(restored.c_str(), F_OK) == 0) return "FAIL the restore left " + restored;
        return "refused: " + r.status().ToString() + "; " + t.status().ToString();
      },
      &skip);
  if (skip) GTEST_SKIP() << line;
  std::printf("%s\n", line.c_str());
  EXPECT_TRUE(line.starts_with("refused")) << line;
}

// The webhook listener under a thread limit: Start is refused naming the
// thread it could not start, with nothing left running; once it has its
// threads, a delivery is answered (200, or 503 when the receiver's store
// batcher is the thread refused), never left hanging.
TEST(ThreadLimit, TheHttpServerIsRefusedWholeOrAnswersEveryDelivery) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: to run each case under a user id of its own";
  const std::vector<Delivery> deliveries = History();
  const Sweep sweep = SweepHeadroom(
      UpTo(6), "answered", [&](const std::string& scratch, int headroom) -> std::string {
        Result<std::unique_ptr<Store>> s = Store::Open(scratch + "/store", Options());
        if (!s.ok()) return "FAIL open: " + s.status().ToString();
        ReceiverOptions ro;
        ro.allow_unsigned = true;
        Result<std::unique_ptr<Receiver>> rx = Receiver::Make(s->get(), ro);
        if (!rx.ok()) return "FAIL receiver: " + rx.status().ToString();
        HttpServerOptions ho;
        ho.io_threads = 2;
        ho.workers = 2;
        const int base = ThreadsOfThisProcess();
        if (!SetThreadLimit(base + headroom)) return "FAIL setrlimit";
        HttpServer server(rx->get(), ho);
        const Status st = server.Start();
        if (!st.ok()) {
          if (!st.IsUnavailable() || st.ToString().find("cannot start") == std::string::npos) {
            return "FAIL start refused without naming a thread: " + st.ToString();
          }
          if (ThreadsOfThisProcess() != base) return "FAIL a refused start left threads";
          return "refused: " + st.ToString();
        }
        const std::string& body = deliveries.front().body;
        test_util::RawClient c(server.port());
        c.Send(
            "POST /hooks HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            "Content-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body);
        const std::vector<int> statuses = c.ReadAnswers(1);
        server.Stop();
        if (statuses.size() != 1 || (statuses[0] != 200 && statuses[0] != 503)) {
          return "FAIL the delivery got " +
                 (statuses.empty() ? std::string("no answer") : std::to_string(statuses[0]));
        }
        return "answered " + std::to_string(statuses[0]);
      });
  if (!sweep.skipped.empty()) GTEST_SKIP() << sweep.skipped;
  EXPECT_GT(sweep.refused, 0) << "no limit was tight enough to refuse a thread";
  EXPECT_GT(sweep.ok, 0) << "no limit let the server start";
}

// A subscription of 4 workers under a thread limit: Start is refused,
// naming the thread, with none of its threads left running and its name
// free for the next Start; or it delivers every change and saves its
// checkpoint past the last.
TEST(ThreadLimit, ASubscriptionIsRefusedWholeOrDeliversEveryChange) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: to run each case under a user id of its own";
  const std::vector<Delivery> deliveries = History();
  const Sweep sweep =
      SweepHeadroom(UpTo(6), "delivered", [&](const std::string& scratch, int headroom) {
        Result<std::unique_ptr<Store>> s = Store::Open(scratch + "/store", Options());
        if (!s.ok()) return "FAIL open: " + s.status().ToString();
        for (const Delivery& d : deliveries) (void)(*s)->Ingest(d);
        const uint64_t last = (*s)->feed().LastSeq();
        if (last == 0) return std::string("FAIL no change in the feed");
        std::atomic<uint64_t> handled{0};
        const auto handler = [&handled](const Change&) {
          handled.fetch_add(1);
          return Status::OK();
        };
        SubscriptionOptions so;
        so.name = "audit";
        so.threads = 4;
        const int base = ThreadsOfThisProcess();
        if (!SetThreadLimit(base + headroom)) return std::string("FAIL setrlimit");
        Result<std::unique_ptr<Subscription>> sub = Subscription::Start(s->get(), so, handler);
        std::string line;
        if (!sub.ok()) {
          const std::string refusal = sub.status().ToString();
          if (!sub.status().IsUnavailable() || refusal.find("cannot start") == std::string::npos) {
            return "FAIL start refused without naming a thread: " + refusal;
          }
          if (ThreadsOfThisProcess() != base)
            return std::string("FAIL a refused start left threads");
          if (!LiftThreadLimit()) return std::string("FAIL raising the limit");
          sub = Subscription::Start(s->get(), so, handler);
          if (!sub.ok()) return "FAIL the start after the refusal: " + sub.status().ToString();
          line = "refused: " + refusal;
        }
        if (!(*sub)->WaitForCheckpoint(last, 60'000'000)) {
          return "FAIL checkpoint " + std::to_string((*sub)->Stats().checkpoint) + " of " +
                 std::to_string(last);
        }
        (*sub)->Stop();
        if (handled.load() < last) {
          return "FAIL " + std::to_string(handled.load()) + " of " + std::to_string(last) +
                 " changes delivered";
        }
        return line.empty() ? "delivered " + std::to_string(last) + " changes" : line;
      });
  if (!sweep.skipped.empty()) GTEST_SKIP() << sweep.skipped;
  EXPECT_GT(sweep.refused, 0) << "no limit was tight enough to refuse a thread";
  EXPECT_GT(sweep.ok, 0) << "no limit let the subscription start";
}

// `eventfold ingest` under a thread limit: the store's threads and the
// command's own (the read-ahead, and each batch's sync behind the next).
// Either the store's open is refused, naming the thread (exit 2), and a run
// without the limit then stores every line; or every line is stored
// (exit 0), a thread the command could not start doing its work inline.
// Never a crash: a std::thread the system refused used to throw, and
// terminate the command.
TEST(ThreadLimit, TheIngestCommandStoresEveryLineOrIsRefusedWhole) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: to run each case under a user id of its own";
  constexpr int kLines = 2500;  // three batches: read-ahead and syncs overlap
  std::string ndjson;
  for (int i = 0; i < kLines; ++i) {
    const std::string n = std::to_string(i);
    ndjson += R"({"event_id":"evt_)" + n +
              R"(","type":"receipt.issued","occurred_at":"2026-11-29T10:00:00Z",)" +
              R"("data":{"receipt_id":"rcp_)" + n + "\"}}\n";
  }
  const std::string all_new = "{\"accepted\":" + std::to_string(kLines) + ",\"duplicate\":0,";
  const Sweep sweep = SweepHeadroom(
      UpTo(10), "stored", [&](const std::string& scratch, int headroom) -> std::string {
        const std::string file = scratch + "/lines.ndjson", dir = scratch + "/store";
        test_util::WriteFile(file, ndjson);
        WithoutLeakCheckAtExit();
        const std::optional<test_util::CliResult> limited =
            RunCliWithHeadroom(headroom, {"ingest", "--data", dir, file}, scratch + "/run");
        if (!limited) return "FAIL setting or lifting the limit";
        const test_util::CliResult& r = *limited;
        if (r.exit_code == 0) {
          if (!r.out.starts_with(all_new)) return "FAIL exit 0, but " + r.out;
          return "stored: " + r.out.substr(0, r.out.find('\n'));
        }
        const std::string err = r.err.substr(0, r.err.find('\n'));
        if (r.exit_code != 2 || err.find("cannot start") == std::string::npos) {
          return "FAIL exit " + std::to_string(r.exit_code) + ": " + r.err.substr(0, 600);
        }
        // Refused whole: nothing was stored, and the directory is free.
        const test_util::CliResult again =
            test_util::RunCli(EVENTFOLD_CLI, {"ingest", "--data", dir, file}, scratch + "/again");
        if (again.exit_code != 0 || !again.out.starts_with(all_new)) {
          return "FAIL the run after the refusal: exit " + std::to_string(again.exit_code) + ", " +
                 again.out + again.err.substr(0, 600);
        }
        return "refused: " + err;
      });
  if (!sweep.skipped.empty()) GTEST_SKIP() << sweep.skipped;
  EXPECT_GT(sweep.refused, 0) << "no limit was tight enough to refuse a thread";
  EXPECT_GT(sweep.ok, 0) << "no limit let the command run";
}

// `eventfold serve` with its admin listener, under a thread limit: either it
// exits 2 naming the thread it could not start (a webhook or admin worker,
// an event loop, the admin API's long-polls), or it answers a delivery and
// an admin read, and stops at SIGTERM with exit 0. Each listener has 2
// event loops and 64 workers by default, so the headrooms reach past 130.
TEST(ThreadLimit, ServeExitsNamingTheThreadOrAnswersBothListeners) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: to run each case under a user id of its own";
  const std::vector<Delivery> deliveries = History();
  const std::string token = "thread-limit-admin-token-0123456789";
  const Sweep sweep =
      SweepHeadroom({0, 3, 6, 60, 66, 68, 70, 72, 76, 80, 200}, "answered",
                    [&](const std::string& scratch, int headroom) -> std::string {
                      WithoutLeakCheckAtExit();
                      const std::string token_file = scratch + "/token";
                      test_util::WriteFile(token_file, token + "\n");
                      test_util::ServerProcess serve(EVENTFOLD_CLI, scratch + "/store", scratch);
                      // This process's threads and serve's main thread, then
                      // the headroom.
                      if (!SetThreadLimit(ThreadsOfThisProcess() + 1 + headroom)) {
                        return "FAIL setrlimit";
                      }
                      const ::testing::AssertionResult started =
                          serve.Start({"--allow-unsigned", "--admin-listen", "127.0.0.1:0",
                                       "--admin-token-file", token_file});
                      if (!LiftThreadLimit()) return "FAIL raising the limit";
                      if (!started) {
                        const std::string log = serve.log(), why = started.message();
                        if (why.find("serve exited early") == std::string::npos ||
                            log.find("cannot start") == std::string::npos) {
                          return "FAIL serve neither started nor exited naming a thread: " + why;
                        }
                        return "refused: " + log.substr(0, log.find('\n'));
                      }
                      const std::string& body = deliveries.front().body;
                      test_util::RawClient hook(serve.port());
                      hook.Send(
                          "POST /hooks HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                          "Content-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body);
                      const std::vector<int> posted = hook.ReadAnswers(1);
                      test_util::RawClient admin(serve.admin_port());
                      admin.Send("GET /v1/status HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
                                 token + "\r\n\r\n");
                      const std::vector<int> read = admin.ReadAnswers(1);
                      const int code = serve.Stop();
                      if (posted != std::vector<int>{200})
                        return "FAIL the delivery: " + serve.log();
                      if (read != std::vector<int>{200})
                        return "FAIL the admin read: " + serve.log();
                      if (code != 0) return "FAIL exit " + std::to_string(code) + " after SIGTERM";
                      return std::string("answered 200 on both listeners");
                    });
  if (!sweep.skipped.empty()) GTEST_SKIP() << sweep.skipped;
  EXPECT_GT(sweep.refused, 0) << "no limit was tight enough to refuse a thread";
  EXPECT_GT(sweep.ok, 0) << "no limit let serve start";
}

// Every other command that ends by itself, under the same limits, on a
// store the history was ingested into: each either runs whole (its exit
// code, and for a read its output, as without the limit) or is refused
// (exit 2) naming the thread it could not start. Never a signal. The demo
// runs an HTTP server with 20 workers and a sender of 16 connections: at
// headroom 27 its server starts and its sender gets fewer threads than
// connections (the sender then runs fewer connections).
TEST(ThreadLimit, EveryCommandRunsWholeOrIsRefusedWhole) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: to run each case under a user id of its own";
  std::string ndjson, receipt;
  for (const Delivery& d : History()) {
    ndjson += d.body + "\n";
    const size_t at = d.body.find("\"receipt_id\":\"");
    if (receipt.empty() && at != std::string::npos) {
      const size_t from = at + 14;
      receipt = d.body.substr(from, d.body.find('"', from) - from);
    }
  }
  ASSERT_FALSE(receipt.empty());
  const Sweep sweep = SweepHeadroom(
      {0, 4, 8, 27}, "ran", [&](const std::string& scratch, int headroom) -> std::string {
        const std::string file = scratch + "/history.ndjson", dir = scratch + "/store";
        test_util::WriteFile(file, ndjson);
        WithoutLeakCheckAtExit();
        const auto run = [&](const std::vector<std::string>& args) {
          return test_util::RunCli(EVENTFOLD_CLI, args, scratch + "/run");
        };
        if (const int code = run({"ingest", "--data", dir, file}).exit_code; code > 1) {
          return "FAIL ingest: exit " + std::to_string(code);
        }
        struct Command {
          std::vector<std::string> args;
          bool same_output;  // a read: the same bytes as without the limit
        };
        std::vector<Command> commands = {
            {{"show", "--data", dir, "receipt", receipt}, true},
            {{"log", "--data", dir, "receipt", receipt}, true},
            {{"list", "--data", dir}, true},
            {{"refused", "--data", dir}, true},
            {{"feed", "--data", dir}, true},
            {{"subscriptions", "--data", dir}, true},
            {{"unrouted", "--data", dir}, true},
            {{"status", "--data", dir}, false},
            {{"check", "--data", dir}, false},
            {{"replay", "--data", dir}, false},
            {{"gc", "--data", dir}, false},
            {{"backup", "--data", dir, "OUT"}, false},
            {{"demo", "--data", "OUT", "--fresh", "--receipts", "3", "--products", "1"}, false},
            {{"list", "--data", dir}, true},  // after replay and gc: the same projections
        };
        int refused = 0, out_dirs = 0;
        std::string refusals;
        for (Command& c : commands) {
          // A command that writes a new directory gets a fresh one per run.
          const auto fresh = [&](std::vector<std::string> args) {
            for (std::string& a : args) {
              if (a == "OUT") a = scratch + "/out" + std::to_string(++out_dirs);
            }
            return args;
          };
          const test_util::CliResult expected = run(fresh(c.args));
          const std::optional<test_util::CliResult> limited =
              RunCliWithHeadroom(headroom, fresh(c.args), scratch + "/run");
          if (!limited) return "FAIL setting or lifting the limit";
          const test_util::CliResult& r = *limited;
          const std::string what = c.args[0] + ": exit " + std::to_string(r.exit_code);
          if (r.exit_code == 2 && r.err.find("cannot start") != std::string::npos) {
            ++refused;
            refusals += " " + c.args[0];
            continue;
          }
          if (r.exit_code != expected.exit_code) {
            return "FAIL " + what + " (" + std::to_string(expected.exit_code) +
                   " without the limit): " + r.err.substr(0, 600);
          }
          if (c.same_output && r.out != expected.out) return "FAIL " + what + ", other output";
        }
        if (refused > 0) {
          return "refused: " + std::to_string(refused) + " of " + std::to_string(commands.size()) +
                 " commands (" + refusals.substr(1) + ")";
        }
        return "ran: all " + std::to_string(commands.size()) + " commands";
      });
  if (!sweep.skipped.empty()) GTEST_SKIP() << sweep.skipped;
  EXPECT_GT(sweep.refused, 0) << "no limit was tight enough to refuse a thread";
  EXPECT_GT(sweep.ok, 0) << "no limit let every command run";
}

}  // namespace
}  // namespace eventfold::reliability
