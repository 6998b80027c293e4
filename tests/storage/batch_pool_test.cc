// The pool of write batches an ingest transaction takes its batch from
// (storage/batch_pool.h): a batch comes out empty whatever went in, at most
// kSlots are kept, an outgrown one is not, and threads taking and giving at
// once never share one.

#include "storage/batch_pool.h"

#include <gtest/gtest.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/storage/storage_test_util.h"

namespace eventfold::storage {
namespace {

using storage_test::TestSeed;

// The records of `batch`, as "key=value" or "-key".
std::vector<std::string> Records(const leveldb::WriteBatch& batch) {
  struct Collect : leveldb::WriteBatch::Handler {
    std::vector<std::string> out;
    void Put(const leveldb::Slice& k, const leveldb::Slice& v) override {
      out.push_back(k.ToString() + "=" + v.ToString());
    }
    void Delete(const leveldb::Slice& k) override { out.push_back("-" + k.ToString()); }
  } collect;
  EXPECT_TRUE(batch.Iterate(&collect).ok());
  return collect.out;
}

TEST(BatchPool, AKeptBatchComesBackEmpty) {
  BatchPool pool;
  std::unique_ptr<leveldb::WriteBatch> b = pool.Take();
  const size_t empty_size = b->ApproximateSize();
  b->Put("a/1", std::string(700, 'x'));
  b->Delete("p/1");
  leveldb::WriteBatch* given = b.get();
  pool.Give(std::move(b));
  std::unique_ptr<leveldb::WriteBatch> again = pool.Take();
  EXPECT_EQ(again.get(), given);  // the same batch, kept
  EXPECT_TRUE(Records(*again).empty());
  EXPECT_EQ(again->ApproximateSize(), empty_size);
  again->Put("k", "v");
  EXPECT_EQ(Records(*again), std::vector<std::string>{"k=v"});
}

TEST(BatchPool, KeepsAtMostItsSlotsAndNoOutgrownBatch) {
  BatchPool pool;
  std::vector<std::unique_ptr<leveldb::WriteBatch>> taken;
  for (size_t i = 0; i < BatchPool::kSlots + 1; ++i) taken.push_back(pool.Take());
  std::vector<leveldb::WriteBatch*> given;
  for (auto& b : taken) {
    given.push_back(b.get());
    b->Put("k", "v");
    pool.Give(std::move(b));
  }
  // The first kSlots were kept; the last found no room and was freed.
  std::vector<leveldb::WriteBatch*> back;
  for (size_t i = 0; i < BatchPool::kSlots + 1; ++i) taken[i] = pool.Take();
  for (size_t i = 0; i < BatchPool::kSlots; ++i) {
    EXPECT_NE(std::find(given.begin(), given.begin() + BatchPool::kSlots, taken[i].get()),
              given.begin() + BatchPool::kSlots)
        << "slot " << i;
    EXPECT_TRUE(Records(*taken[i]).empty());
  }
  EXPECT_TRUE(Records(*taken[BatchPool::kSlots]).empty());

  // A batch grown past kMaxKeptBytes is freed, not kept: the pool is empty
  // after it, so a Take makes a new batch.
  taken.clear();
  std::unique_ptr<leveldb::WriteBatch> big = std::make_unique<leveldb::WriteBatch>();
  big->Put("big", std::string(BatchPool::kMaxKeptBytes, 'x'));
  pool.Give(std::move(big));
  std::unique_ptr<leveldb::WriteBatch> small = pool.Take();
  small->Put("small", "1");
  leveldb::WriteBatch* kept = small.get();
  pool.Give(std::move(small));
  EXPECT_EQ(pool.Take().get(), kept);
}

// Threads take a batch, fill it with a seeded number of their own records,
// check that it holds exactly those, and give it back. A batch handed to
// two threads at once shows the other's records (and races under TSan).
TEST(BatchPool, ThreadsNeverShareABatch) {
  const uint64_t seed = TestSeed("BatchPool.ThreadsNeverShareABatch", 4242);
  BatchPool pool;
  constexpr int kThreads = 4, kRounds = 2000;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      for (int round = 0; round < kRounds; ++round) {
        std::unique_ptr<leveldb::WriteBatch> b = pool.Take();
        const int n = static_cast<int>(rng() % 8) + 1;
        std::vector<std::string> expected;
        for (int i = 0; i < n; ++i) {
          const std::string key =
              std::to_string(t) + "/" + std::to_string(round) + "/" + std::to_string(i);
          b->Put(key, "v");
          expected.push_back(key + "=v");
        }
        if (Records(*b) != expected) ++failures[t];
        pool.Give(std::move(b));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace eventfold::storage
