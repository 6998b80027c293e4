// Tests of storage/long_scan: a scan that makes a fresh iterator every
// kRefreshEvery records must still see each record under its prefix exactly
// once, in key order, whether it reads a snapshot while others write or
// deletes the records as it goes.

#include "storage/long_scan.h"

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/storage/storage_test_util.h"

namespace eventfold::storage {
namespace {

using storage_test::TestSeed;

class LongScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = storage_test::NewMemEnv();
    leveldb::Options lo;
    lo.env = env_.get();
    lo.create_if_missing = true;
    lo.write_buffer_size = 64 << 10;  // small: memtables switch during a scan
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(lo, "/long_scan", &raw).ok());
    db_.reset(raw);
  }

  // Writes `n` records with random keys under "p/" (and neighbours under
  // "o/" and "q/", which no scan of "p/" may see); returns those under "p/".
  std::map<std::string, std::string> Fill(std::mt19937_64& rng, size_t n) {
    std::map<std::string, std::string> under;
    leveldb::WriteBatch batch;
    while (under.size() < n) {
      const std::string suffix = std::to_string(rng());
      const std::string value = "v" + std::to_string(rng() % 1000);
      under["p/" + suffix] = value;
      batch.Put("p/" + suffix, value);
      if (rng() % 8 == 0) batch.Put("o/" + suffix, "outside");
      if (rng() % 8 == 0) batch.Put("q/" + suffix, "outside");
    }
    EXPECT_TRUE(db_->Write(leveldb::WriteOptions(), &batch).ok());
    return under;
  }

  std::unique_ptr<leveldb::Env> env_;
  std::unique_ptr<leveldb::DB> db_;
};

TEST_F(LongScanTest, ReadsItsSnapshotWhileTheScanWritesUnderThePrefix) {
  std::mt19937_64 rng(TestSeed("LongScanTest.ReadsItsSnapshot", 11));
  const std::map<std::string, std::string> want =
      Fill(rng, 2 * LongScan::kRefreshEvery + 1 + rng() % LongScan::kRefreshEvery);
  const leveldb::Snapshot* snapshot = db_->GetSnapshot();
  std::vector<std::string> keys;
  for (const auto& [k, v] : want) keys.push_back(k);

  std::map<std::string, std::string> seen;
  std::vector<std::string> order;
  LongScan scan(db_.get(), snapshot, "p/", "scanning");
  while (scan.Next()) {
    order.emplace_back(scan.key());
    seen.emplace(std::string(scan.key()), std::string(scan.value()));
    // Writes the snapshot must not show: new keys, changed and deleted ones.
    leveldb::WriteBatch batch;
    batch.Put("p/" + std::to_string(rng()), "new");
    batch.Put(keys[rng() % keys.size()], "changed");
    batch.Delete(keys[rng() % keys.size()]);
    ASSERT_TRUE(db_->Write(leveldb::WriteOptions(), &batch).ok());
  }
  EXPECT_TRUE(scan.status().ok()) << scan.status().ToString();
  EXPECT_EQ(order, keys);  // each once, in key order, across every refresh
  EXPECT_EQ(seen, want);
  EXPECT_FALSE(scan.Next());  // stays at its end
  db_->ReleaseSnapshot(snapshot);
}

TEST_F(LongScanTest, DeletingAsItGoesVisitsEachRecordOnce) {
  std::mt19937_64 rng(TestSeed("LongScanTest.DeletingAsItGoes", 12));
  const std::map<std::string, std::string> want =
      Fill(rng, 3 * LongScan::kRefreshEvery + rng() % LongScan::kRefreshEvery);
  std::vector<std::string> keys;
  for (const auto& [k, v] : want) keys.push_back(k);

  // Deletes in batches of random size, as a generation's drop does. At a
  // refresh (after every kRefreshEvery-th record) the record the scan stands
  // on is deleted already at the odd ones, not yet at the even ones.
  std::vector<std::string> order;
  leveldb::WriteBatch batch;
  size_t flush_at = 1 + rng() % 5000;
  LongScan scan(db_.get(), nullptr, "p/", "dropping");
  while (scan.Next()) {
    order.emplace_back(scan.key());
    batch.Delete(leveldb::Slice(scan.key().data(), scan.key().size()));
    const size_t refreshes = order.size() / LongScan::kRefreshEvery;
    const bool at_refresh = order.size() % LongScan::kRefreshEvery == 0;
    if (--flush_at == 0 || (at_refresh && refreshes % 2 == 1)) {
      ASSERT_TRUE(db_->Write(leveldb::WriteOptions(), &batch).ok());
      batch.Clear();
      flush_at = 1 + rng() % 5000;
    }
  }
  ASSERT_TRUE(db_->Write(leveldb::WriteOptions(), &batch).ok());
  EXPECT_TRUE(scan.status().ok()) << scan.status().ToString();
  EXPECT_EQ(order, keys);

  // Nothing is left under the prefix, and the neighbours are untouched.
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  it->Seek("p/");
  EXPECT_TRUE(!it->Valid() || !it->key().starts_with("p/"));
  it->Seek("o/");
  EXPECT_TRUE(it->Valid() && it->key().starts_with("o/"));
}

TEST_F(LongScanTest, AnEmptyPrefixEndsAtOnce) {
  std::mt19937_64 rng(3);
  Fill(rng, 10);
  LongScan scan(db_.get(), nullptr, "x/", "scanning");
  EXPECT_FALSE(scan.Next());
  EXPECT_TRUE(scan.status().ok());
}

}  // namespace
}  // namespace eventfold::storage
