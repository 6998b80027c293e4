// The store's count of unrouted events (StoreStats::unrouted), kept by an
// index per generation instead of a scan of every stored event: it stays
// equal to what a scan finds across ingest, reopen, a rebuild to another
// profile and back, and for a store written before the index existed.

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <memory>
#include <string>

#include "storage/key_codec.h"
#include "tests/replay/replay_util.h"

namespace eventfold {
namespace {

using testing::MemStore;

std::string Receipt(const std::string& event_id, const std::string& type, const std::string& id) {
  return R"({"event_id":")" + event_id + R"(","type":")" + type +
         R"(","occurred_at":"2026-11-29T10:00:00Z","data":{"receipt_id":")" + id + R"("}})";
}

std::string Payment(const std::string& event_id, const std::string& id) {
  return R"({"event_id":")" + event_id +
         R"(","type":"payment_intent.created","occurred_at":"2026-11-29T10:00:00Z",)"
         R"("data":{"object":{"id":")" +
         id + R"("}}})";
}

Profile Payments() {
  Result<Profile> p = Profile::FromFile(std::string(EVENTFOLD_PROFILES_DIR) + "/payments.json");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(*p) : Profile::ReceiptRoller();
}

// What a scan of every stored event finds: under a copy of the store's
// profile that differs only in its name (another fingerprint), ListUnrouted
// decodes every stored event instead of reading the index.
uint64_t ScannedUnrouted(Store* store) {
  Result<Profile> same = Profile::FromJson([&] {
    std::string json = store->profile()->ToJson();
    const std::string name = "\"name\":\"" + store->profile()->name() + "\"";
    json.replace(json.find(name), name.size(), "\"name\":\"scan\"");
    return json;
  }());
  EXPECT_TRUE(same.ok()) << same.status().ToString();
  uint64_t n = 0;
  Status st = store->maintenance().ListUnrouted(&*same, [&](const UnroutedEvent&) {
    ++n;
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return n;
}

uint64_t ListedUnrouted(Store* store) {
  uint64_t n = 0;
  Status st = store->maintenance().ListUnrouted(nullptr, [&](const UnroutedEvent&) {
    ++n;
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return n;
}

uint64_t Problems(Store* store) {
  Result<CheckSummary> sum = store->maintenance().Check(
      [](const CheckProblem& p) { ADD_FAILURE() << p.key << ": " << p.message; });
  EXPECT_TRUE(sum.ok()) << sum.status().ToString();
  return sum.ok() ? sum->problems : 1;
}

// The count, the index's list and a scan agree, now and after a reopen.
void ExpectUnrouted(MemStore& store, uint64_t expected) {
  for (int open = 0; open < 2; ++open) {
    SCOPED_TRACE(open == 0 ? "live" : "reopened");
    EXPECT_EQ(store->Stats().unrouted, expected);
    EXPECT_EQ(ListedUnrouted(store.get()), expected);
    EXPECT_EQ(ScannedUnrouted(store.get()), expected);
    EXPECT_EQ(Problems(store.get()), 0u);
    if (open == 0) store.Reopen();
  }
}

void Accept(MemStore& store, const std::string& body) {
  EXPECT_EQ(store->Ingest(body).outcome, Outcome::kAccepted) << body;
}

TEST(UnroutedCount, FollowsIngestAndRebuildsToAnotherProfileAndBack) {
  MemStore store;
  ExpectUnrouted(store, 0);
  Accept(store, Receipt("evt_1", "receipt.issued", "rcp_1"));
  Accept(store, Receipt("evt_2", "receipt.issued", "rcp_2"));
  Accept(store, Receipt("evt_3", "receipt.teleported", "rcp_2"));  // unknown type
  Accept(store, Payment("evt_4", "pi_1"));                         // another sender's
  ExpectUnrouted(store, 2);
  EXPECT_EQ(store->Ingest(Payment("evt_4", "pi_1")).outcome, Outcome::kDuplicate);
  EXPECT_EQ(store->Stats().unrouted, 2u) << "a duplicate stores nothing";

  // Under payments the receipts are unrouted and the payment is routed.
  const Profile payments = Payments();
  Result<RebuildSummary> to_payments = store->maintenance().Rebuild(&payments);
  ASSERT_TRUE(to_payments.ok()) << to_payments.status().ToString();
  EXPECT_EQ(to_payments->unrouted, 3u);  // evt_1, evt_2, evt_3
  ExpectUnrouted(store, 3);
  Accept(store, Receipt("evt_6", "receipt.issued", "rcp_6"));
  Accept(store, Payment("evt_7", "pi_2"));
  ExpectUnrouted(store, 4);

  const Profile receipts = Profile::ReceiptRoller();
  Result<RebuildSummary> back = store->maintenance().Rebuild(&receipts);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->unrouted, 3u);  // evt_3, evt_4, evt_7
  ExpectUnrouted(store, 3);
  // A rebuild under the same profile leaves it as it was.
  ASSERT_TRUE(store->maintenance().Rebuild(nullptr).ok());
  ExpectUnrouted(store, 3);
}

// A store written before the index: no m/unrouted_index and no u/ entries.
// Its first Open indexes the live generation once.
TEST(UnroutedCount, AStoreWithoutTheIndexIsIndexedAtOpen) {
  MemStore store;
  Accept(store, Receipt("evt_1", "receipt.issued", "rcp_1"));
  Accept(store, Receipt("evt_2", "receipt.teleported", "rcp_1"));
  Accept(store, Payment("evt_3", "pi_1"));
  store.Close();
  {
    leveldb::Options lo;
    lo.env = store.env();
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(lo, MemStore::kPath, &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    leveldb::WriteBatch strip;
    strip.Delete(storage::MetaKey("unrouted_index"));
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    const std::string prefix = storage::UnroutedFamilyPrefix(1);
    int entries = 0;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      strip.Delete(it->key());
      ++entries;
    }
    EXPECT_EQ(entries, 2);
    ASSERT_TRUE(db->Write(leveldb::WriteOptions(), &strip).ok());
  }
  store.Reopen();
  ExpectUnrouted(store, 2);
}

// Check names an unrouted event missing from the index.
TEST(UnroutedCount, CheckFindsAMissingIndexEntry) {
  MemStore store;
  Accept(store, Receipt("evt_1", "receipt.teleported", "rcp_1"));
  store.Close();
  {
    leveldb::Options lo;
    lo.env = store.env();
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(lo, MemStore::kPath, &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), storage::UnroutedKey(1, 1)).ok());
  }
  store.Reopen();
  std::string problems;
  Result<CheckSummary> sum = store->maintenance().Check(
      [&](const CheckProblem& p) { problems += p.key + ": " + p.message + "\n"; });
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->problems, 1u) << problems;
  EXPECT_NE(problems.find("is unrouted but missing from the index"), std::string::npos) << problems;
}

}  // namespace
}  // namespace eventfold
