// Cluster faults under signed load: `eventfold serve --cluster` and two
// `eventfold fold` workers on a 3-node JetStream cluster (R=3), fed by the
// retrying, signing sender at a steady rate. Mid-load one process fails:
// a nats-server node is SIGKILLed and restarted, or SIGSTOPped for 10 s, or
// the receiver is SIGKILLed and restarted on its port. Afterwards no
// acknowledged event is lost, none is applied twice, the projections equal
// one store's fed the same deliveries, and `eventfold check` is clean on
// every partition store.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "eventfold/cluster.h"
#include "tests/cluster/cluster_processes.h"
#include "tests/cluster/nats_cluster.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"
#include "tools/history.h"
#include "tools/sender.h"

namespace eventfold {
namespace {

using test_util::Child;
using test_util::NatsCluster;
using test_util::ProcessCluster;
using test_util::TempDir;
using test_util::WaitFor;

constexpr const char* kSecret = "cluster-fault-secret-0123456789ab";
constexpr int kPartitions = 4;
// The faulted load lasts about this long, so every fault below (the longest
// is a 10 s pause) happens while deliveries are being sent.
constexpr double kFaultedLoadSeconds = 14;

enum class Fault { kKillNatsNode, kPauseNatsNode, kKillReceiver };

std::string FaultName(const testing::TestParamInfo<Fault>& info) {
  switch (info.param) {
    case Fault::kKillNatsNode:
      return "KillAndRestartNatsNode";
    case Fault::kPauseNatsNode:
      return "PauseNatsNodeFor10s";
    case Fault::kKillReceiver:
      return "KillAndRestartReceiver";
  }
  return "Unknown";
}

class ClusterFaultTest : public testing::TestWithParam<Fault> {};

TEST_P(ClusterFaultTest, NothingAcknowledgedLostNothingAppliedTwice) {
  const uint64_t seed = test_util::TestSeed("ClusterFault", 1009);
  ProcessCluster p("cluster-fault", kSecret);
  ASSERT_EQ(p.Start(kPartitions), "");
  NatsCluster& nats = p.nats;
  std::unique_ptr<Child>& serve = p.serve;
  const int port = p.serve_port;
  std::unique_ptr<Child> a = p.Fold("a"), b = p.Fold("b");

  std::vector<sim::Outgoing> before, during;
  const sim::History history = test_util::ProcessHistory(seed, 60, 15, 1, 4, &before, &during);
  sim::SenderOptions so;
  so.port = port;
  so.secret = kSecret;
  so.connections = 4;
  // The 32 h schedule in about two minutes: retries outlast every fault.
  so.time_scale = 1e-3;
  so.timeout_seconds = 5;
  so.seed = seed;

  sim::SendReport r1 = sim::Send(before, so);
  EXPECT_EQ(r1.dead_letters, 0u);

  // The fault runs beside the paced rest of the load; only this thread
  // touches `nats` and `serve` until it is joined.
  std::thread fault([&] {
    switch (GetParam()) {
      case Fault::kKillNatsNode:
        nats.Kill(1);
        std::this_thread::sleep_for(std::chrono::seconds(3));
        EXPECT_EQ(nats.Restart(1), "");
        break;
      case Fault::kPauseNatsNode:
        nats.Pause(1);
        std::this_thread::sleep_for(std::chrono::seconds(10));
        nats.Resume(1);
        break;
      case Fault::kKillReceiver:
        std::this_thread::sleep_for(std::chrono::seconds(2));
        serve->Signal(SIGKILL);
        serve = p.Serve(port);
        break;
    }
  });
  so.rate_per_second = static_cast<double>(during.size()) / kFaultedLoadSeconds;
  sim::SendReport r2 = sim::Send(during, so);
  fault.join();
  EXPECT_EQ(r2.dead_letters, 0u) << serve->Log();

  std::map<int, std::string> owners;
  ASSERT_TRUE(WaitFor([&] { return test_util::Settled(p.cluster, &owners); }, 120))
      << a->Log() << b->Log();
  a->Signal(SIGTERM);
  b->Signal(SIGTERM);
  serve->Signal(SIGTERM);
  TempDir ref_dir("reference");
  test_util::ExpectExactAgainstReference(p.dir(), owners, history.deliveries,
                                         ref_dir.path() + "/s");
}

INSTANTIATE_TEST_SUITE_P(Faults, ClusterFaultTest,
                         testing::Values(Fault::kKillNatsNode, Fault::kPauseNatsNode,
                                         Fault::kKillReceiver),
                         FaultName);

}  // namespace
}  // namespace eventfold
