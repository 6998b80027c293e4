// The rebuild's external sort (replay/run_file.h): runs in memory and in
// files merge into key order, and a rebuild that spills many small runs
// writes exactly the generation one in-memory run gives.

#include "replay/run_file.h"

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "replay/rebuild.h"
#include "storage/key_codec.h"
#include "tests/replay/replay_util.h"
#include "tests/storage/storage_test_util.h"
#include "tools/history.h"

namespace eventfold {
namespace {

using storage_test::TestSeed;
using testing::IngestChunked;
using testing::MemStore;

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(RunFile, RunsInMemoryAndInFilesMergeIntoKeyOrder) {
  const uint64_t seed = TestSeed("RunFile.RunsInMemoryAndInFilesMergeIntoKeyOrder", 11);
  std::mt19937_64 rng(seed);
  std::unique_ptr<leveldb::Env> env(leveldb::NewMemEnv(leveldb::Env::Default()));
  ScratchDir scratch(env.get(), "/mem/runs");
  ASSERT_TRUE(scratch.Reset().ok());
  std::multimap<std::string, std::string> expected;
  std::vector<std::unique_ptr<RunCursor>> runs;
  for (int r = 0; r < 7; ++r) {
    RunBuffer buffer;
    const int n = r == 3 ? 0 : static_cast<int>(rng() % 300);  // run 3 is empty
    for (int i = 0; i < n; ++i) {
      // Short keys collide across runs; some values exceed a read chunk.
      std::string key = RandomBytes(rng, 1 + rng() % 3);
      std::string value = RandomBytes(rng, rng() % 50 == 0 ? 300000 + rng() % 1000 : rng() % 64);
      buffer.Add(key, value);
      expected.emplace(std::move(key), std::move(value));
    }
    buffer.Sort();
    if (r % 2 == 0) {
      runs.push_back(ReadBuffer(std::move(buffer)));
      continue;
    }
    Result<std::unique_ptr<RunWriter>> w = RunWriter::Create(env.get(), scratch.NewFileName());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (size_t i = 0; i < buffer.size(); ++i) {
      ASSERT_TRUE((*w)->Add(buffer.key(i), buffer.value(i)).ok());
    }
    ASSERT_TRUE((*w)->Close().ok());
    Result<std::unique_ptr<RunCursor>> run = ReadRunFile(env.get(), (*w)->name());
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    runs.push_back(std::move(*run));
  }
  RunMerger merged(std::move(runs));
  std::multimap<std::string, std::string> seen;
  std::string last;
  while (merged.Next()) {
    ASSERT_LE(last, merged.key());
    last = std::string(merged.key());
    seen.emplace(last, std::string(merged.value()));
  }
  EXPECT_TRUE(merged.status().ok()) << merged.status().ToString();
  // Equal keys may come in any order: compare as multisets of pairs.
  auto sorted = [](const std::multimap<std::string, std::string>& m) {
    std::vector<std::pair<std::string, std::string>> v(m.begin(), m.end());
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted(seen), sorted(expected));
}

TEST(RunFile, ASortKeepsTheOrderOfEqualKeys) {
  const uint64_t seed = TestSeed("RunFile.ASortKeepsTheOrderOfEqualKeys", 12);
  std::mt19937_64 rng(seed);
  RunBuffer buffer;
  constexpr int kRecords = 5000;
  for (int i = 0; i < kRecords; ++i) {
    // Few distinct keys, some a prefix of others; the value is the order.
    buffer.Add(std::string(1 + rng() % 2, static_cast<char>('a' + rng() % 4)), std::to_string(i));
  }
  buffer.Sort();
  ASSERT_EQ(buffer.size(), static_cast<size_t>(kRecords));
  for (size_t i = 1; i < buffer.size(); ++i) {
    ASSERT_LE(buffer.key(i - 1), buffer.key(i)) << "at " << i;
    if (buffer.key(i - 1) == buffer.key(i)) {
      ASSERT_LT(std::stoi(std::string(buffer.value(i - 1))),
                std::stoi(std::string(buffer.value(i))))
          << "equal keys out of their order at " << i;
    }
  }
}

TEST(RunFile, ATruncatedRunFileIsCorruption) {
  std::unique_ptr<leveldb::Env> env(leveldb::NewMemEnv(leveldb::Env::Default()));
  ScratchDir scratch(env.get(), "/mem/runs");
  ASSERT_TRUE(scratch.Reset().ok());
  const std::string name = scratch.NewFileName();
  leveldb::WritableFile* file = nullptr;
  ASSERT_TRUE(env->NewWritableFile(name, &file).ok());
  // A header announcing a 5-byte key and a 9-byte value, then 3 bytes.
  ASSERT_TRUE(file->Append(leveldb::Slice("\x05\0\0\0\x09\0\0\0abc", 11)).ok());
  ASSERT_TRUE(file->Close().ok());
  delete file;
  Result<std::unique_ptr<RunCursor>> run = ReadRunFile(env.get(), name);
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE((*run)->Next());
  EXPECT_TRUE((*run)->status().IsCorruption()) << (*run)->status().ToString();
}

// Every key and value under g/<gen>/, without the generation prefix.
std::vector<std::pair<std::string, std::string>> Generation(leveldb::DB* db, uint32_t gen) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string prefix = storage::GenerationPrefix(gen);
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    out.emplace_back(it->key().ToString().substr(prefix.size()), it->value().ToString());
  }
  EXPECT_TRUE(it->status().ok());
  return out;
}

TEST(RunFile, ManySpilledRunsBuildTheSameGenerationAsOne) {
  const uint64_t seed = TestSeed("RunFile.ManySpilledRunsBuildTheSameGenerationAsOne", 5);
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 150;
  ho.products = 10;
  ho.inventory_updates = 60;  // per product: long logs, snapshots every 7 events
  const sim::History h = sim::GenerateHistory(ho);
  MemStore store(/*snapshot_interval=*/7);
  ASSERT_TRUE(store);
  IngestChunked(store.get(), h.deliveries, seed);
  const Profile profile = *store->profile();
  const uint32_t live = store->Stats().generation;
  store.Close();

  leveldb::Options lo;
  lo.env = store.env();
  leveldb::DB* raw = nullptr;
  ASSERT_TRUE(leveldb::DB::Open(lo, MemStore::kPath, &raw).ok());
  std::unique_ptr<leveldb::DB> db(raw);
  const std::string scratch_path = std::string(MemStore::kPath) + ".test-runs";
  RebuildTarget one;
  one.gen = live + 1;
  one.snapshot_interval = 7;
  one.scratch_path = scratch_path;
  one.env = store.env();
  RebuildTarget many = one;
  many.gen = live + 2;
  many.threads = 3;
  many.sort_budget_bytes = 64 << 10;  // a few dozen events per run
  for (const RebuildTarget* t : {&one, &many}) {
    Result<RebuildSummary> sum = BuildGeneration(db.get(), nullptr, profile, *t);
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    EXPECT_GT(sum->entities, 150u);
    EXPECT_FALSE(store.env()->FileExists(scratch_path)) << "run files left behind";
  }
  const auto expected = Generation(db.get(), live);
  EXPECT_GT(expected.size(), 1000u) << "history too small to spill much";
  EXPECT_EQ(Generation(db.get(), one.gen), expected);
  EXPECT_EQ(Generation(db.get(), many.gen), expected);
}

}  // namespace
}  // namespace eventfold
