// Cluster mode with real processes: `eventfold serve --cluster` and two
// `eventfold fold` workers on a 3-node JetStream cluster, fed by the retrying,
// signing sender. A worker is SIGKILLed mid-load: its partitions move to the
// other and resume; then a new, empty worker restores its share by replaying
// the partitions' subjects. Afterwards nothing acknowledged is lost, nothing
// is applied twice, the projections equal one store's and `eventfold check`
// is clean on every partition store.

#include <gtest/gtest.h>
#include <nats/nats.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/consumer_names.h"
#include "eventfold/cluster.h"
#include "tests/cluster/cluster_processes.h"
#include "tests/cluster/nats_cluster.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"
#include "tools/history.h"
#include "tools/sender.h"

namespace eventfold {
namespace {

using test_util::Child;
using test_util::ProcessCluster;
using test_util::TempDir;
using test_util::WaitFor;

constexpr const char* kSecret = "cluster-process-secret-0123456789";
constexpr int kPartitions = 4;

// What an entity's log says whichever store holds it: each event's id and
// verdict. Its seq and received_at are the storing store's own (a partition
// store numbers its events itself; the receivers stamp arrival), and the
// arrival order through two receivers is not the reference's: the fold, and
// so every verdict, is the same.
std::multiset<std::string> Verdicts(const std::string& log_json) {
  std::multiset<std::string> out;
  static const std::regex kEvent(R"re("event_id":"([^"]*)"[^{}]*?"verdict":"([^"]*)")re");
  for (auto it = std::sregex_iterator(log_json.begin(), log_json.end(), kEvent);
       it != std::sregex_iterator(); ++it) {
    out.insert((*it)[1].str() + " " + (*it)[2].str());
  }
  return out;
}

TEST(ClusterProcessTest, KilledWorkerHandsOverAndAnEmptyWorkerRestoresByReplay) {
  const uint64_t seed = test_util::TestSeed("KilledWorkerHandsOver", 77);
  ProcessCluster p("cluster-proc", kSecret);
  ASSERT_EQ(p.Start(kPartitions), "");
  const ClusterOptions& cluster = p.cluster;
  const std::string& dir = p.dir();
  std::unique_ptr<Child> a = p.Fold("a"), b = p.Fold("b");

  std::vector<sim::Outgoing> first, second;
  const sim::History history = test_util::ProcessHistory(seed, 80, 20, 1, 2, &first, &second);
  sim::SenderOptions so;
  so.port = p.serve_port;
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
    return test_util::Settled(cluster, owners);
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
  std::unique_ptr<Child> c = p.Fold("c");
  ASSERT_TRUE(WaitFor(
      [&] {
        return settled(&owners) && std::count_if(owners.begin(), owners.end(), [](const auto& o) {
                                     return o.second == "c";
                                   }) == kPartitions / 2;
      },
      90))
      << c->Log();
  // Both stop at once: a worker that stops gives its leases up, and the
  // other, still running, would take its partitions over (leaving two
  // unmarked copies of them) if it rebalanced before its own stop: stopped
  // one after the other, the second ran through the first's whole stop.
  // Frozen first and woken together, both stop within moments.
  for (Child* w : {b.get(), c.get()}) w->Send(SIGSTOP);
  for (Child* w : {b.get(), c.get()}) w->Send(SIGTERM);
  for (Child* w : {b.get(), c.get()}) w->Send(SIGCONT);
  for (Child* w : {b.get(), c.get()}) w->WaitExit();
  p.serve->Signal(SIGTERM);

  TempDir ref_dir("reference");
  const std::string ref = ref_dir.path() + "/store";
  test_util::ExpectExactAgainstReference(dir, owners, history.deliveries, ref);

  // The read commands on a worker's directory answer over its current
  // partition stores (b's two given away to c are stale and skipped), in
  // one store's shape and order: b's and c's lists together are the
  // reference's, each in the reference's order.
  auto cli = [&](const std::vector<std::string>& args) {
    return test_util::RunCli(EVENTFOLD_CLI, args, dir + "/cli");
  };
  const std::vector<std::string> expected = test_util::Lines(cli({"list", "--data", ref}).out);
  ASSERT_FALSE(expected.empty());
  std::multiset<std::string> together;
  for (const std::string id : {"b", "c"}) {
    test_util::CliResult list = cli({"list", "--data", dir + "/" + id});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    const std::vector<std::string> lines = test_util::Lines(list.out);
    EXPECT_FALSE(lines.empty()) << id;
    EXPECT_TRUE(std::includes(expected.begin(), expected.end(), lines.begin(), lines.end(),
                              [&](const std::string& x, const std::string& y) {
                                return std::find(expected.begin(), expected.end(), x) <
                                       std::find(expected.begin(), expected.end(), y);
                              }))
        << id << ": not the reference's order";
    together.insert(lines.begin(), lines.end());
    test_util::CliResult check = cli({"check", "--data", dir + "/" + id});
    EXPECT_EQ(check.exit_code, 0) << check.err;
    EXPECT_NE(check.out.find("\"ok\":true"), std::string::npos) << check.out;
  }
  EXPECT_EQ(together, std::multiset<std::string>(expected.begin(), expected.end()));
  // show and log find an entity in whichever partition store holds it: the
  // reference's first and last entities ({"entity":"…","id":"…",…}).
  auto ref_of = [](const std::string& line) {
    const size_t e = line.find("\"entity\":\"") + 10, i = line.find("\"id\":\"") + 6;
    return std::make_pair(line.substr(e, line.find('"', e) - e),
                          line.substr(i, line.find('"', i) - i));
  };
  for (const auto& [entity, key] : {ref_of(expected.front()), ref_of(expected.back())}) {
    for (const char* cmd : {"show", "log"}) {
      test_util::CliResult want = cli({cmd, "--data", ref, entity, key});
      ASSERT_EQ(want.exit_code, 0) << cmd << " " << entity << "/" << key << ": " << want.err;
      test_util::CliResult b_out = cli({cmd, "--data", dir + "/b", entity, key});
      test_util::CliResult c_out = cli({cmd, "--data", dir + "/c", entity, key});
      const std::string& got = b_out.exit_code == 0 ? b_out.out : c_out.out;
      if (std::string_view(cmd) == "show") {
        EXPECT_EQ(got, want.out) << cmd;
      } else {
        EXPECT_EQ(Verdicts(got), Verdicts(want.out)) << cmd << "\n" << got << "\n" << want.out;
      }
      EXPECT_NE(b_out.exit_code == 0, c_out.exit_code == 0) << cmd << ": in exactly one worker";
    }
  }
}

// One --worker-id is one running `eventfold fold`: a second process with a
// running worker's id is refused at start, and a running one whose key
// another process rewrites (one that got past that check) stops folding.
// Each exits 2 and says why.
TEST(ClusterProcessTest, AFoldWhoseWorkerIdIsInUseOrTakenExitsTwo) {
  ProcessCluster p("cluster-proc-id", kSecret);
  ASSERT_EQ(p.Start(kPartitions), "");
  std::unique_ptr<Child> a = p.Fold("x");
  std::map<int, std::string> owners;
  ASSERT_TRUE(WaitFor(
      [&] {
        return test_util::Settled(p.cluster, &owners) &&
               std::all_of(owners.begin(), owners.end(),
                           [](const auto& o) { return o.second == "x"; });
      },
      60))
      << a->Log();

  Child second({"fold", "--cluster", p.urls, "--data", p.dir() + "/x2", "--worker-id", "x"},
               p.dir() + "/x2.log");
  second.WaitExit();
  EXPECT_EQ(second.exit_code(), 2) << second.Log();
  EXPECT_NE(second.Log().find("--worker-id x: a running worker uses this id"), std::string::npos)
      << second.Log();

  // Another process's words under w.x.
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, p.urls.c_str()), NATS_OK);
  jsCtx* js = nullptr;
  kvStore* kv = nullptr;
  uint64_t rev = 0;
  EXPECT_EQ(natsConnection_JetStream(&js, nc, nullptr), NATS_OK);
  EXPECT_EQ(js_KeyValue(&kv, js, (p.cluster.stream + "_leases").c_str()), NATS_OK);
  EXPECT_EQ(kvStore_PutString(&rev, kv, cluster::WorkerKey("x").c_str(), "x another-process"),
            NATS_OK);
  kvStore_Destroy(kv);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  a->WaitExit();
  EXPECT_EQ(a->exit_code(), 2) << a->Log();
  EXPECT_NE(a->Log().find("another process announced itself under this id (\"x another-process\""),
            std::string::npos)
      << a->Log();
  EXPECT_NE(a->Log().find("stopped: another worker runs with this --worker-id"), std::string::npos)
      << a->Log();
}

// One worker taking 32 partitions keeps every one it takes. Each takeover
// costs several JetStream requests (about half a second here), and a lease
// round renews at its start only: taking all 32 in one round took 18 s, and
// the first ones taken expired on the way (a 6 s TTL here) and were given
// up. A round now stops taking once it has run a renewal period.
TEST(ClusterProcessTest, AWorkerTakingManyPartitionsKeepsTheFirstItTook) {
  constexpr int kMany = 32;
  ProcessCluster p("cluster-proc-many", kSecret);
  ASSERT_EQ(p.Start(kMany, /*lease_ttl_ms=*/6000), "");
  std::unique_ptr<Child> a = p.Fold("a");
  std::map<int, std::string> owners;
  ASSERT_TRUE(WaitFor(
      [&] {
        return test_util::Settled(p.cluster, &owners) && owners.size() == kMany &&
               std::all_of(owners.begin(), owners.end(),
                           [](const auto& o) { return o.second == "a"; });
      },
      180))
      << a->Log();
  EXPECT_EQ(a->Log().find("given up"), std::string::npos) << a->Log();
}

}  // namespace
}  // namespace eventfold
