// Cluster mode with real processes: `eventfold serve --cluster` and two
// `eventfold fold` workers on a 3-node JetStream cluster, fed by the retrying,
// signing sender. A worker is SIGKILLed mid-load: its partitions move to the
// other and resume; then a new, empty worker restores its share by replaying
// the partitions' subjects. Afterwards nothing acknowledged is lost, nothing
// is applied twice, the projections equal one store's and `eventfold check`
// is clean on every partition store.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "eventfold/cluster.h"
#include "tests/cluster/nats_cluster.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"
#include "tools/history.h"
#include "tools/sender.h"

namespace eventfold {
namespace {

using test_util::NatsCluster;
using test_util::TempDir;

constexpr const char* kSecret = "cluster-process-secret-0123456789";
constexpr int kPartitions = 4;

// A child process of the `eventfold` binary, its stderr in a file; killed
// (SIGKILL) on destruction if still running.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& log) : log_(log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<std::string> all = {EVENTFOLD_CLI};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, EVENTFOLD_CLI, &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() { Signal(SIGKILL); }
  bool started() const { return pid_ > 0; }
  std::string Log() const { return test_util::ReadFile(log_); }

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

std::map<std::pair<std::string, std::string>, Projection> AllProjections(Store* store) {
  std::map<std::pair<std::string, std::string>, Projection> out;
  EXPECT_TRUE(store
                  ->List("",
                         [&](const Projection& p) {
                           out.emplace(std::make_pair(p.entity, p.id), p);
                           return true;
                         })
                  .ok());
  return out;
}

TEST(ClusterProcessTest, KilledWorkerHandsOverAndAnEmptyWorkerRestoresByReplay) {
  const uint64_t seed = test_util::TestSeed("KilledWorkerHandsOver", 77);
  NatsCluster nats;
  ASSERT_EQ(nats.Start(), "");
  ClusterOptions cluster;
  cluster.urls = {nats.Url(0), nats.Url(1), nats.Url(2)};
  cluster.stream = "eventfold";
  ClusterInitOptions init;
  init.partitions = kPartitions;
  init.lease_ttl_ms = 3000;
  ASSERT_TRUE(InitCluster(cluster, init, Profile::ReceiptRoller()).ok());

  TempDir scratch("cluster-proc");
  const std::string urls = nats.Urls(), dir = scratch.path();
  Child serve({"serve", "--cluster", urls, "--listen", "127.0.0.1:0", "--secret", kSecret},
              dir + "/serve.log");
  ASSERT_TRUE(serve.started());
  int serve_port = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string log = serve.Log();
        const size_t at = log.find("listening on 127.0.0.1:");
        if (at == std::string::npos) return false;
        serve_port = std::atoi(log.c_str() + at + std::string("listening on 127.0.0.1:").size());
        return serve_port > 0;
      },
      60))
      << serve.Log();

  auto fold = [&](const std::string& id) {
    return std::make_unique<Child>(std::vector<std::string>{"fold", "--cluster", urls, "--data",
                                                            dir + "/" + id, "--worker-id", id},
                                   dir + "/" + id + ".log");
  };
  std::unique_ptr<Child> a = fold("a"), b = fold("b");

  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 80;
  ho.products = 20;
  ho.malformed = 0;
  ho.conflicts = 0;  // concurrent senders: arrival order is not fixed
  ho.target_body_bytes = 200;
  sim::History history = sim::GenerateHistory(ho);
  std::vector<sim::Outgoing> first, second;
  for (size_t i = 0; i < history.deliveries.size(); ++i) {
    (i < history.deliveries.size() / 2 ? first : second).push_back({history.deliveries[i]});
  }
  sim::SenderOptions so;
  so.port = serve_port;
  so.secret = kSecret;
  so.connections = 4;
  so.time_scale = 1e-4;  // the 32 h schedule in about 12 s
  so.seed = seed;

  sim::SendReport r1 = sim::Send(first, so);
  EXPECT_EQ(r1.dead_letters, 0u);
  a->Signal(SIGKILL);  // mid-load: b must take a's partitions within the TTL
  sim::SendReport r2 = sim::Send(second, so);
  EXPECT_EQ(r2.dead_letters, 0u);

  auto settled = [&](std::map<int, std::string>* owners) {
    Result<ClusterStatus> st = ReadClusterStatus(cluster);
    if (!st.ok()) return false;
    owners->clear();
    for (const PartitionStatus& p : st->partitions) {
      if (p.owner.empty() || p.lag != 0) return false;
      (*owners)[p.partition] = p.owner;
    }
    return true;
  };
  std::map<int, std::string> owners;
  ASSERT_TRUE(WaitFor(
      [&] {
        return settled(&owners) && std::all_of(owners.begin(), owners.end(),
                                               [](const auto& o) { return o.second == "b"; });
      },
      90))
      << b->Log();

  // A new worker with an empty directory takes half and replays it.
  std::unique_ptr<Child> c = fold("c");
  ASSERT_TRUE(WaitFor(
      [&] {
        return settled(&owners) && std::count_if(owners.begin(), owners.end(), [](const auto& o) {
                                     return o.second == "c";
                                   }) == kPartitions / 2;
      },
      90))
      << c->Log();
  b->Signal(SIGTERM);
  c->Signal(SIGTERM);
  serve.Signal(SIGTERM);

  TempDir ref_dir("reference");
  Result<std::unique_ptr<Store>> ref = Store::Open(ref_dir.path() + "/store", Options{});
  ASSERT_TRUE(ref.ok());
  for (const Delivery& d : history.deliveries) (void)(*ref)->Ingest(d);
  std::map<std::pair<std::string, std::string>, Projection> merged;
  for (const auto& [k, id] : owners) {
    const std::string part_dir = dir + "/" + id + "/p" + std::to_string(k);
    test_util::CliResult check =
        test_util::RunCli(EVENTFOLD_CLI, {"check", "--data", part_dir}, dir + "/check");
    EXPECT_EQ(check.exit_code, 0) << part_dir << ": " << check.err;
    Options o;
    o.create_if_missing = false;
    Result<std::unique_ptr<Store>> part = Store::Open(part_dir, o);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    for (auto& [key, p] : AllProjections(part->get())) merged.emplace(key, p);
  }
  // Exact: every acknowledged event applied once (applied counts and
  // versions equal the reference's), none missing, none extra.
  EXPECT_EQ(merged, AllProjections(ref->get()));
}

}  // namespace
}  // namespace eventfold
