// Subscriptions on the partition owners: two fold worker processes that
// embed a subscription (subscribing_worker.cc) fold a signed load sent
// through `eventfold serve --cluster`; worker a is SIGKILLed mid-load and b
// takes its partitions over, restoring them by replay. Every change of b's
// partition stores is handled, each entity's changes in feed order, every
// entity a handled is handled again by b, and the last state handled for
// each entity is its state in one store fed the same deliveries.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
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

constexpr const char* kSecret = "cluster-subscription-secret-0123456";
constexpr int kPartitions = 4;

// One line of a subscribing worker's handled file.
struct Handled {
  int partition = 0;
  uint64_t seq = 0;
  std::string entity, id, state;
  std::vector<std::string> event_ids;
};

std::vector<Handled> ReadHandled(const std::string& path) {
  std::vector<Handled> out;
  for (const std::string& line : test_util::Lines(test_util::ReadFile(path))) {
    std::istringstream in(line);
    Handled h;
    std::string ids;
    in >> h.partition >> h.seq >> h.entity >> h.id >> h.state >> ids;
    std::istringstream split(ids);
    for (std::string id; std::getline(split, id, ',');) h.event_ids.push_back(id);
    out.push_back(std::move(h));
  }
  return out;
}

// Each entity's changes reach the handler in feed order: within one
// worker's run on a partition, an entity's seqs only grow.
void ExpectPerEntityOrder(const std::vector<Handled>& handled, const std::string& worker) {
  std::map<std::tuple<int, std::string, std::string>, uint64_t> last;
  for (const Handled& h : handled) {
    uint64_t& prev = last[{h.partition, h.entity, h.id}];
    EXPECT_LT(prev, h.seq) << worker << ": " << h.entity << "/" << h.id << " in partition "
                           << h.partition;
    prev = h.seq;
  }
}

TEST(ClusterSubscriptionTest, KilledOwnerHandsOverAndEveryChangeIsHandledInOrder) {
  const uint64_t seed = test_util::TestSeed("ClusterSubscription", 1010);
  ProcessCluster p("cluster-sub", kSecret);
  ASSERT_EQ(p.Start(kPartitions), "");
  const ClusterOptions& cluster = p.cluster;
  const std::string& urls = p.urls;
  const std::string& dir = p.dir();

  auto worker = [&](const std::string& id) {
    return std::make_unique<Child>(
        std::vector<std::string>{urls, dir + "/" + id, id, dir + "/" + id + ".handled",
                                 dir + "/" + id + ".status"},
        dir + "/" + id + ".log", SUBSCRIBING_WORKER);
  };
  std::unique_ptr<Child> a = worker("a"), b = worker("b");
  ASSERT_TRUE(a->started() && b->started());

  std::vector<sim::Outgoing> first, second;
  const sim::History history = test_util::ProcessHistory(seed, 60, 15, 1, 2, &first, &second);
  sim::SenderOptions so;
  so.port = p.serve_port;
  so.secret = kSecret;
  so.connections = 4;
  so.time_scale = 1e-4;
  so.seed = seed;

  EXPECT_EQ(sim::Send(first, so).dead_letters, 0u);
  // Mid-load, once a has handled something: b must take a's partitions.
  ASSERT_TRUE(WaitFor([&] { return !ReadHandled(dir + "/a.handled").empty(); }, 60)) << a->Log();
  a->Signal(SIGKILL);
  EXPECT_EQ(sim::Send(second, so).dead_letters, 0u);

  std::map<int, std::string> owners;
  ASSERT_TRUE(WaitFor(
      [&] {
        return test_util::Settled(cluster, &owners) &&
               test_util::ReadFile(dir + "/b.status") == "owned=0,1,2,3 backlog=0\n";
      },
      120))
      << b->Log() << test_util::ReadFile(dir + "/b.status");
  b->Signal(SIGTERM);
  p.serve->Signal(SIGTERM);

  TempDir ref_dir("reference");
  const std::string ref = ref_dir.path() + "/store";
  test_util::ExpectExactAgainstReference(dir, owners, history.deliveries, ref);

  const std::vector<Handled> by_a = ReadHandled(dir + "/a.handled");
  const std::vector<Handled> by_b = ReadHandled(dir + "/b.handled");
  ExpectPerEntityOrder(by_a, "a");
  ExpectPerEntityOrder(by_b, "b");

  // Nothing missing: every change in b's partition stores was handled by b,
  // as it is in the feed.
  std::map<std::pair<int, uint64_t>, const Handled*> b_seen;
  for (const Handled& h : by_b) b_seen[{h.partition, h.seq}] = &h;
  size_t changes = 0;
  for (int k = 0; k < kPartitions; ++k) {
    Options o;
    o.create_if_missing = false;
    Result<std::unique_ptr<Store>> part = Store::Open(dir + "/b/p" + std::to_string(k), o);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    std::vector<Change> feed;
    ASSERT_TRUE((*part)->feed().Read(0, 1 << 20, AppendTo<Change>(&feed)).ok());
    for (const Change& c : feed) {
      ++changes;
      auto it = b_seen.find({k, c.seq});
      ASSERT_NE(it, b_seen.end()) << "partition " << k << " change " << c.seq << " not handled";
      EXPECT_EQ(it->second->entity, c.entity);
      EXPECT_EQ(it->second->id, c.id);
      EXPECT_EQ(it->second->state, c.state);
      EXPECT_EQ(it->second->event_ids, c.event_ids);
    }
  }
  EXPECT_EQ(b_seen.size(), changes) << "b handled changes its stores do not have";

  // Across the failover: every entity a handled is handled by b too, and the
  // last state handled for each entity is its state in the reference store;
  // the events its handled changes name are all its events.
  std::map<std::pair<std::string, std::string>, const Handled*> b_last;
  std::map<std::pair<std::string, std::string>, std::set<std::string>> b_events;
  for (const Handled& h : by_b) {
    b_last[{h.entity, h.id}] = &h;
    b_events[{h.entity, h.id}].insert(h.event_ids.begin(), h.event_ids.end());
  }
  ASSERT_FALSE(by_a.empty());
  for (const Handled& h : by_a) {
    EXPECT_TRUE(b_last.count({h.entity, h.id})) << h.entity << "/" << h.id << " lost in failover";
  }
  Options ro;
  ro.create_if_missing = false;
  Result<std::unique_ptr<Store>> reference = Store::Open(ref, ro);
  ASSERT_TRUE(reference.ok());
  size_t entities = 0;
  for (const auto& [key, p] : test_util::AllProjections(reference->get())) {
    ++entities;
    auto it = b_last.find(key);
    ASSERT_NE(it, b_last.end()) << key.first << "/" << key.second << " never handled";
    EXPECT_EQ(it->second->state, p.state) << key.first << "/" << key.second;
    Result<EntityLog> log = (*reference)->Log(key.first, key.second);
    ASSERT_TRUE(log.ok());
    for (const LoggedEvent& e : log->fold_order) {
      EXPECT_TRUE(b_events[key].count(e.event.event_id))
          << key.first << "/" << key.second << ": event " << e.event.event_id << " in no change";
    }
  }
  EXPECT_EQ(b_last.size(), entities);

  // The read commands answer over b's partition stores, naming partitions.
  auto cli = [&](const std::vector<std::string>& args) {
    return test_util::RunCli(EVENTFOLD_CLI, args, dir + "/cli");
  };
  test_util::CliResult subs = cli({"subscriptions", "--data", dir + "/b"});
  ASSERT_EQ(subs.exit_code, 0) << subs.err;
  const std::vector<std::string> sub_lines = test_util::Lines(subs.out);
  ASSERT_EQ(sub_lines.size(), static_cast<size_t>(kPartitions)) << subs.out;
  for (int k = 0; k < kPartitions; ++k) {
    const std::string& line = sub_lines[static_cast<size_t>(k)];
    EXPECT_EQ(line.rfind("{\"partition\":" + std::to_string(k) + ",\"name\":\"counter\"", 0), 0u)
        << line;
    EXPECT_NE(line.find("\"lag_changes\":0,"), std::string::npos) << line;
  }
  test_util::CliResult feed = cli({"feed", "--data", dir + "/b"});
  ASSERT_EQ(feed.exit_code, 0) << feed.err;
  const std::vector<std::string> feed_lines = test_util::Lines(feed.out);
  EXPECT_EQ(feed_lines.size(), changes);
  ASSERT_FALSE(feed_lines.empty());
  EXPECT_EQ(feed_lines.front().rfind("{\"partition\":0,\"seq\":1,", 0), 0u) << feed_lines.front();
  test_util::CliResult follow = cli({"feed", "--data", dir + "/b", "--follow"});
  EXPECT_EQ(follow.exit_code, 2);
  EXPECT_NE(follow.err.find("fold worker's directory"), std::string::npos) << follow.err;
}

}  // namespace
}  // namespace eventfold
