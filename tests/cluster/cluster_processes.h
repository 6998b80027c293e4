// Helpers for the cluster tests that run real `eventfold` processes: a child
// process with its output in a file, a bounded poll, and the projections of
// a store as a comparable map.
//
// Thread-safety: one thread drives a Child; WaitFor and AllProjections keep
// no state.

#ifndef EVENTFOLD_TESTS_CLUSTER_CLUSTER_PROCESSES_H_
#define EVENTFOLD_TESTS_CLUSTER_CLUSTER_PROCESSES_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "eventfold/cluster.h"
#include "eventfold/store.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"

extern char** environ;

namespace eventfold::test_util {

// A child process of the `eventfold` binary (or of `binary`), its stdout
// and stderr appended to `log`; killed (SIGKILL) on destruction if still
// running.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& log,
        const std::string& binary = EVENTFOLD_CLI)
      : log_(log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<std::string> all = {binary};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, binary.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() { Signal(SIGKILL); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool started() const { return pid_ > 0; }
  std::string Log() const { return ReadFile(log_); }

  // Sends `sig` and waits (polling, at most 30 s) for the exit.
  void Signal(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

// Polls `pred` every 100 ms until it holds or `seconds` pass.
template <typename Pred>
bool WaitFor(Pred pred, int seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

// The port a `serve` child logged ("listening on 127.0.0.1:PORT"), waiting
// at most `seconds`; 0 if it did not.
inline int ListeningPort(const Child& serve, int seconds) {
  static const std::string kPrefix = "listening on 127.0.0.1:";
  int port = 0;
  WaitFor(
      [&] {
        const std::string log = serve.Log();
        const size_t at = log.rfind(kPrefix);
        if (at == std::string::npos) return false;
        port = std::atoi(log.c_str() + at + kPrefix.size());
        return port > 0;
      },
      seconds);
  return port;
}

using ProjectionMap = std::map<std::pair<std::string, std::string>, Projection>;

inline ProjectionMap AllProjections(Store* store) {
  ProjectionMap out;
  EXPECT_TRUE(store
                  ->List("",
                         [&](const Projection& p) {
                           out.emplace(std::make_pair(p.entity, p.id), p);
                           return true;
                         })
                  .ok());
  return out;
}

// True when every partition has an owner and no lag; `owners` then maps
// each partition to its owner's worker id.
inline bool Settled(const ClusterOptions& cluster, std::map<int, std::string>* owners) {
  Result<ClusterStatus> st = ReadClusterStatus(cluster);
  if (!st.ok()) return false;
  owners->clear();
  for (const PartitionStatus& p : st->partitions) {
    if (p.owner.empty() || p.lag != 0) return false;
    (*owners)[p.partition] = p.owner;
  }
  return true;
}

// The cluster's end state against one store fed the same deliveries:
// `eventfold check` is clean on every owned partition store (under
// dir/<owner>/p<k>), and the projections merged over the partitions equal
// the reference's exactly (state, fields, version, applied, rejected): every
// acknowledged event applied once, none missing, none extra. The reference
// store is built at `ref_path` (closed on return).
inline void ExpectExactAgainstReference(const std::string& dir,
                                        const std::map<int, std::string>& owners,
                                        const std::vector<Delivery>& deliveries,
                                        const std::string& ref_path) {
  Result<std::unique_ptr<Store>> ref = Store::Open(ref_path, Options{});
  ASSERT_TRUE(ref.ok());
  for (const Delivery& d : deliveries) (void)(*ref)->Ingest(d);
  ProjectionMap merged;
  for (const auto& [k, id] : owners) {
    const std::string part_dir = dir + "/" + id + "/p" + std::to_string(k);
    CliResult check = RunCli(EVENTFOLD_CLI, {"check", "--data", part_dir}, dir + "/check");
    EXPECT_EQ(check.exit_code, 0) << part_dir << ": " << check.err;
    Options o;
    o.create_if_missing = false;
    Result<std::unique_ptr<Store>> part = Store::Open(part_dir, o);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    for (auto& [key, p] : AllProjections(part->get())) merged.emplace(key, p);
  }
  EXPECT_EQ(merged, AllProjections(ref->get()));
}

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_CLUSTER_CLUSTER_PROCESSES_H_
