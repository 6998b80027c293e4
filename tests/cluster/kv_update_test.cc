// cluster::KvUpdate, the revision-checked rewrite of the lease entries,
// against a real 3-node JetStream cluster: what it takes as done (the key
// already says what the update writes, as an earlier update that timed out
// on the client but was applied leaves it), what it reports as a key that
// moved on (rewritten by another writer, expired or deleted), and a leader
// that shows the key from before the caller's last write (not answered).

#include <gtest/gtest.h>
#include <nats/nats.h>

#include <memory>
#include <string>
#include <vector>

#include "cluster/nats_connection.h"
#include "tests/cluster/cluster_processes.h"
#include "tests/cluster/nats_cluster.h"

namespace eventfold::cluster {
namespace {

using test_util::NatsCluster;

class KvUpdateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(nats_.Start(), "");
    Result<std::unique_ptr<NatsConnection>> conn =
        NatsConnection::Open({nats_.Url(0), nats_.Url(1), nats_.Url(2)}, 5000);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(*conn);
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = "kvupdate";
    cfg.History = 1;
    cfg.Replicas = 3;
    kvStore* kv = nullptr;
    // A cluster that has just started answers before every node has joined
    // JetStream, and cannot place three replicas until they have ("no
    // suitable peers for placement"): asked again, as `cluster init` does.
    natsStatus created = NATS_ERR;
    ASSERT_TRUE(test_util::WaitFor(
        [&] { return (created = js_CreateKeyValue(&kv, conn_->js(), &cfg)) == NATS_OK; }, 30))
        << "creating the bucket: " << natsStatus_GetText(created) << " "
        << nats_GetLastError(nullptr);
    kv_ = std::make_unique<KvBucket>(kv);
  }

  // Writes `value` to `key` unconditionally, as another writer (or an
  // earlier update that was applied) would: its revision.
  uint64_t Put(const std::string& key, const std::string& value) {
    uint64_t rev = 0;
    EXPECT_EQ(kvStore_PutString(&rev, kv_->get(), key.c_str(), value.c_str()), NATS_OK);
    return rev;
  }

  // The key as a replica has it once it has applied revision `rev` (the
  // buckets allow direct gets, which any replica answers, possibly from
  // behind); polled for up to 10 s.
  KvValue ReadAtLeast(const std::string& key, uint64_t rev) {
    Result<KvValue> v = Status::NotFound("");
    EXPECT_TRUE(test_util::WaitFor(
        [&] {
          v = KvGet(kv_->get(), key);
          return v.ok() && v->revision >= rev;
        },
        10))
        << key << " never reached revision " << rev;
    return v.ok() ? *v : KvValue{};
  }

  NatsCluster nats_;
  std::unique_ptr<NatsConnection> conn_;
  std::unique_ptr<KvBucket> kv_;
};

TEST_F(KvUpdateTest, RewritesTheKeyAtItsLastRevision) {
  const uint64_t first = Put("p.0", "a");
  Result<uint64_t> rev = KvUpdate(conn_->js(), kv_->get(), "p.0", "a", first);
  ASSERT_TRUE(rev.ok()) << rev.status().ToString();
  EXPECT_GT(*rev, first);
  const KvValue now = ReadAtLeast("p.0", *rev);
  EXPECT_EQ(now.revision, *rev);
  EXPECT_EQ(now.value, "a");
}

// The update of a lease renewal that timed out on the client but was
// applied moved the key on with the worker's own value: the next renewal,
// still against the revision before it, has in effect happened.
TEST_F(KvUpdateTest, TheKeyAlreadyHoldingTheValueAtALaterRevisionIsTheUpdateDone) {
  const uint64_t before = Put("p.0", "a");
  const uint64_t landed = Put("p.0", "a");
  ASSERT_GT(landed, before);
  Result<uint64_t> rev = KvUpdate(conn_->js(), kv_->get(), "p.0", "a", before);
  ASSERT_TRUE(rev.ok()) << rev.status().ToString();
  EXPECT_EQ(*rev, landed);
  // The revision returned is the key's: the next update against it goes
  // through.
  Result<uint64_t> next = KvUpdate(conn_->js(), kv_->get(), "p.0", "a", *rev);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT(*next, landed);

  // The same for the "acquiring:<id>" entry a takeover rewrites.
  const uint64_t acquiring = Put("p.1", "acquiring:a");
  const uint64_t renewed = Put("p.1", "acquiring:a");
  Result<uint64_t> taken = KvUpdate(conn_->js(), kv_->get(), "p.1", "acquiring:a", acquiring);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(*taken, renewed);
}

TEST_F(KvUpdateTest, AnotherValueAtALaterRevisionIsAKeyThatMovedOn) {
  const uint64_t before = Put("p.0", "a");
  const uint64_t other = Put("p.0", "b");
  Result<uint64_t> rev = KvUpdate(conn_->js(), kv_->get(), "p.0", "a", before);
  ASSERT_FALSE(rev.ok());
  EXPECT_EQ(rev.status().code(), Status::Code::kBusy) << rev.status().ToString();
  EXPECT_EQ(rev.status().message(), "key p.0 at revision " + std::to_string(before) +
                                        " was rewritten: now \"b\" at revision " +
                                        std::to_string(other));
  // Still "b": the refused update wrote nothing.
  const KvValue now = ReadAtLeast("p.0", other);
  EXPECT_EQ(now.value, "b");
  EXPECT_EQ(now.revision, other);

  // A prefix of the value, or the value with one, is another value.
  const uint64_t acquiring = Put("p.1", "acquiring:a");
  Put("p.1", "a");
  Result<uint64_t> taken = KvUpdate(conn_->js(), kv_->get(), "p.1", "acquiring:a", acquiring);
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.status().code(), Status::Code::kBusy) << taken.status().ToString();
}

// The leader showing the key at a revision before the one the caller was
// answered for (a leader just elected, before it has applied its log, in
// nats-server 2.9) says nothing about the key: not answered, whatever
// value it shows, and nothing is written. Here the caller names a revision
// the key never reached (a write to another key took it).
TEST_F(KvUpdateTest, AKeyShownBeforeTheCallersRevisionIsNotAnswered) {
  for (const char* shown : {"a", "b"}) {
    const uint64_t earlier = Put("p.0", shown);
    const uint64_t later = Put("p.9", "x");
    Result<uint64_t> rev = KvUpdate(conn_->js(), kv_->get(), "p.0", "a", later);
    ASSERT_FALSE(rev.ok()) << shown;
    EXPECT_EQ(rev.status().code(), Status::Code::kUnavailable) << rev.status().ToString();
    EXPECT_EQ(rev.status().message(),
              "key p.0 at revision " + std::to_string(later) +
                  ": the stream leader shows it at revision " + std::to_string(earlier) +
                  ", before that one (a leader that has not applied its log yet)");
    Result<KvValue> now = KvGetFromLeader(conn_->js(), kv_->get(), "p.0");
    ASSERT_TRUE(now.ok()) << now.status().ToString();
    EXPECT_EQ(now->value, shown);
    EXPECT_EQ(now->revision, earlier);
  }
}

TEST_F(KvUpdateTest, ADeletedKeyExpiredOrWasDeleted) {
  const uint64_t before = Put("p.0", "a");
  ASSERT_EQ(kvStore_Delete(kv_->get(), "p.0"), NATS_OK);
  Result<uint64_t> rev = KvUpdate(conn_->js(), kv_->get(), "p.0", "a", before);
  ASSERT_FALSE(rev.ok());
  EXPECT_EQ(rev.status().code(), Status::Code::kBusy) << rev.status().ToString();
  EXPECT_EQ(rev.status().message(),
            "key p.0 at revision " + std::to_string(before) + " expired or was deleted");
}

// A lease is given back with a revision-checked delete: at the revision
// the caller last wrote it goes; at an older one (another writer's entry
// now, or one already gone) it stays as it is.
TEST_F(KvUpdateTest, ADeleteAtItsRevisionRemovesTheKeyAndAtAnotherLeavesIt) {
  const uint64_t mine = Put("p.0", "a");
  ASSERT_TRUE(KvDeleteAt(conn_->js(), kv_->get(), "p.0", mine).ok());
  EXPECT_TRUE(
      test_util::WaitFor([&] { return KvGet(kv_->get(), "p.0").status().IsNotFound(); }, 10));
  // The key can be created again after it (as the next owner does).
  EXPECT_TRUE(KvCreate(kv_->get(), "p.0", "b").ok());

  const uint64_t before = Put("p.1", "a");
  const uint64_t other = Put("p.1", "b");
  Status st = KvDeleteAt(conn_->js(), kv_->get(), "p.1", before);
  EXPECT_EQ(st.code(), Status::Code::kBusy) << st.ToString();
  const KvValue now = ReadAtLeast("p.1", other);
  EXPECT_EQ(now.value, "b");
  EXPECT_EQ(now.revision, other);
}

// KvKeys lists the live keys (deleted and purged ones left out), and keeps
// doing so with one of the three nodes down: nats-server 2.9 placed
// kvStore_Keys's consumer on a random replica, the dead one in a third of
// the listings, which then timed out for as long as the node stayed down.
TEST_F(KvUpdateTest, KeysListsTheLiveKeysAlsoWithANodeDown) {
  Put("w.a", "a");
  Put("w.b", "b");
  Put("p.0", "a");
  Put("p.1", "a");
  Put("p.0", "a");  // rewritten: listed once
  ASSERT_EQ(kvStore_Delete(kv_->get(), "p.1"), NATS_OK);
  ASSERT_EQ(kvStore_Purge(kv_->get(), "w.b", nullptr), NATS_OK);
  const std::vector<std::string> live = {"p.0", "w.a"};
  Result<std::vector<std::string>> keys = Status::NotFound("");
  // Direct gets may come from a replica that has not applied the last
  // writes yet.
  EXPECT_TRUE(test_util::WaitFor(
      [&] {
        keys = KvKeys(conn_->js(), kv_->get(), 2000);
        return keys.ok() && *keys == live;
      },
      10))
      << (keys.ok() ? std::to_string(keys->size()) + " keys" : keys.status().ToString());

  // A node this connection is not on: what is measured is the listing,
  // not a reconnection.
  char connected[256] = {0};
  ASSERT_EQ(natsConnection_GetConnectedUrl(conn_->nc(), connected, sizeof(connected)), NATS_OK);
  int down = 0;
  while (nats_.Url(down) == connected) ++down;
  nats_.Kill(down);
  for (int i = 0; i < 12; ++i) {
    keys = KvKeys(conn_->js(), kv_->get(), 2000);
    ASSERT_TRUE(keys.ok()) << "listing " << i << " with node " << down
                           << " down: " << keys.status().ToString();
    EXPECT_EQ(*keys, live) << i;
  }
}

}  // namespace
}  // namespace eventfold::cluster
