// `eventfold cluster init` and InitCluster/ReadClusterLayout against a real
// 3-node JetStream cluster: what it creates, idempotence, refusing another
// P or profile, and an unreachable cluster.

#include <gtest/gtest.h>
#include <nats/nats.h>

#include <chrono>
#include <string>
#include <thread>

#include "eventfold/cluster.h"
#include "tests/cluster/nats_cluster.h"
#include "tests/common/invoice_profile.h"
#include "tests/common/run_cli.h"

namespace eventfold {
namespace {

using test_util::NatsCluster;

class ClusterInitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string err = nats_.Start();
    ASSERT_EQ(err, "");
    cluster_.urls = {nats_.Url(0), nats_.Url(1), nats_.Url(2)};
    cluster_.stream = "evtest";
    cluster_.timeout_ms = 5000;
    options_.partitions = 4;
    options_.replicas = 3;
    options_.lease_ttl_ms = 4000;
  }

  // The configuration JetStream holds for stream `name`.
  jsStreamConfig StreamConfig(const std::string& name, std::string* subject) {
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    jsStreamInfo* si = nullptr;
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const std::string url = nats_.Url(1);
    EXPECT_EQ(natsConnection_ConnectTo(&nc, url.c_str()), NATS_OK);
    EXPECT_EQ(natsConnection_JetStream(&js, nc, nullptr), NATS_OK);
    EXPECT_EQ(js_GetStreamInfo(&si, js, name.c_str(), nullptr, nullptr), NATS_OK) << name;
    if (si != nullptr) {
      cfg = *si->Config;
      if (subject && cfg.SubjectsLen > 0) *subject = cfg.Subjects[0];
      cfg.Subjects = nullptr;  // points into si, freed below
      cfg.Name = nullptr;
    }
    jsStreamInfo_Destroy(si);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return cfg;
  }

  NatsCluster nats_;
  ClusterOptions cluster_;
  ClusterInitOptions options_;
};

TEST_F(ClusterInitTest, CreatesStreamsAndBucketsAndRecordsTheLayout) {
  Result<ClusterLayout> layout = InitCluster(cluster_, options_, Profile::ReceiptRoller());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_TRUE(layout->created);
  EXPECT_EQ(layout->partitions, 4);
  EXPECT_EQ(layout->replicas, 3);
  EXPECT_EQ(layout->profile_fingerprint, Profile::ReceiptRoller().Fingerprint());

  std::string subject;
  jsStreamConfig intake = StreamConfig("evtest", &subject);
  EXPECT_EQ(subject, "evtest.p.*");
  EXPECT_EQ(intake.Replicas, 3);
  EXPECT_EQ(intake.Storage, js_FileStorage);
  EXPECT_EQ(intake.MaxAge, int64_t{35} * 24 * 3600 * 1000000000LL);

  jsStreamConfig refused = StreamConfig("evtest_refused", &subject);
  EXPECT_EQ(subject, "evtest.refused");
  EXPECT_EQ(refused.MaxMsgs, options_.refused_max_messages);
  EXPECT_EQ(refused.MaxBytes, options_.refused_max_bytes);

  // The lease bucket's TTL is the lease time-to-live.
  jsStreamConfig leases = StreamConfig("KV_evtest_leases", nullptr);
  EXPECT_EQ(leases.MaxAge, options_.lease_ttl_ms * 1000000LL);
  EXPECT_EQ(leases.Replicas, 3);

  Result<ClusterLayout> read = ReadClusterLayout(cluster_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->partitions, 4);
  EXPECT_EQ(read->replicas, 3);
  EXPECT_EQ(read->profile_name, Profile::ReceiptRoller().name());
  EXPECT_EQ(read->profile_json, Profile::ReceiptRoller().ToJson());
  EXPECT_EQ(PartitionSubject("evtest", 3), "evtest.p.3");
}

TEST_F(ClusterInitTest, IsIdempotentAndRefusesAnotherPartitionCountOrProfile) {
  ASSERT_TRUE(InitCluster(cluster_, options_, Profile::ReceiptRoller()).ok());
  Result<ClusterLayout> again = InitCluster(cluster_, options_, Profile::ReceiptRoller());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->partitions, 4);

  ClusterInitOptions more = options_;
  more.partitions = 5;
  Result<ClusterLayout> refused = InitCluster(cluster_, more, Profile::ReceiptRoller());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("partitions: the cluster has 4, not 5"),
            std::string::npos)
      << refused.status().message();

  Result<Profile> invoices = Profile::FromJson(test_util::kInvoiceProfile);
  ASSERT_TRUE(invoices.ok());
  refused = InitCluster(cluster_, options_, *invoices);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("profile: the cluster folds with profile"),
            std::string::npos)
      << refused.status().message();

  // Nothing changed.
  Result<ClusterLayout> read = ReadClusterLayout(cluster_);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->partitions, 4);
  EXPECT_EQ(read->profile_fingerprint, Profile::ReceiptRoller().Fingerprint());
}

TEST_F(ClusterInitTest, CommandInitsPrintsTheLayoutAndRefusesAChange) {
  test_util::TempDir scratch("cluster-cli");
  const std::string urls = nats_.Urls();
  test_util::CliResult r = test_util::RunCli(EVENTFOLD_CLI,
                                             {"cluster", "init", "--cluster", urls, "--stream",
                                              "clitest", "--partitions", "3", "--replicas", "3"},
                                             scratch.path() + "/a");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(R"("stream":"clitest","created":true,"partitions":3,"replicas":3)"),
            std::string::npos)
      << r.out;

  r = test_util::RunCli(EVENTFOLD_CLI,
                        {"cluster", "init", "--cluster", urls, "--stream", "clitest",
                         "--partitions", "3", "--replicas", "3"},
                        scratch.path() + "/b");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(R"("created":false)"), std::string::npos) << r.out;

  r = test_util::RunCli(
      EVENTFOLD_CLI,
      {"cluster", "init", "--cluster", urls, "--stream", "clitest", "--partitions", "8"},
      scratch.path() + "/c");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("partitions: the cluster has 3, not 8"), std::string::npos) << r.err;

  // Status of the fresh cluster: every partition, nothing owned or stored.
  r = test_util::RunCli(EVENTFOLD_CLI,
                        {"cluster", "status", "--cluster", urls, "--stream", "clitest"},
                        scratch.path() + "/s");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(
      r.out.find(R"({"stream":"clitest","partitions":[{"partition":0,"owner":"","standbys":[],)"
                 R"("messages":0,"acked":0,"lag":0},{"partition":1,)"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(R"({"partition":2,)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(R"({"partition":3,)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("workers":[],"refused":0,"replicas":3)"), std::string::npos) << r.out;

  r = test_util::RunCli(EVENTFOLD_CLI, {"cluster", "init", "--cluster", "127.0.0.1:4222"},
                        scratch.path() + "/d");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cluster: \"127.0.0.1:4222\" is not a nats://host:port URL"),
            std::string::npos)
      << r.err;
}

TEST_F(ClusterInitTest, UnreachableClusterIsUnavailableWithinTheTimeout) {
  nats_.Stop();
  ClusterOptions gone = cluster_;
  gone.timeout_ms = 1000;
  const auto start = std::chrono::steady_clock::now();
  Result<ClusterLayout> r = InitCluster(gone, options_, Profile::ReceiptRoller());
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnavailable) << r.status().ToString();
  // Generous bound for a busy machine; without a timeout it would hang.
  EXPECT_LT(took, std::chrono::seconds(30));
}

// A cluster whose third node has not joined yet answers requests (two of
// three nodes elect a meta leader) but cannot place three replicas. Init
// without a settle time reports that as kUnavailable; with one, it keeps
// trying until the node joins and then succeeds.
TEST(ClusterInitSettleTest, InitWaitsForAFormingClusterToPlaceItsReplicas) {
  NatsCluster nats;
  ASSERT_EQ(nats.Start(std::chrono::seconds(60), /*launch=*/2), "");
  ClusterOptions cluster;
  cluster.urls = {nats.Url(0), nats.Url(1)};
  cluster.stream = "settle";
  ClusterInitOptions options;
  options.partitions = 2;
  options.replicas = 3;
  options.settle_timeout_ms = 0;
  Result<ClusterLayout> early = InitCluster(cluster, options, Profile::ReceiptRoller());
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), Status::Code::kUnavailable) << early.status().ToString();
  EXPECT_NE(early.status().message().find("3 replicas cannot be placed: fewer JetStream nodes "
                                          "than --replicas are up"),
            std::string::npos)
      << early.status().ToString();

  options.settle_timeout_ms = 120000;
  Result<ClusterLayout> settled = Status::Unavailable("not run");
  std::thread init([&] { settled = InitCluster(cluster, options, Profile::ReceiptRoller()); });
  const std::string joined = nats.Restart(2);
  init.join();
  ASSERT_EQ(joined, "");
  ASSERT_TRUE(settled.ok()) << settled.status().ToString() << "\n" << nats.LogTails();
  EXPECT_EQ(settled->replicas, 3);
  EXPECT_EQ(settled->partitions, 2);
}

TEST(ClusterInitSettleTest, ANegativeSettleTimeoutIsRefused) {
  ClusterOptions cluster;
  cluster.urls = {"nats://127.0.0.1:1"};
  ClusterInitOptions options;
  options.settle_timeout_ms = -1;
  Result<ClusterLayout> r = InitCluster(cluster, options, Profile::ReceiptRoller());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("settle timeout"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace eventfold
