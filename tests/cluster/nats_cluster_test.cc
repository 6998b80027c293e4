// The test cluster itself: it starts, elects a JetStream leader, keeps
// serving with one node killed, takes the node back and stops every process.

#include "tests/cluster/nats_cluster.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>

namespace eventfold::test_util {
namespace {

bool Alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

TEST(NatsClusterTest, StartsSurvivesANodeLossAndStops) {
  NatsCluster cluster;
  ASSERT_EQ(cluster.Start(), "");
  pid_t pids[NatsCluster::kNodes];
  for (int i = 0; i < NatsCluster::kNodes; ++i) {
    pids[i] = cluster.Pid(i);
    EXPECT_TRUE(Alive(pids[i])) << "node " << i;
  }

  cluster.Kill(0);
  EXPECT_EQ(cluster.Pid(0), -1);
  // Two of three nodes keep a JetStream quorum.
  EXPECT_EQ(cluster.WaitReady(), "");

  ASSERT_EQ(cluster.Restart(0), "");
  EXPECT_EQ(cluster.WaitReady(), "");
  pids[0] = cluster.Pid(0);

  cluster.Stop();
  for (int i = 0; i < NatsCluster::kNodes; ++i) {
    EXPECT_EQ(cluster.Pid(i), -1);
    // Reaped: the pid no longer names our child.
    EXPECT_FALSE(Alive(pids[i]) && ::waitpid(pids[i], nullptr, WNOHANG) == 0) << "node " << i;
  }
}

}  // namespace
}  // namespace eventfold::test_util
