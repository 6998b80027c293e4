// A transition rank read from a damaged log record, past the entity type's
// transitions: reading the log and re-folding the entity answer a
// Corruption status naming the event; nothing indexes out of bounds.

#include <gtest/gtest.h>
#include <leveldb/db.h>

#include <memory>
#include <string>

#include "core/fold.h"
#include "eventfold/store.h"
#include "storage/key_codec.h"
#include "storage/leveldb_util.h"
#include "storage/record_codec.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold::reliability {
namespace {

using storage_test::Issued;
using storage_test::Refunded;
using storage_test::ScratchDir;

// Rewrites the log entry of `event_id` in receipt/rcp_1 with `rank`.
void DamageRank(const std::string& dir, const std::string& event_id, uint32_t rank) {
  leveldb::DB* raw = nullptr;
  ASSERT_TRUE(leveldb::DB::Open(leveldb::Options(), dir, &raw).ok());
  std::unique_ptr<leveldb::DB> db(raw);
  const EntityRef ref{"receipt", "rcp_1"};
  const std::string prefix = storage::LogPrefix(1, ref);
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
  bool found = false;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<storage::LogEntry> e = storage::DecodeLog(
        storage::View(it->key()), storage::View(it->value()), Profile::ReceiptRoller());
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    if (e->ranked.event.event_id != event_id) continue;
    ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), it->key()).ok());
    e->ranked.rank = rank;
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(),
                        storage::LogKey(1, ref, KeyOf(e->ranked.event, rank)),
                        storage::EncodeLog(*e))
                    .ok());
    found = true;
    break;
  }
  ASSERT_TRUE(found) << event_id;
}

TEST(BadRankTest, RankPastTheTransitionsIsCorruptionNotACrash) {
  ScratchDir dir;
  {
    Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), Options());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_EQ((*store)->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kAccepted);
    ASSERT_EQ((*store)->Ingest(Refunded("evt_2", "rcp_1")).outcome, Outcome::kAccepted);
  }
  DamageRank(dir.path(), "evt_2", 99);
  Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), Options());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<EntityLog> log = (*store)->Log("receipt", "rcp_1");
  ASSERT_FALSE(log.ok());
  EXPECT_TRUE(log.status().IsCorruption()) << log.status().ToString();
  EXPECT_NE(log.status().message().find("evt_2"), std::string::npos) << log.status().ToString();
  RebuildOptions one;
  one.entity = "receipt";
  one.id = "rcp_1";
  Result<RebuildSummary> refold = (*store)->maintenance().Rebuild(one);
  ASSERT_FALSE(refold.ok());
  EXPECT_TRUE(refold.status().IsCorruption()) << refold.status().ToString();
  // A read folds the entity's log from its cursor (format 4), so it too
  // answers Corruption naming the event; other entities are untouched. A
  // full rebuild that copies the logs refuses the damaged one, naming the
  // event and the way out; one that derives the logs anew (ranks from the
  // stored events' bodies) repairs it.
  ASSERT_EQ((*store)->Ingest(Issued("evt_3", "rcp_2")).outcome, Outcome::kAccepted);
  EXPECT_EQ((*store)->Get("receipt", "rcp_2")->state, "issued");
  Result<Projection> damaged = (*store)->Get("receipt", "rcp_1");
  ASSERT_FALSE(damaged.ok());
  EXPECT_TRUE(damaged.status().IsCorruption()) << damaged.status().ToString();
  EXPECT_NE(damaged.status().message().find("evt_2"), std::string::npos)
      << damaged.status().ToString();
  Result<RebuildSummary> copied = (*store)->maintenance().Rebuild(RebuildOptions{});
  ASSERT_FALSE(copied.ok());
  EXPECT_TRUE(copied.status().IsCorruption()) << copied.status().ToString();
  EXPECT_NE(copied.status().message().find("evt_2"), std::string::npos);
  EXPECT_NE(copied.status().message().find("--rederive-logs"), std::string::npos)
      << copied.status().ToString();
  RebuildOptions rederive;
  rederive.rederive_logs = true;
  Result<RebuildSummary> all = (*store)->maintenance().Rebuild(rederive);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  log = (*store)->Log("receipt", "rcp_1");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ((*store)->Get("receipt", "rcp_1")->state, "refunded");
}

}  // namespace
}  // namespace eventfold::reliability
