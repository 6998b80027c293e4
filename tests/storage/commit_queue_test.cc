// The group commit under the store (storage/commit_queue.h): commits from
// many threads at once, synced or not, each get consecutive feed seqs, the
// feed as a whole has no gap and no seq twice, and every batch and f/ record
// is written once.

#include "storage/commit_queue.h"

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold::storage {
namespace {

using storage_test::TestSeed;

struct Done {
  std::string key;               // the batch's own record
  std::vector<uint64_t> seqs;    // the seqs its changes were given
  std::vector<std::string> ids;  // its changes' ids, in order
};

TEST(CommitQueue, ConcurrentCommitsNumberTheFeedWithoutGapsOrRepeats) {
  const uint64_t seed = TestSeed("CommitQueue.ConcurrentCommits", 7310);
  auto env = storage_test::NewMemEnv();
  leveldb::Options options;
  options.env = env.get();
  options.create_if_missing = true;
  leveldb::DB* raw = nullptr;
  ASSERT_TRUE(leveldb::DB::Open(options, "/cq", &raw).ok());
  std::unique_ptr<leveldb::DB> db(raw);

  constexpr uint64_t kFirst = 41;  // as if the feed went on from a reopen
  CommitQueue queue(db.get(), kFirst);
  constexpr int kThreads = 8;
  constexpr int kCommits = 300;
  std::vector<std::vector<Done>> done(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(t));
      for (int i = 0; i < kCommits; ++i) {
        Done d;
        d.key = "k/" + std::to_string(t) + "/" + std::to_string(i);
        leveldb::WriteBatch batch;
        batch.Put(d.key, std::string(rng() % 2000, 'v'));
        std::vector<Change> changes(rng() % 4);  // none is a commit too
        for (size_t c = 0; c < changes.size(); ++c) {
          changes[c].entity = "receipt";
          changes[c].id = d.key + "/" + std::to_string(c);
          changes[c].state = "issued";
          changes[c].previous_state = "none";
          d.ids.push_back(changes[c].id);
        }
        const bool sync = rng() % 3 == 0;
        const Status st = queue.Commit(&batch, &changes, sync);
        ASSERT_TRUE(st.ok()) << st.message();
        for (const Change& c : changes) d.seqs.push_back(c.seq);
        done[static_cast<size_t>(t)].push_back(std::move(d));
      }
    });
  }
  for (auto& th : threads) th.join();

  std::vector<uint64_t> all;
  for (const auto& per_thread : done) {
    for (const Done& d : per_thread) {
      for (size_t c = 1; c < d.seqs.size(); ++c) {
        ASSERT_EQ(d.seqs[c], d.seqs[c - 1] + 1) << d.key << ": one commit's seqs are consecutive";
      }
      all.insert(all.end(), d.seqs.begin(), d.seqs.end());
      std::string value;
      ASSERT_TRUE(db->Get(leveldb::ReadOptions(), d.key, &value).ok()) << d.key;
      for (size_t c = 0; c < d.seqs.size(); ++c) {
        ASSERT_TRUE(db->Get(leveldb::ReadOptions(), FeedKey(d.seqs[c]), &value).ok());
        Result<Change> read = DecodeChange(FeedKey(d.seqs[c]), value);
        ASSERT_TRUE(read.ok()) << read.status().message();
        EXPECT_EQ(read->id, d.ids[c]) << "seq " << d.seqs[c] << " holds another commit's change";
      }
    }
  }
  std::sort(all.begin(), all.end());
  ASSERT_FALSE(all.empty());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(all[i], kFirst + i) << "the feed has a gap or a seq twice";
  }
  EXPECT_EQ(queue.last_seq(), kFirst + all.size() - 1);
  EXPECT_EQ(queue.WaitBeyond(kFirst, 0), queue.last_seq());

  // Nothing else was written: no f/ record past the last seq.
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
  size_t feed_records = 0;
  const leveldb::Slice feed(kFeedPrefix.data(), kFeedPrefix.size());
  for (it->Seek(feed); it->Valid() && it->key().starts_with(feed); it->Next()) {
    ++feed_records;
  }
  EXPECT_EQ(feed_records, all.size());
}

}  // namespace
}  // namespace eventfold::storage
