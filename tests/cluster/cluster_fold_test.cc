// Cluster mode end to end, in process: signed deliveries through two
// Receivers over cluster sinks, a 3-node JetStream cluster, two FoldWorkers;
// the partition stores must hold exactly the projections one single-node
// store builds from the same deliveries (the equivalence property), and the
// sinks must answer 503 when JetStream is unreachable.

#include <gtest/gtest.h>
#include <nats/nats.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "cluster/consumer_names.h"
#include "cluster/nats_connection.h"
#include "cluster/report_log.h"
#include "core/signature.h"
#include "eventfold/cluster.h"
#include "eventfold/partitioner.h"
#include "eventfold/receiver.h"
#include "tests/cluster/cluster_processes.h"
#include "tests/cluster/nats_cluster.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"
#include "tools/history.h"

namespace eventfold {
namespace {

using test_util::AllProjections;
using test_util::NatsCluster;
using test_util::TempDir;
using test_util::WaitFor;

constexpr const char* kSecret = "cluster-test-secret-0123456789";
constexpr int kPartitions = 4;

class ClusterFoldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(nats_.Start(), "");
    cluster_.urls = {nats_.Url(0), nats_.Url(1), nats_.Url(2)};
    cluster_.stream = "evfold";
    ClusterInitOptions init;
    init.partitions = kPartitions;
    init.replicas = 3;
    init.lease_ttl_ms = LeaseTtlMs();
    Result<ClusterLayout> layout = InitCluster(cluster_, init, Profile::ReceiptRoller());
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  }

  // The lease bucket's TTL: short, so that takeovers are quick.
  virtual int64_t LeaseTtlMs() const { return 3000; }

  std::unique_ptr<IngestSink> Sink(int64_t publish_timeout_ms = 5000, Clock* clock = nullptr) {
    ClusterSinkOptions so;
    so.publish_timeout_ms = publish_timeout_ms;
    so.clock = clock;
    Result<std::unique_ptr<IngestSink>> sink = OpenClusterSink(cluster_, so);
    EXPECT_TRUE(sink.ok()) << sink.status().ToString();
    return sink.ok() ? std::move(*sink) : nullptr;
  }

  static std::unique_ptr<Receiver> MakeReceiver(IngestSink* sink) {
    ReceiverOptions ro;
    ro.secrets = {kSecret};
    Result<std::unique_ptr<Receiver>> r = Receiver::Make(sink, ro);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }

  static Headers Signed(const Delivery& d) {
    Headers h = d.headers;
    const int64_t now = SystemClock()->NowMicros() / 1000000;
    h.emplace_back("X-RR-Signature", SignRr(kSecret, now, d.body));
    return h;
  }

  std::unique_ptr<FoldWorker> Worker(const std::string& dir, const std::string& id,
                                     Clock* clock = nullptr, int standbys = 1) {
    FoldWorkerOptions fo;
    fo.clock = clock;
    fo.standbys = standbys;
    fo.data_dir = dir;
    fo.worker_id = id;
    fo.fetch_batch = 64;
    fo.fetch_wait_ms = 100;
    Result<std::unique_ptr<FoldWorker>> w = FoldWorker::Start(cluster_, fo);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return w.ok() ? std::move(*w) : nullptr;
  }

  // Polls (bounded) until the workers own every partition once between them
  // and every partition's consumers (owner's and standbys') have nothing
  // left; returns the owner
  // (worker index) of each partition.
  std::map<int, int> WaitFolded(const std::vector<FoldWorker*>& workers) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (std::chrono::steady_clock::now() < until) {
      std::map<int, int> owner;
      bool disjoint = true;
      for (size_t w = 0; w < workers.size(); ++w) {
        for (int k : workers[w]->Owned()) disjoint &= owner.emplace(k, static_cast<int>(w)).second;
      }
      bool done = disjoint && owner.size() == static_cast<size_t>(kPartitions);
      // The owners' consumers and the standbys' (`cluster status` counts
      // both in a partition's lag).
      if (done) {
        Result<ClusterStatus> status = ReadClusterStatus(cluster_);
        done = status.ok() && std::all_of(status->partitions.begin(), status->partitions.end(),
                                          [](const PartitionStatus& p) { return p.lag == 0; });
      }
      if (done) return owner;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::string why;
    for (FoldWorker* w : workers) why += " [" + w->LastError() + "]";
    ADD_FAILURE() << "partitions not folded within 90 s:" << why;
    return {};
  }

  // Signed deliveries through one receiver over a cluster sink, each also
  // ingested by a reference store: what the partition stores must equal.
  struct Sender {
    std::unique_ptr<IngestSink> sink;
    std::unique_ptr<Receiver> receiver;
    TempDir ref_dir{"reference"};
    std::unique_ptr<Store> ref;
    std::string RefPath() const { return ref_dir.path() + "/store"; }
  };
  std::unique_ptr<Sender> MakeSender() {
    auto s = std::make_unique<Sender>();
    s->sink = Sink();
    if (!s->sink) return nullptr;
    s->receiver = MakeReceiver(s->sink.get());
    Result<std::unique_ptr<Store>> ref = Store::Open(s->RefPath(), Options{});
    EXPECT_TRUE(ref.ok()) << ref.status().ToString();
    if (!s->receiver || !ref.ok()) return nullptr;
    s->ref = std::move(*ref);
    return s;
  }
  // Sends deliveries [from, to), each answered 200, and ingests them into
  // the reference.
  static void Send(Sender* s, const std::vector<Delivery>& deliveries, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      const Delivery& d = deliveries[i];
      EXPECT_EQ(s->receiver->Handle("POST", "/", Signed(d), d.body).status, 200);
      (void)s->ref->Ingest(d);
    }
  }
  // Every projection of the partition stores DIR/p0 .. DIR/p<kPartitions-1>.
  static std::map<std::pair<std::string, std::string>, Projection> MergedProjections(
      const std::string& dir) {
    std::map<std::pair<std::string, std::string>, Projection> merged;
    for (int k = 0; k < kPartitions; ++k) {
      Options o;
      o.create_if_missing = false;
      Result<std::unique_ptr<Store>> part = Store::Open(dir + "/p" + std::to_string(k), o);
      EXPECT_TRUE(part.ok()) << part.status().ToString();
      if (!part.ok()) continue;
      for (auto& [key, p] : AllProjections(part->get())) merged.emplace(key, p);
    }
    return merged;
  }
  // The test's own JetStream context, beside the workers'.
  struct TestJs {
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    TestJs() = default;
    TestJs(const TestJs&) = delete;
    TestJs& operator=(const TestJs&) = delete;
    ~TestJs() {
      jsCtx_Destroy(js);
      natsConnection_Destroy(nc);
    }
  };
  // Connects `*t` to the cluster; `*last` is the stream's last sequence.
  ::testing::AssertionResult ConnectJs(TestJs* t, uint64_t* last) {
    if (natsConnection_ConnectTo(&t->nc, nats_.Urls().c_str()) != NATS_OK) {
      return ::testing::AssertionFailure() << "connecting to " << nats_.Urls();
    }
    if (natsConnection_JetStream(&t->js, t->nc, nullptr) != NATS_OK) {
      return ::testing::AssertionFailure() << "a JetStream context";
    }
    jsStreamInfo* si = nullptr;
    if (js_GetStreamInfo(&si, t->js, cluster_.stream.c_str(), nullptr, nullptr) != NATS_OK) {
      return ::testing::AssertionFailure() << "reading stream " << cluster_.stream;
    }
    *last = si->State.LastSeq;
    jsStreamInfo_Destroy(si);
    return ::testing::AssertionSuccess();
  }
  // The test's own context and the lease bucket through it.
  struct TestLeases {
    TestJs t;
    std::unique_ptr<cluster::KvBucket> bucket;  // after `t`: destroyed first
  };
  ::testing::AssertionResult OpenLeases(TestLeases* l) {
    uint64_t last = 0;
    if (::testing::AssertionResult connected = ConnectJs(&l->t, &last); !connected) {
      return connected;
    }
    kvStore* kv = nullptr;
    if (js_KeyValue(&kv, l->t.js, (cluster_.stream + "_leases").c_str()) != NATS_OK) {
      return ::testing::AssertionFailure() << "opening bucket " << cluster_.stream << "_leases";
    }
    l->bucket = std::make_unique<cluster::KvBucket>(kv);
    return ::testing::AssertionSuccess();
  }
  // 40 receipts and 10 products, no malformed body.
  static sim::History SmallHistory(uint64_t seed) {
    sim::HistoryOptions ho;
    ho.seed = seed;
    ho.receipts = 40;
    ho.products = 10;
    ho.malformed = 0;
    ho.target_body_bytes = 200;
    return sim::GenerateHistory(ho);
  }

  NatsCluster nats_;
  ClusterOptions cluster_;
};

TEST_F(ClusterFoldTest, TwoReceiversTwoWorkersEqualOneStore) {
  const uint64_t seed = test_util::TestSeed("TwoReceiversTwoWorkersEqualOneStore", 1010);
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 60;
  ho.products = 20;
  ho.target_body_bytes = 200;
  sim::History history = sim::GenerateHistory(ho);
  sim::Shuffle(&history.deliveries, seed + 1);

  std::unique_ptr<IngestSink> sinks[2] = {Sink(), Sink()};
  ASSERT_TRUE(sinks[0] && sinks[1]);
  std::unique_ptr<Receiver> receivers[2] = {MakeReceiver(sinks[0].get()),
                                            MakeReceiver(sinks[1].get())};
  TempDir dirs[2] = {TempDir("worker-a"), TempDir("worker-b")};
  std::unique_ptr<FoldWorker> workers[2] = {Worker(dirs[0].path(), "a"),
                                            Worker(dirs[1].path(), "b")};
  ASSERT_TRUE(workers[0] && workers[1]);

  // The reference: one store fed the same deliveries in the same order.
  TempDir ref_dir("reference");
  Result<std::unique_ptr<Store>> ref = Store::Open(ref_dir.path() + "/store", Options{});
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  size_t accepted = 0, invalid = 0;
  for (size_t i = 0; i < history.deliveries.size(); ++i) {
    const Delivery& d = history.deliveries[i];
    HttpResponse r = receivers[i % 2]->Handle("POST", "/", Signed(d), d.body);
    const IngestResult expected = (*ref)->Ingest(d);
    if (expected.outcome == Outcome::kInvalid) {
      // Refused the same way, before anything reaches JetStream.
      EXPECT_EQ(r.status, 400) << r.body;
      ++invalid;
    } else {
      // Accepted, duplicate and conflict are all "stored in the log" here:
      // the partition's fold decides, as the reference did.
      EXPECT_EQ(r.status, 200) << r.body;
      ++accepted;
    }
  }
  EXPECT_EQ(invalid, history.malformed);

  FoldWorker* raw[2] = {workers[0].get(), workers[1].get()};
  std::map<int, int> owner = WaitFolded({raw[0], raw[1]});
  ASSERT_EQ(owner.size(), static_cast<size_t>(kPartitions));
  // Both workers took a share.
  EXPECT_FALSE(workers[0]->Owned().empty());
  EXPECT_FALSE(workers[1]->Owned().empty());
  // `cluster status` agrees: every partition owned, nothing left to fold,
  // every accepted publish counted once.
  Result<ClusterStatus> status = ReadClusterStatus(cluster_);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->partitions.size(), static_cast<size_t>(kPartitions));
  uint64_t messages = 0;
  for (const PartitionStatus& p : status->partitions) {
    EXPECT_EQ(p.owner, owner[p.partition] == 0 ? "a" : "b") << "partition " << p.partition;
    EXPECT_EQ(p.lag, 0u) << "partition " << p.partition;
    EXPECT_EQ(p.acked, p.messages) << "partition " << p.partition;
    messages += p.messages;
  }
  EXPECT_EQ(messages, accepted);
  EXPECT_EQ(status->workers.size(), 2u);
  EXPECT_EQ(status->refused, invalid);
  for (auto& w : workers) w->Stop();

  // Each partition's current store, opened from its owner's directory.
  Result<Partitioner> partitioner = Partitioner::Make(kPartitions);
  ASSERT_TRUE(partitioner.ok());
  std::map<std::pair<std::string, std::string>, Projection> merged;
  for (const auto& [k, w] : owner) {
    Options o;
    o.create_if_missing = false;
    Result<std::unique_ptr<Store>> part = Store::Open(dirs[w].path() + "/p" + std::to_string(k), o);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    for (auto& [key, p] : AllProjections(part->get())) {
      EXPECT_EQ(partitioner->PartitionOf(EntityRef{p.entity, p.id}), k)
          << p.entity << "/" << p.id << " folded in the wrong partition";
      merged.emplace(key, p);
    }
  }
  std::map<std::pair<std::string, std::string>, Projection> expected = AllProjections(ref->get());
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(merged.size(), expected.size());
  for (const auto& [key, p] : expected) {
    auto it = merged.find(key);
    ASSERT_NE(it, merged.end()) << key.first << "/" << key.second << " missing";
    EXPECT_EQ(it->second.state, p.state) << key.first << "/" << key.second;
    EXPECT_EQ(it->second.fields, p.fields) << key.first << "/" << key.second;
    EXPECT_EQ(it->second.version, p.version) << key.first << "/" << key.second;
    EXPECT_EQ(it->second.applied, p.applied) << key.first << "/" << key.second;
    EXPECT_EQ(it->second.rejected, p.rejected) << key.first << "/" << key.second;
    EXPECT_EQ(it->second.occurred_at, p.occurred_at) << key.first << "/" << key.second;
  }
}

// A worker that stopped renewing its leases but keeps running (its clock
// stands still, as a process stalled between renewals would see it) loses
// every partition to another worker when the leases expire. It goes on
// fetching from its own consumers only: none of the new owner's messages is
// acknowledged by it, so the new owner's stores hold every event.
TEST_F(ClusterFoldTest, AWorkerThatMissedItsLeaseLossTakesNothingFromTheNewOwner) {
  const uint64_t seed = test_util::TestSeed("AWorkerThatMissedItsLeaseLoss", 1011);
  ManualClock frozen(SystemClock()->NowMicros());
  TempDir dirs[2] = {TempDir("stalled"), TempDir("owner")};
  std::unique_ptr<FoldWorker> stalled = Worker(dirs[0].path(), "stalled", &frozen);
  ASSERT_TRUE(stalled);
  ASSERT_TRUE(
      WaitFor([&] { return stalled->Owned().size() == static_cast<size_t>(kPartitions); }, 60))
      << stalled->LastError();
  std::unique_ptr<FoldWorker> owner = Worker(dirs[1].path(), "owner");
  ASSERT_TRUE(owner);
  ASSERT_TRUE(
      WaitFor([&] { return owner->Owned().size() == static_cast<size_t>(kPartitions); }, 60))
      << owner->LastError();
  // The stalled worker has not noticed: it still folds what it thinks it owns.
  EXPECT_EQ(stalled->Owned().size(), static_cast<size_t>(kPartitions));

  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 40;
  ho.products = 10;
  ho.malformed = 0;
  ho.target_body_bytes = 200;
  sim::History history = sim::GenerateHistory(ho);
  std::unique_ptr<IngestSink> sink = Sink();
  ASSERT_TRUE(sink);
  std::unique_ptr<Receiver> receiver = MakeReceiver(sink.get());
  TempDir ref_dir("reference");
  Result<std::unique_ptr<Store>> ref = Store::Open(ref_dir.path() + "/store", Options{});
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (const Delivery& d : history.deliveries) {
    EXPECT_EQ(receiver->Handle("POST", "/", Signed(d), d.body).status, 200);
    (void)(*ref)->Ingest(d);
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        Result<ClusterStatus> st = ReadClusterStatus(cluster_);
        return st.ok() && std::all_of(st->partitions.begin(), st->partitions.end(),
                                      [](const PartitionStatus& p) {
                                        return p.owner == "owner" && p.lag == 0 && p.messages > 0;
                                      });
      },
      60))
      << owner->LastError();
  owner->Stop();
  stalled->Stop();

  const std::map<std::pair<std::string, std::string>, Projection> merged =
      MergedProjections(dirs[1].path());
  EXPECT_EQ(merged, AllProjections(ref->get()));
}

// A lease renewal that timed out on the worker but was applied leaves the
// partition's key at a later revision with the worker's own id, and the
// next renewal, against the revision before, is refused ("wrong last
// sequence"). That is no lost lease. Here the test rewrites the key of
// partition 0 to the worker's id behind its back, as such a renewal
// would: the worker keeps the partition (its consumer, which a worker
// that gives a partition up deletes and creates again, is the same) and
// folds what arrives. Another value written the same way is another
// writer's: partition 1 is given up, which the worker notes plainly and
// does not count as a failure.
TEST_F(ClusterFoldTest, ItsOwnRenewalAppliedAfterATimeoutIsNoLostLease) {
  TempDir dir("worker");
  std::unique_ptr<FoldWorker> worker = Worker(dir.path(), "a", nullptr, /*standbys=*/0);
  ASSERT_TRUE(worker);
  TestLeases test_leases;
  ASSERT_TRUE(OpenLeases(&test_leases));
  cluster::KvBucket& leases = *test_leases.bucket;
  TestJs& t = test_leases.t;
  auto lease = [&](int k) {
    Result<cluster::KvValue> v = cluster::KvGet(leases.get(), cluster::LeaseKey(k));
    return v.ok() ? *v : cluster::KvValue{};
  };
  // Taken, and the lease rewritten from "acquiring:a" to "a".
  ASSERT_TRUE(WaitFor(
      [&] {
        return worker->Owned().size() == static_cast<size_t>(kPartitions) &&
               lease(0).value == "a" && lease(1).value == "a";
      },
      60))
      << worker->LastError();
  const std::string durable = cluster::OwnerDurable(cluster_.stream, 0, "a");
  auto consumer_created = [&] {
    jsConsumerInfo* ci = nullptr;
    if (js_GetConsumerInfo(&ci, t.js, cluster_.stream.c_str(), durable.c_str(), nullptr, nullptr) !=
        NATS_OK) {
      return int64_t{0};
    }
    const int64_t created = ci->Created;
    jsConsumerInfo_Destroy(ci);
    return created;
  };
  const int64_t created = consumer_created();
  ASSERT_NE(created, 0);

  uint64_t landed = 0;
  ASSERT_EQ(kvStore_PutString(&landed, leases.get(), cluster::LeaseKey(0).c_str(), "a"), NATS_OK);
  // Renewed once from the revision the test wrote (the renewal against the
  // one before it counts as done): two lease rounds of 1 s.
  ASSERT_TRUE(WaitFor([&] { return lease(0).revision > landed; }, 30)) << worker->LastError();
  EXPECT_EQ(lease(0).value, "a");
  EXPECT_EQ(worker->LastError().find("given up"), std::string::npos) << worker->LastError();
  EXPECT_EQ(consumer_created(), created)
      << "partition 0 was given up and taken again: " << worker->LastError();
  EXPECT_EQ(worker->Owned().size(), static_cast<size_t>(kPartitions));

  // It goes on folding partition 0 (and the others).
  const sim::History history =
      SmallHistory(test_util::TestSeed("ItsOwnRenewalAppliedAfterATimeout", 1016));
  std::unique_ptr<Sender> sender = MakeSender();
  ASSERT_TRUE(sender);
  Send(sender.get(), history.deliveries, 0, history.deliveries.size());
  ASSERT_EQ(WaitFolded({worker.get()}).size(), static_cast<size_t>(kPartitions));
  EXPECT_EQ(worker->LastError().find("given up"), std::string::npos) << worker->LastError();

  // Another writer's value at a later revision: partition 1 is lost. That
  // is noted plainly (no status code), and it is no failure of the worker.
  uint64_t other = 0;
  ASSERT_EQ(kvStore_PutString(&other, leases.get(), cluster::LeaseKey(1).c_str(), "intruder"),
            NATS_OK);
  const std::string note = "partition 1 given up: renewing its lease: key p.1 at revision ";
  const std::string what = " was rewritten: now \"intruder\" at revision " + std::to_string(other);
  bool failing = false;
  std::vector<std::string> reports;  // every one, not only the latest
  EXPECT_TRUE(WaitFor(
      [&] {
        failing |= worker->Failing();
        for (std::string& r : worker->TakeReports()) reports.push_back(std::move(r));
        return std::any_of(reports.begin(), reports.end(), [&](const std::string& r) {
          return r.starts_with(note) && r.ends_with(what);
        });
      },
      30))
      << worker->LastError();
  EXPECT_FALSE(failing) << worker->LastError();
  EXPECT_FALSE(worker->Failing()) << worker->LastError();
  worker->Stop();
  const std::map<std::pair<std::string, std::string>, Projection> merged =
      MergedProjections(dir.path());
  EXPECT_EQ(merged, AllProjections(sender->ref.get()));
}

// A worker that comes back after another took its partitions marks the
// copies it does not take back stale (here it stopped; one that died
// leaves the same copies): read over both workers' directories, every
// partition is answered once, by its current copy.
TEST_F(ClusterFoldTest, ARestartedWorkerMarksTheCopiesItDoesNotTakeBackStale) {
  const sim::History history =
      SmallHistory(test_util::TestSeed("ARestartedWorkerMarksTheCopies", 1013));
  std::unique_ptr<Sender> sender = MakeSender();
  ASSERT_TRUE(sender);
  // The first half of the history, then the rest.
  const size_t half = history.deliveries.size() / 2;
  auto send = [&](size_t from, size_t to) { Send(sender.get(), history.deliveries, from, to); };
  auto owns = [](const std::unique_ptr<FoldWorker>& w, size_t n) { return w->Owned().size() == n; };

  TempDir dirs[2] = {TempDir("restarted"), TempDir("other")};
  std::unique_ptr<FoldWorker> a = Worker(dirs[0].path(), "a", nullptr, /*standbys=*/0);
  ASSERT_TRUE(a);
  ASSERT_TRUE(WaitFor([&] { return owns(a, kPartitions); }, 60)) << a->LastError();
  send(0, half);
  ASSERT_EQ(WaitFolded({a.get()}).size(), static_cast<size_t>(kPartitions));
  a->Stop();
  a.reset();

  std::unique_ptr<FoldWorker> b = Worker(dirs[1].path(), "b", nullptr, /*standbys=*/0);
  ASSERT_TRUE(b);
  ASSERT_TRUE(WaitFor([&] { return owns(b, kPartitions); }, 60)) << b->LastError();
  send(half, history.deliveries.size());
  ASSERT_EQ(WaitFolded({b.get()}).size(), static_cast<size_t>(kPartitions));

  a = Worker(dirs[0].path(), "a", nullptr, /*standbys=*/0);
  ASSERT_TRUE(a);
  ASSERT_TRUE(WaitFor([&] { return owns(a, kPartitions / 2) && owns(b, kPartitions / 2); }, 60))
      << a->LastError() << " / " << b->LastError();
  std::map<int, int> owner = WaitFolded({a.get(), b.get()});
  ASSERT_EQ(owner.size(), static_cast<size_t>(kPartitions));
  a->Stop();
  b->Stop();
  sender->ref.reset();

  // Each partition has one copy not marked behind: its owner's.
  for (int k = 0; k < kPartitions; ++k) {
    for (int w = 0; w < 2; ++w) {
      const std::string copy = dirs[w].path() + "/p" + std::to_string(k);
      const bool current =
          !std::filesystem::exists(copy + ".stale") && !std::filesystem::exists(copy + ".standby");
      EXPECT_EQ(current, owner[k] == w)
          << copy
          << (current
                  ? " is read as current; partition " + std::to_string(k) + " is the other worker's"
                  : " is marked behind, and it is the partition's owner's");
    }
  }
  // What a reader of the two stopped workers' directories gets.
  TempDir scratch("list");
  std::vector<std::string> listed;
  for (int w = 0; w < 2; ++w) {
    test_util::CliResult cli =
        test_util::RunCli(EVENTFOLD_CLI, {"list", "--data", dirs[w].path()}, scratch.path() + "/l");
    ASSERT_EQ(cli.exit_code, 0) << cli.err;
    for (std::string& line : test_util::Lines(cli.out)) listed.push_back(std::move(line));
  }
  test_util::CliResult expected = test_util::RunCli(
      EVENTFOLD_CLI, {"list", "--data", sender->RefPath()}, scratch.path() + "/r");
  ASSERT_EQ(expected.exit_code, 0) << expected.err;
  std::vector<std::string> want = test_util::Lines(expected.out);
  ASSERT_FALSE(want.empty());
  std::sort(listed.begin(), listed.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(listed, want) << "the two directories' lists are not the single store's";
}

// A partition store that lost writes it had acknowledged (here: each store
// put back as it was before the second half of the history, as a disk that
// lost them would leave it, with the worker's .seq files from after) is
// folded again from the start of the stream: the worker does not resume past
// what was lost, and says so.
TEST_F(ClusterFoldTest, AStoreThatLostAcknowledgedWritesIsFoldedAgainFromTheStream) {
  const sim::History history =
      SmallHistory(test_util::TestSeed("AStoreThatLostAcknowledgedWrites", 1014));
  std::unique_ptr<Sender> sender = MakeSender();
  ASSERT_TRUE(sender);
  const size_t half = history.deliveries.size() / 2;
  namespace fs = std::filesystem;
  TempDir dir("worker"), before("before");
  auto fold = [&](size_t from, size_t to) {
    std::unique_ptr<FoldWorker> w = Worker(dir.path(), "a", nullptr, /*standbys=*/0);
    ASSERT_TRUE(w);
    Send(sender.get(), history.deliveries, from, to);
    ASSERT_EQ(WaitFolded({w.get()}).size(), static_cast<size_t>(kPartitions));
    w->Stop();
  };
  ASSERT_NO_FATAL_FAILURE(fold(0, half));
  for (int k = 0; k < kPartitions; ++k) {
    const std::string p = "/p" + std::to_string(k);
    fs::copy(dir.path() + p, before.path() + p, fs::copy_options::recursive);
  }
  ASSERT_NO_FATAL_FAILURE(fold(half, history.deliveries.size()));
  for (int k = 0; k < kPartitions; ++k) {
    const std::string p = "/p" + std::to_string(k);
    fs::remove_all(dir.path() + p);
    fs::copy(before.path() + p, dir.path() + p, fs::copy_options::recursive);
  }

  std::unique_ptr<FoldWorker> w = Worker(dir.path(), "a", nullptr, /*standbys=*/0);
  ASSERT_TRUE(w);
  ASSERT_EQ(WaitFolded({w.get()}).size(), static_cast<size_t>(kPartitions));
  EXPECT_NE(w->LastError().find("acknowledged writes were lost"), std::string::npos)
      << w->LastError();
  w->Stop();
  const std::map<std::pair<std::string, std::string>, Projection> merged =
      MergedProjections(dir.path());
  EXPECT_EQ(merged, AllProjections(sender->ref.get()))
      << "what the stores lost was not folded again";
}

// A consumer that skips messages the stream holds (nats-server 2.9 does,
// when a replica whose copy of the stream is behind leads the consumer)
// loses nothing: the worker asks the stream leader and folds what was
// skipped. Here the worker's own consumers are replaced behind its back by
// ones that start past the next deliveries: on partitions 0 and 1 past the
// first half of them (a gap before later messages), on 2 and 3 past all of
// them (a skipped tail, the consumer reporting nothing pending).
TEST_F(ClusterFoldTest, MessagesTheConsumerSkipsAreFoldedFromTheStream) {
  const uint64_t seed = test_util::TestSeed("MessagesTheConsumerSkips", 1012);
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 40;
  ho.products = 10;
  ho.malformed = 0;
  ho.conflicts = 0;
  ho.target_body_bytes = 200;
  sim::History history = sim::GenerateHistory(ho);
  const size_t half = history.deliveries.size() / 2;
  std::unique_ptr<Sender> sender = MakeSender();
  ASSERT_TRUE(sender);
  TempDir dir("worker");
  std::unique_ptr<FoldWorker> worker = Worker(dir.path(), "w");
  ASSERT_TRUE(worker);
  Send(sender.get(), history.deliveries, 0, half);
  ASSERT_EQ(WaitFolded({worker.get()}).size(), static_cast<size_t>(kPartitions));

  TestJs t;
  uint64_t last = 0;
  ASSERT_TRUE(ConnectJs(&t, &last));
  jsCtx* js = t.js;
  // The second half is published one by one: it takes the sequences right
  // after `last`.
  const uint64_t rest = history.deliveries.size() - half;
  for (int k = 0; k < kPartitions; ++k) {
    const std::string durable = cluster::OwnerDurable(cluster_.stream, k, "w");
    const std::string subject = PartitionSubject(cluster_.stream, k);
    ASSERT_EQ(js_DeleteConsumer(js, cluster_.stream.c_str(), durable.c_str(), nullptr, nullptr),
              NATS_OK);
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = durable.c_str();
    cc.FilterSubject = subject.c_str();
    cc.AckPolicy = js_AckExplicit;
    cc.DeliverPolicy = js_DeliverByStartSequence;
    cc.OptStartSeq = k < 2 ? last + rest / 2 : last + rest + 1000;
    jsConsumerInfo* ci = nullptr;
    ASSERT_EQ(js_AddConsumer(&ci, js, cluster_.stream.c_str(), &cc, nullptr, nullptr), NATS_OK);
    jsConsumerInfo_Destroy(ci);
  }
  Send(sender.get(), history.deliveries, half, history.deliveries.size());

  // Every partition's .seq reaches the last message of its subject.
  auto caught_up = [&] {
    for (int k = 0; k < kPartitions; ++k) {
      natsMsg* m = nullptr;
      const std::string subject = PartitionSubject(cluster_.stream, k);
      if (js_GetLastMsg(&m, js, cluster_.stream.c_str(), subject.c_str(), nullptr, nullptr) !=
          NATS_OK) {
        return false;
      }
      const uint64_t want = natsMsg_GetSequence(m);
      natsMsg_Destroy(m);
      const std::string seq = test_util::ReadFile(dir.path() + "/p" + std::to_string(k) + ".seq");
      if (std::strtoull(seq.c_str(), nullptr, 10) < want) return false;
    }
    return true;
  };
  EXPECT_TRUE(WaitFor(caught_up, 60)) << worker->LastError();
  worker->Stop();

  const std::map<std::pair<std::string, std::string>, Projection> merged =
      MergedProjections(dir.path());
  EXPECT_EQ(merged, AllProjections(sender->ref.get()));
}

// A consumer that waits for the acknowledgement of a delivery its worker
// never received (nats-server 2.9 loses a redelivery it takes off its queue
// for a pull request that has just expired, and never sends it again) does
// not keep the partition's lag above 0 once the worker has folded the
// message from the stream leader as one the consumer skipped. Here each
// partition's consumer is replaced behind the worker's back by one that
// refuses the worker's batches (max_batch 1) while the test takes its first
// new message and does not acknowledge it; the batches are then allowed
// again. Every partition must settle at lag 0 well within the 30 s ack wait
// after which JetStream would redeliver the taken message.
TEST_F(ClusterFoldTest, AConsumerOwingAnAcknowledgementIsReplacedOnceFolded) {
  const sim::History history =
      SmallHistory(test_util::TestSeed("AConsumerOwingAnAcknowledgement", 1015));
  std::unique_ptr<Sender> sender = MakeSender();
  ASSERT_TRUE(sender);
  const size_t half = history.deliveries.size() / 2;
  TempDir dir("worker");
  std::unique_ptr<FoldWorker> worker = Worker(dir.path(), "w", nullptr, /*standbys=*/0);
  ASSERT_TRUE(worker);
  Send(sender.get(), history.deliveries, 0, half);
  ASSERT_EQ(WaitFolded({worker.get()}).size(), static_cast<size_t>(kPartitions));

  TestJs t;
  uint64_t last = 0;
  ASSERT_TRUE(ConnectJs(&t, &last));
  jsCtx* js = t.js;
  std::vector<std::string> durables, subjects;
  for (int k = 0; k < kPartitions; ++k) {
    durables.push_back(cluster::OwnerDurable(cluster_.stream, k, "w"));
    subjects.push_back(PartitionSubject(cluster_.stream, k));
  }
  // The worker's consumer of partition k, starting after the first half,
  // with pull requests limited to `max_batch` messages (0: no limit).
  auto config = [&](int k, int64_t max_batch) {
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = durables[k].c_str();
    cc.FilterSubject = subjects[k].c_str();
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = int64_t{30} * 1000000000;
    cc.MaxAckPending = 1024;
    cc.MaxWaiting = 512;
    cc.DeliverPolicy = js_DeliverByStartSequence;
    cc.OptStartSeq = last + 1;
    cc.MaxRequestBatch = max_batch;
    return cc;
  };
  for (int k = 0; k < kPartitions; ++k) {
    ASSERT_EQ(js_DeleteConsumer(js, cluster_.stream.c_str(), durables[k].c_str(), nullptr, nullptr),
              NATS_OK);
    jsConsumerConfig cc = config(k, 1);
    jsConsumerInfo* ci = nullptr;
    ASSERT_EQ(js_AddConsumer(&ci, js, cluster_.stream.c_str(), &cc, nullptr, nullptr), NATS_OK);
    jsConsumerInfo_Destroy(ci);
  }
  Send(sender.get(), history.deliveries, half, history.deliveries.size());

  // Each consumer's first new message, delivered to the test and never
  // acknowledged: the consumer waits for its acknowledgement.
  std::vector<natsSubscription*> takers(kPartitions, nullptr);
  int taken_from = 0;
  for (int k = 0; k < kPartitions; ++k) {
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = cluster_.stream.c_str();
    so.Consumer = durables[k].c_str();
    ASSERT_EQ(js_PullSubscribe(&takers[k], js, subjects[k].c_str(), durables[k].c_str(), nullptr,
                               &so, nullptr),
              NATS_OK);
    natsMsgList taken{};
    // A partition the second half did not reach has nothing to take.
    if (natsSubscription_Fetch(&taken, takers[k], 1, 2000, nullptr) == NATS_OK) {
      natsMsgList_Destroy(&taken);
      ++taken_from;
    }
  }
  ASSERT_GT(taken_from, 0);
  for (int k = 0; k < kPartitions; ++k) {
    jsConsumerConfig cc = config(k, 0);
    jsConsumerInfo* ci = nullptr;
    ASSERT_EQ(js_UpdateConsumer(&ci, js, cluster_.stream.c_str(), &cc, nullptr, nullptr), NATS_OK);
    jsConsumerInfo_Destroy(ci);
  }

  const auto settled = [&] {
    Result<ClusterStatus> status = ReadClusterStatus(cluster_);
    return status.ok() &&
           std::all_of(status->partitions.begin(), status->partitions.end(),
                       [](const PartitionStatus& p) { return p.lag == 0 && p.messages > 0; });
  };
  EXPECT_TRUE(WaitFor(settled, 15))
      << "a consumer still waits for an acknowledgement; " << worker->LastError();
  for (natsSubscription* sub : takers) natsSubscription_Destroy(sub);
  worker->Stop();

  const std::map<std::pair<std::string, std::string>, Projection> merged =
      MergedProjections(dir.path());
  EXPECT_EQ(merged, AllProjections(sender->ref.get()));
}

// Two processes given one --worker-id would each take the other's leases,
// consumers and standby keys for their own and fold every partition twice.
// A second worker is refused while the first runs; one whose key another
// process rewrites anyway (a build without the check, a race) halts and
// leaves the partitions to it; a key a killed worker left is taken once it
// stops moving.
TEST_F(ClusterFoldTest, OneWorkerIdIsOneRunningWorker) {
  TempDir first_dir("worker-first"), second_dir("worker-second");
  std::unique_ptr<FoldWorker> first = Worker(first_dir.path(), "dup", nullptr, /*standbys=*/0);
  ASSERT_TRUE(first);
  ASSERT_TRUE(
      WaitFor([&] { return first->Owned().size() == static_cast<size_t>(kPartitions); }, 60))
      << first->LastError();

  FoldWorkerOptions fo;
  fo.data_dir = second_dir.path();
  fo.worker_id = "dup";
  fo.standbys = 0;
  Result<std::unique_ptr<FoldWorker>> second = FoldWorker::Start(cluster_, fo);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kBusy);
  EXPECT_NE(second.status().message().find("--worker-id dup: a running worker uses this id"),
            std::string::npos)
      << second.status().message();
  // The refused one changed nothing of the first's.
  EXPECT_EQ(first->Owned().size(), static_cast<size_t>(kPartitions));
  EXPECT_FALSE(first->Halted());

  // Another process rewrites the first's key: the first halts within a
  // round or two, owns nothing, and deletes none of what the id names.
  TestLeases test_leases;
  ASSERT_TRUE(OpenLeases(&test_leases));
  cluster::KvBucket& leases = *test_leases.bucket;
  TestJs& t = test_leases.t;
  uint64_t rev = 0;
  ASSERT_EQ(kvStore_PutString(&rev, leases.get(), cluster::WorkerKey("dup").c_str(),
                              "dup another-process"),
            NATS_OK);
  ASSERT_TRUE(WaitFor([&] { return first->Halted(); }, 30)) << first->LastError();
  EXPECT_TRUE(first->Owned().empty());
  EXPECT_NE(first->LastError().find("another process announced itself under this id "
                                    "(\"dup another-process\""),
            std::string::npos)
      << first->LastError();
  first->Stop();
  // What is left of a key: its last entry, as the stream leader has it.
  // The bucket's TTL (3 s) may have removed it since its last write; a
  // delete marker or another value would be the halted worker's doing.
  const auto left_of = [&](const std::string& key) -> std::string {
    natsMsg* m = nullptr;
    const natsStatus st =
        js_GetLastMsg(&m, t.js, ("KV_" + cluster_.stream + "_leases").c_str(),
                      ("$KV." + cluster_.stream + "_leases." + key).c_str(), nullptr, nullptr);
    if (st == NATS_NOT_FOUND) return "(expired)";
    if (st != NATS_OK) return std::string("(") + natsStatus_GetText(st) + ")";
    const char* op = nullptr;
    std::string value = natsMsgHeader_Get(m, "KV-Operation", &op) == NATS_OK
                            ? "(deleted)"
                            : std::string(natsMsg_GetData(m), natsMsg_GetDataLength(m));
    natsMsg_Destroy(m);
    return value;
  };
  for (int k = 0; k < kPartitions; ++k) {
    const std::string lease = left_of(cluster::LeaseKey(k));
    EXPECT_TRUE(lease == "dup" || lease == "(expired)") << k << ": " << lease;
    EXPECT_TRUE(std::filesystem::exists(first_dir.path() + "/p" + std::to_string(k) + ".stale"))
        << k;
  }
  const std::string announced = left_of(cluster::WorkerKey("dup"));
  EXPECT_TRUE(announced == "dup another-process" || announced == "(expired)") << announced;
  Result<cluster::KvValue> key = Status::NotFound("");

  // Nobody renews that key now (as after a kill): a new worker "dup" takes
  // it over, and the leases the id holds with it.
  std::unique_ptr<FoldWorker> next = Worker(second_dir.path(), "dup", nullptr, /*standbys=*/0);
  ASSERT_TRUE(next);
  key = cluster::KvGet(leases.get(), cluster::WorkerKey("dup"));
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_TRUE(key->value.starts_with("dup ") && key->value != "dup another-process") << key->value;
  EXPECT_TRUE(WaitFor([&] { return next->Owned().size() == static_cast<size_t>(kPartitions); }, 60))
      << next->LastError();
  EXPECT_FALSE(next->Halted()) << next->LastError();
  // A stopped worker deletes its key: the id is free at once.
  next->Stop();
  EXPECT_FALSE(cluster::KvGet(leases.get(), cluster::WorkerKey("dup")).ok());
}

// A renewal period of 3 s (the default TTL's) under a lease TTL of 30 s.
// The bucket expires keys on the nats-server's real time while the
// worker's clock is the test's: the long TTL keeps the leases alive
// however long the paused leader's stream takes to answer again on a busy
// machine, and changes nothing the test asks (the retry after a failed
// round is min(period, 500 ms)).
class ClusterFoldLongTtlTest : public ClusterFoldTest {
 protected:
  int64_t LeaseTtlMs() const override { return 30000; }
};

// A lease round JetStream does not answer (here the lease bucket's stream
// leader is paused for about a request timeout; a leader that dies leaves
// the bucket unanswered for the election of the next, 4-9 s in nats-server
// 2.9) is tried again half a second later, not a renewal period later: the
// leases are renewed well within the TTL and no partition changes hands. The worker's clock only
// moves when the test moves it, and the test moves it by the half second
// only: without the retry, no renewal would follow.
TEST_F(ClusterFoldLongTtlTest, AnUnansweredLeaseRoundIsTriedAgainHalfASecondLater) {
  ManualClock clock(SystemClock()->NowMicros());
  ClusterOptions quick = cluster_;
  quick.timeout_ms = 1000;  // a round the paused nodes do not answer fails within a second
  TempDir dir("worker");
  FoldWorkerOptions fo;
  fo.clock = &clock;
  fo.standbys = 0;
  fo.data_dir = dir.path();
  fo.worker_id = "a";
  fo.fetch_batch = 64;
  fo.fetch_wait_ms = 100;
  fo.renew_every_ms = 3000;
  Result<std::unique_ptr<FoldWorker>> started = FoldWorker::Start(quick, fo);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  FoldWorker& worker = **started;
  TestLeases test_leases;
  ASSERT_TRUE(OpenLeases(&test_leases));
  // Each lease's revision, 0 unless it holds "a". Only a lease round
  // renews them (the round that fails below gets no further than the
  // announcement of w.a).
  const auto revisions = [&] {
    std::vector<uint64_t> out;
    for (int k = 0; k < kPartitions; ++k) {
      Result<cluster::KvValue> v = cluster::KvGet(test_leases.bucket->get(), cluster::LeaseKey(k));
      out.push_back(v.ok() && v->value == "a" ? v->revision : 0);
    }
    return out;
  };
  const auto all_after = [&](const std::vector<uint64_t>& before) {
    const std::vector<uint64_t> now = revisions();
    for (int k = 0; k < kPartitions; ++k) {
      if (now[k] <= before[k]) return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        return worker.Owned().size() == static_cast<size_t>(kPartitions) &&
               all_after(std::vector<uint64_t>(kPartitions, 0));
      },
      60))
      << worker.LastError();
  // A round on time renews every lease, just before the outage.
  std::vector<uint64_t> renewed = revisions();
  clock.Advance(3000 * 1000);
  ASSERT_TRUE(WaitFor([&] { return all_after(renewed); }, 30)) << worker.LastError();
  renewed = revisions();

  // The node that leads the bucket's stream, which alone answers its writes.
  const int paused = nats_.StreamLeader("KV_" + cluster_.stream + "_leases");
  ASSERT_GE(paused, 0) << nats_.LogTails();

  std::vector<std::string> reports;
  nats_.Pause(paused);
  clock.Advance(3000 * 1000);
  const bool failed = WaitFor(
      [&] {
        for (std::string& r : worker.TakeReports()) reports.push_back(std::move(r));
        return std::any_of(reports.begin(), reports.end(), [](const std::string& r) {
          return r.find("announcing worker a") != std::string::npos;
        });
      },
      30);
  nats_.Resume(paused);
  ASSERT_TRUE(failed) << "the round on paused nodes did not fail: " << worker.LastError();
  ASSERT_EQ(nats_.WaitReady(), "");
  ASSERT_TRUE(WaitFor(
      [&] {
        return cluster::KvGetFromLeader(test_leases.t.js, test_leases.bucket->get(),
                                        cluster::LeaseKey(0))
            .ok();
      },
      30));

  // The bucket's stream may still be choosing its leader for the worker's
  // first retry: each failed one is tried again half a second later. Four
  // tries stay within the 3 s period, when the next round would come anyway.
  bool renewed_again = false;
  for (int retry = 0; retry < 4 && !renewed_again; ++retry) {
    clock.Advance(500 * 1000);
    renewed_again = WaitFor([&] { return all_after(renewed); }, 10);
  }
  EXPECT_TRUE(renewed_again) << "no lease round on the half-second retries after the failed one: "
                             << worker.LastError();
  for (std::string& r : worker.TakeReports()) reports.push_back(std::move(r));
  for (const std::string& r : reports) EXPECT_EQ(r.find("given up"), std::string::npos) << r;
  EXPECT_EQ(worker.Owned().size(), static_cast<size_t>(kPartitions));
  worker.Stop();
}

// A worker id names JetStream consumers and lease keys: one those names
// cannot hold is refused before anything is created.
TEST(FoldWorkerOptionsTest, AWorkerIdWithADotOrSpaceIsRefused) {
  ClusterOptions cluster;
  cluster.urls = {"nats://127.0.0.1:1"};
  TempDir dir("worker-id");
  for (const char* id : {"a.b", "a b", "a>", "a*"}) {
    FoldWorkerOptions fo;
    fo.data_dir = dir.path();
    fo.worker_id = id;
    Result<std::unique_ptr<FoldWorker>> w = FoldWorker::Start(cluster, fo);
    ASSERT_FALSE(w.ok()) << id;
    EXPECT_EQ(w.status().code(), Status::Code::kInvalidArgument) << id;
    EXPECT_NE(w.status().message().find("--worker-id"), std::string::npos) << w.status().message();
  }
}

// The partition store records when the receiver took a delivery (the
// Eventfold-Received-At header it published), not when a worker folded it.
TEST_F(ClusterFoldTest, PartitionStoresKeepTheReceiversTime) {
  const int64_t received_at = 1764000000123456;  // the receiver's clock, far from the worker's
  ManualClock receiver_clock(received_at);
  std::unique_ptr<IngestSink> sink = Sink(5000, &receiver_clock);
  ASSERT_TRUE(sink);
  sim::HistoryOptions ho;
  ho.seed = 7;
  ho.receipts = 3;
  ho.products = 1;
  ho.malformed = 0;
  ho.conflicts = 0;
  sim::History history = sim::GenerateHistory(ho);
  for (const Delivery& d : history.deliveries) {
    ASSERT_EQ(sink->Ingest(d).outcome, Outcome::kAccepted);
  }
  TempDir dir("worker");
  std::unique_ptr<FoldWorker> worker = Worker(dir.path(), "a");
  ASSERT_TRUE(worker);
  std::map<int, int> owner = WaitFolded({worker.get()});
  worker->Stop();
  size_t logged = 0;
  for (const auto& [k, w] : owner) {
    Options o;
    o.create_if_missing = false;
    Result<std::unique_ptr<Store>> part = Store::Open(dir.path() + "/p" + std::to_string(k), o);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    for (const auto& [key, p] : AllProjections(part->get())) {
      Result<EntityLog> log = (*part)->Log(p.entity, p.id);
      ASSERT_TRUE(log.ok()) << log.status().ToString();
      for (const LoggedEvent& e : log->fold_order) {
        EXPECT_EQ(e.received_at, received_at) << e.event.event_id;
        ++logged;
      }
    }
  }
  EXPECT_GT(logged, 0u);
}

// The payload sizes of the records (one a write batch) in the LevelDB
// write-ahead logs of store directory `dir`, by LevelDB's doc/log_format.md:
// 32 KiB blocks of fragments, each after a 7-byte header (checksum, length
// little-endian, type: 1 whole, 2 first, 3 middle, 4 last).
std::vector<uint64_t> LogRecordSizes(const std::string& dir) {
  std::vector<uint64_t> sizes;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".log") continue;
    const std::string log = test_util::ReadFile(e.path().string());
    constexpr size_t kBlock = 32768, kHeader = 7;
    uint64_t record = 0;
    size_t pos = 0;
    while (pos + kHeader <= log.size()) {
      const size_t left = kBlock - pos % kBlock;
      if (left < kHeader) {  // the block's zero trailer
        pos += left;
        continue;
      }
      const auto* h = reinterpret_cast<const unsigned char*>(log.data() + pos);
      const size_t length = h[4] | (size_t{h[5]} << 8);
      const int type = h[6];
      if (type < 1 || type > 4) break;
      pos += kHeader + length;
      record += length;
      if (type == 1 || type == 4) {
        sizes.push_back(record);
        record = 0;
      }
    }
  }
  return sizes;
}

// Large bodies end a fetch by their bytes (FoldWorkerOptions::fetch_max_bytes),
// not only at fetch_batch messages: each partition's messages, all waiting
// when the worker starts, would otherwise come as one batch and one LevelDB
// write of every body. Here 2 MiB (twice the servers' default max_payload,
// the least the worker takes) against 4-5 MB a partition.
TEST_F(ClusterFoldTest, AFetchOfLargeBodiesEndsAtItsByteBound) {
  std::unique_ptr<IngestSink> sink = Sink();
  ASSERT_TRUE(sink);
  const std::string note(400 * 1000, 'n');
  std::map<int, uint64_t> partition_bytes;
  Result<Partitioner> partitioner = Partitioner::Make(kPartitions);
  ASSERT_TRUE(partitioner.ok()) << partitioner.status().ToString();
  constexpr int kEvents = 48;
  for (int i = 0; i < kEvents; ++i) {
    const std::string n = std::to_string(i);
    Delivery d{{},
               R"({"event_id":"evt_big_)" + n +
                   R"(","type":"receipt.issued","occurred_at":"2026-11-29T10:00:00Z",)" +
                   R"("data":{"receipt_id":"rcp_big_)" + n + R"(","amount":1,"note":")" + note +
                   "\"}}"};
    ASSERT_EQ(sink->Ingest(d).outcome, Outcome::kAccepted);
    partition_bytes[partitioner->PartitionOf(EntityRef{"receipt", "rcp_big_" + n})] +=
        d.body.size();
  }
  constexpr uint64_t kBound = 2 << 20;
  ASSERT_GT(std::max_element(partition_bytes.begin(), partition_bytes.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; })
                ->second,
            kBound + (kBound / 4))
      << "no partition holds more than a fetch";

  TempDir dir("worker");
  FoldWorkerOptions fo;
  fo.data_dir = dir.path();
  fo.worker_id = "a";
  fo.fetch_batch = 64;
  fo.fetch_max_bytes = kBound;
  fo.fetch_wait_ms = 100;
  Result<std::unique_ptr<FoldWorker>> worker = FoldWorker::Start(cluster_, fo);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  WaitFolded({worker->get()});
  (*worker)->Stop();
  // Read before any open of the stores, which moves their logs into tables.
  size_t records = 0;
  for (int k = 0; k < kPartitions; ++k) {
    for (uint64_t size : LogRecordSizes(dir.path() + "/p" + std::to_string(k))) {
      // A write holds its bodies, their keys and the other records of an
      // ingest: a few hundred bytes an event beyond the body.
      EXPECT_LE(size, kBound + (kBound / 4)) << "partition " << k;
      ++records;
    }
  }
  EXPECT_GE(records, static_cast<size_t>(kPartitions));
  EXPECT_EQ(MergedProjections(dir.path()).size(), static_cast<size_t>(kEvents));
}

// `eventfold refused --cluster` lists what receivers refused (400, 401),
// oldest first, in the single-store NDJSON shape, without credentials.
TEST_F(ClusterFoldTest, RefusedStreamIsListedOldestFirst) {
  std::unique_ptr<IngestSink> sink = Sink();
  ASSERT_TRUE(sink);
  std::unique_ptr<Receiver> receiver = MakeReceiver(sink.get());
  ASSERT_TRUE(receiver);
  const Delivery malformed{{}, R"({"id":"evt_bad","type":"receipt.issued"})"};
  EXPECT_EQ(receiver->Handle("POST", "/", Signed(malformed), malformed.body).status, 400);
  // Kept are the headers a store's quarantine keeps, in their order.
  const Delivery unsigned_delivery{{{"X-RR-Signature", "t=1,v1=00"},
                                    {"Accept", "*/*"},
                                    {"User-Agent", "rr/1"},
                                    {"X-Custom-Key", "k"},
                                    {"Content-Type", "application/json"}},
                                   R"({"id":"evt_x","type":"receipt.issued"})"};
  EXPECT_EQ(receiver->Handle("POST", "/", unsigned_delivery.headers, unsigned_delivery.body).status,
            401);

  std::vector<RefusedDelivery> listed;
  ASSERT_TRUE(ListClusterRefused(cluster_, [&](const RefusedDelivery& r) {
                listed.push_back(r);
                return true;
              }).ok());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].status, 400);
  EXPECT_EQ(listed[0].outcome, Outcome::kInvalid);
  EXPECT_FALSE(listed[0].reason.empty());
  EXPECT_EQ(listed[0].body_prefix, malformed.body);
  EXPECT_EQ(listed[0].body_bytes, malformed.body.size());
  EXPECT_EQ(listed[1].status, 401);
  EXPECT_EQ(listed[1].outcome, Outcome::kUnauthorized);
  EXPECT_EQ(listed[1].headers,
            (Headers{{"User-Agent", "rr/1"}, {"Content-Type", "application/json"}}));
  EXPECT_LT(listed[0].seq, listed[1].seq);
  EXPECT_GT(listed[0].received_at, 0);

  TempDir scratch("refused-cli");
  test_util::CliResult cli = test_util::RunCli(
      EVENTFOLD_CLI, {"refused", "--cluster", nats_.Urls(), "--stream", cluster_.stream},
      scratch.path() + "/cli");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  const std::vector<std::string> lines = test_util::Lines(cli.out);
  ASSERT_EQ(lines.size(), 2u) << cli.out;
  EXPECT_EQ(lines[0].rfind("{\"seq\":" + std::to_string(listed[0].seq) + ",\"received_at\":\"", 0),
            0u)
      << lines[0];
  EXPECT_NE(lines[0].find("\"status\":400,\"outcome\":\"invalid\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("\"status\":401,\"outcome\":\"unauthorized\""), std::string::npos)
      << lines[1];
}

// A receiver answers 503 within its deadline while JetStream is down and
// 200 once it is back; a worker says it is failing meanwhile, and that it
// is not once it folds again.
TEST_F(ClusterFoldTest, UnreachableJetStreamIs503WithinTheDeadlineAndRecovers) {
  std::unique_ptr<IngestSink> sink = Sink(/*publish_timeout_ms=*/1000);
  ASSERT_TRUE(sink);
  std::unique_ptr<Receiver> receiver = MakeReceiver(sink.get());
  TempDir dir("unreachable");
  std::unique_ptr<FoldWorker> worker = Worker(dir.path(), "w1");
  ASSERT_TRUE(worker);
  ASSERT_TRUE(WaitFor([&] { return worker->Owned().size() == size_t{kPartitions}; }, 60))
      << worker->LastError();
  EXPECT_FALSE(worker->Failing()) << worker->LastError();
  sim::HistoryOptions ho;
  ho.receipts = 3;
  ho.products = 1;
  ho.malformed = 0;
  ho.conflicts = 0;
  sim::History history = sim::GenerateHistory(ho);
  const Delivery& d = history.deliveries.front();
  ASSERT_EQ(receiver->Handle("POST", "/", Signed(d), d.body).status, 200);

  nats_.Stop();
  const auto start = std::chrono::steady_clock::now();
  HttpResponse down = receiver->Handle("POST", "/", Signed(d), d.body);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(down.status, 503) << down.body;
  // The deadline (1 s) plus slack for a busy machine.
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_TRUE(WaitFor([&] { return worker->Failing(); }, 60)) << worker->LastError();
  EXPECT_NE(worker->LastError(), "");

  // Same ports, same store directories: the cluster comes back, and the
  // receiver reconnects by itself.
  for (int i = 0; i < NatsCluster::kNodes; ++i) ASSERT_EQ(nats_.Restart(i), "");
  ASSERT_EQ(nats_.WaitReady(), "");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    status = receiver->Handle("POST", "/", Signed(d), d.body).status;
    if (status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(WaitFor([&] { return !worker->Failing(); }, 60)) << worker->LastError();
  WaitFolded({worker.get()});
  // Its log: while JetStream was down every partition's fetch failed every
  // round, yet each failure is reported once until the recovery, which is
  // reported.
  const std::vector<std::string> reports = worker->TakeReports();
  std::set<std::string> since_recovery;
  bool recovered = false;
  for (const std::string& r : reports) {
    if (r == cluster::kFoldingAgain) {
      since_recovery.clear();
      recovered = true;
      continue;
    }
    EXPECT_TRUE(since_recovery.insert(r).second) << "reported twice while failing: " << r;
  }
  EXPECT_TRUE(recovered) << "no recovery among " << reports.size() << " reports";
}

}  // namespace
}  // namespace eventfold
