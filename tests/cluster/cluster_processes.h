// Helpers for the cluster tests that run real `eventfold` processes: a child
// process with its output in a file, a bounded poll, the projections of a
// store as a comparable map, and the setting every such test starts from
// (ProcessCluster, ProcessHistory).
//
// Thread-safety: one thread drives a Child or a ProcessCluster; WaitFor and
// AllProjections keep no state.

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
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "eventfold/cluster.h"
#include "eventfold/store.h"
#include "tests/cluster/nats_cluster.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tools/history.h"
#include "tools/sender.h"

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
    Send(sig);
    WaitExit();
  }
  // Sends `sig` only (SIGSTOP, SIGCONT, or a stop awaited with WaitExit).
  void Send(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Waits (polling, at most 30 s) for the exit.
  void WaitExit() {
    if (pid_ <= 0) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
  }
  // The exit code once WaitExit saw the exit (128 + the signal when one
  // ended it); -1 before, or when it did not end within the wait.
  int exit_code() const { return exit_code_; }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
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

// The setting of the process tests: a 3-node JetStream cluster initialized
// with `partitions` partitions (R=3, a 3 s lease TTL unless told, so that
// a killed worker's partitions move within seconds), a scratch directory, and
// `eventfold serve --cluster` on a free loopback port signing with `secret`.
//
//   ProcessCluster p("cluster-proc", kSecret);
//   ASSERT_EQ(p.Start(kPartitions), "");
//   std::unique_ptr<Child> a = p.Fold("a");
class ProcessCluster {
 public:
  ProcessCluster(std::string_view scratch_name, std::string secret)
      : scratch_(scratch_name), secret_(std::move(secret)) {}

  // Starts the nodes, initializes the cluster and starts the receiver; ""
  // once it listens, else why not.
  std::string Start(int partitions, int64_t lease_ttl_ms = 3000) {
    if (std::string err = nats.Start(); !err.empty()) return err;
    cluster.urls = {nats.Url(0), nats.Url(1), nats.Url(2)};
    urls = nats.Urls();
    ClusterInitOptions init;
    init.partitions = partitions;
    init.lease_ttl_ms = lease_ttl_ms;
    Result<ClusterLayout> layout = InitCluster(cluster, init, Profile::ReceiptRoller());
    if (!layout.ok()) return "cluster init: " + layout.status().ToString();
    serve = Serve(0);
    if (!serve->started()) return "eventfold serve did not start";
    serve_port = ListeningPort(*serve, 60);
    if (serve_port <= 0) return "eventfold serve is not listening:\n" + serve->Log();
    return "";
  }

  // The scratch directory: worker <id>'s stores under dir()/<id>, each
  // process's output in dir()/<name>.log.
  const std::string& dir() const { return scratch_.path(); }

  // `eventfold serve --cluster` on `port` (0: any free one).
  std::unique_ptr<Child> Serve(int port) const {
    return std::make_unique<Child>(
        std::vector<std::string>{"serve", "--cluster", urls, "--listen",
                                 "127.0.0.1:" + std::to_string(port), "--secret", secret_},
        dir() + "/serve.log");
  }

  // `eventfold fold --cluster` as worker `id`.
  std::unique_ptr<Child> Fold(const std::string& id) const {
    return std::make_unique<Child>(std::vector<std::string>{"fold", "--cluster", urls, "--data",
                                                            dir() + "/" + id, "--worker-id", id},
                                   dir() + "/" + id + ".log");
  }

  NatsCluster nats;  // first: it outlives every process below
  ClusterOptions cluster;
  std::string urls;  // "nats://…,nats://…" for --cluster

 private:
  TempDir scratch_;
  const std::string secret_;

 public:
  std::unique_ptr<Child> serve;  // after scratch_: stopped before it is removed
  int serve_port = 0;
};

// The history the process tests send: no malformed bodies and no conflicts
// (with concurrent senders the arrival order is not fixed), 200-byte bodies;
// the first `num`/`den` of its deliveries in `first`, the rest in `second`.
inline sim::History ProcessHistory(uint64_t seed, int receipts, int products, size_t num,
                                   size_t den, std::vector<sim::Outgoing>* first,
                                   std::vector<sim::Outgoing>* second) {
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = receipts;
  ho.products = products;
  ho.malformed = 0;
  ho.conflicts = 0;
  ho.target_body_bytes = 200;
  sim::History history = sim::GenerateHistory(ho);
  const size_t n = history.deliveries.size();
  for (size_t i = 0; i < n; ++i) {
    (i < n * num / den ? first : second)->push_back({history.deliveries[i]});
  }
  return history;
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
  const ProjectionMap expected = AllProjections(ref->get());
  EXPECT_EQ(merged.size(), expected.size());
  // Each difference by name, as JSON: gtest would print the maps as bytes.
  for (const auto& [key, p] : expected) {
    auto it = merged.find(key);
    if (it == merged.end()) {
      ADD_FAILURE() << "no partition holds " << key.first << "/" << key.second
                    << "; the reference has " << ProjectionToJson(p);
    } else if (!(it->second == p)) {
      ADD_FAILURE() << key.first << "/" << key.second << " differs:\n  partitions "
                    << ProjectionToJson(it->second) << "\n  reference  " << ProjectionToJson(p);
    }
  }
  for (const auto& [key, p] : merged) {
    if (expected.count(key) == 0) {
      ADD_FAILURE() << key.first << "/" << key.second
                    << " is in a partition, not in the reference: " << ProjectionToJson(p);
    }
  }
}

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_CLUSTER_CLUSTER_PROCESSES_H_
