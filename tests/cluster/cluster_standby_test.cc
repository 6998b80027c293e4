// Standbys: two `eventfold fold` workers each keep a warm copy of the
// partitions the other owns. The owner is SIGKILLed; the standby takes its
// partitions over from its copies and folds only what arrived after the
// kill: the new owner's consumer delivers no message the copy already had
// (no replay from the stream's start), and the projections are exact.

#include <gtest/gtest.h>
#include <nats/nats.h>
#include <signal.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

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

constexpr const char* kSecret = "cluster-standby-secret-0123456789ab";
constexpr int kPartitions = 4;

// Messages the durable consumer `durable` has delivered since it was
// created (its consumer sequence); -1 when it cannot be read.
int64_t Delivered(const std::string& url, const std::string& stream, const std::string& durable) {
  natsConnection* nc = nullptr;
  if (natsConnection_ConnectTo(&nc, url.c_str()) != NATS_OK) return -1;
  jsCtx* js = nullptr;
  int64_t delivered = -1;
  if (natsConnection_JetStream(&js, nc, nullptr) == NATS_OK) {
    jsConsumerInfo* ci = nullptr;
    if (js_GetConsumerInfo(&ci, js, stream.c_str(), durable.c_str(), nullptr, nullptr) == NATS_OK) {
      delivered = static_cast<int64_t>(ci->Delivered.Consumer);
      jsConsumerInfo_Destroy(ci);
    }
    jsCtx_Destroy(js);
  }
  natsConnection_Destroy(nc);
  return delivered;
}

// Every partition owned, each with exactly one standby: the other worker.
bool OwnedWithStandbys(const ClusterOptions& cluster) {
  Result<ClusterStatus> st = ReadClusterStatus(cluster);
  if (!st.ok()) return false;
  for (const PartitionStatus& p : st->partitions) {
    if (p.owner.empty() || p.lag != 0 || p.standbys.size() != 1 || p.standbys[0] == p.owner) {
      return false;
    }
  }
  return true;
}

TEST(ClusterStandbyTest, KilledOwnersStandbyTakesOverWithoutReplay) {
  const uint64_t seed = test_util::TestSeed("ClusterStandby", 2020);
  ProcessCluster p("cluster-standby", kSecret);
  ASSERT_EQ(p.Start(kPartitions), "");
  const ClusterOptions& cluster = p.cluster;
  const std::string& urls = p.urls;
  const std::string& dir = p.dir();
  std::unique_ptr<Child> a = p.Fold("a"), b = p.Fold("b");

  std::vector<sim::Outgoing> before, after;
  const sim::History history = test_util::ProcessHistory(seed, 80, 20, 4, 5, &before, &after);
  sim::SenderOptions so;
  so.port = p.serve_port;
  so.secret = kSecret;
  so.connections = 4;
  so.time_scale = 1e-4;
  so.seed = seed;

  EXPECT_EQ(sim::Send(before, so).dead_letters, 0u);
  // Owners and their standbys have folded everything sent so far.
  ASSERT_TRUE(WaitFor([&] { return OwnedWithStandbys(cluster); }, 90)) << a->Log() << b->Log();
  test_util::CliResult status =
      test_util::RunCli(EVENTFOLD_CLI, {"cluster", "status", "--cluster", urls}, dir + "/status");
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("\"standbys\":[\"a\"]"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("\"standbys\":[\"b\"]"), std::string::npos) << status.out;

  Result<ClusterStatus> at_kill = ReadClusterStatus(cluster);
  ASSERT_TRUE(at_kill.ok());
  std::vector<int> a_owned;
  for (const PartitionStatus& p : at_kill->partitions) {
    if (p.owner == "a") a_owned.push_back(p.partition);
  }
  ASSERT_FALSE(a_owned.empty());
  a->Signal(SIGKILL);
  EXPECT_EQ(sim::Send(after, so).dead_letters, 0u);

  std::map<int, std::string> owners;
  ASSERT_TRUE(WaitFor(
      [&] {
        return test_util::Settled(cluster, &owners) &&
               std::all_of(owners.begin(), owners.end(),
                           [](const auto& o) { return o.second == "b"; });
      },
      90))
      << b->Log();
  Result<ClusterStatus> end = ReadClusterStatus(cluster);
  ASSERT_TRUE(end.ok());
  for (int k : a_owned) {
    const uint64_t had = at_kill->partitions[static_cast<size_t>(k)].messages;
    const uint64_t now = end->partitions[static_cast<size_t>(k)].messages;
    ASSERT_GT(had, 0u) << "partition " << k;
    // b's owner consumer started after its warm copy's last folded message:
    // it delivered at most what arrived after the kill, not the `had`
    // messages a replay from the stream's start would have.
    const int64_t delivered =
        Delivered(p.nats.Url(0), "eventfold", "eventfold_p" + std::to_string(k) + "_b");
    ASSERT_GE(delivered, 0) << "partition " << k;
    EXPECT_LE(static_cast<uint64_t>(delivered), now - had)
        << "partition " << k << ": " << had << " messages at the kill, " << now << " now";
  }
  b->Signal(SIGTERM);
  p.serve->Signal(SIGTERM);

  TempDir ref_dir("reference");
  test_util::ExpectExactAgainstReference(dir, owners, history.deliveries,
                                         ref_dir.path() + "/store");
}

}  // namespace
}  // namespace eventfold
