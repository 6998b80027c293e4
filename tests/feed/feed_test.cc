// The change feed (eventfold/feed.h): gap-free numbering under concurrent
// ingest, one change per changed entity, none for duplicates, paging and
// waiting.

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "tests/feed/feed_test_util.h"

namespace eventfold::feed_test {
namespace {

using storage_test::Issued;
using storage_test::Refunded;

TEST(FeedTest, SeqIsGapFreeAndOrderedUnderConcurrentIngest) {
  MemStore m;
  constexpr int kThreads = 8, kPerThread = 150;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string rid = "rcp_" + std::to_string(t) + "_" + std::to_string(i);
        IngestResult r = m.store()->Ingest(Issued("evt_" + rid, rid));
        EXPECT_EQ(r.outcome, Outcome::kAccepted) << r.message;
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::vector<Change> feed = ReadAll(m.store());
  ASSERT_EQ(feed.size(), size_t{kThreads * kPerThread});
  std::set<std::string> ids;
  for (size_t i = 0; i < feed.size(); ++i) {
    EXPECT_EQ(feed[i].seq, i + 1);
    EXPECT_EQ(feed[i].entity, "receipt");
    EXPECT_EQ(feed[i].state, "issued");
    EXPECT_EQ(feed[i].previous_state, "none");
    ASSERT_EQ(feed[i].event_ids.size(), 1u);
    EXPECT_EQ(feed[i].event_ids[0], "evt_" + feed[i].id);
    ids.insert(feed[i].id);
  }
  EXPECT_EQ(ids.size(), feed.size());  // each receipt exactly once
  EXPECT_EQ(m.store()->feed().LastSeq(), feed.size());
}

TEST(FeedTest, OneChangePerChangedEntityAndNoneForDuplicates) {
  MemStore m;
  // One batch touching r1 twice and r2 once: a change for each entity.
  std::vector<IngestResult> rs =
      m.store()->IngestBatch({Delivery{{}, Issued("e1", "r1")}, Delivery{{}, Issued("e2", "r2")},
                              Delivery{{}, Refunded("e3", "r1")}});
  for (const IngestResult& r : rs) ASSERT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  std::vector<Change> feed = ReadAll(m.store());
  ASSERT_EQ(feed.size(), 2u);
  std::map<std::string, Change> by_id;
  for (const Change& c : feed) by_id[c.id] = c;
  EXPECT_EQ(by_id["r1"].previous_state, "none");
  EXPECT_EQ(by_id["r1"].state, "refunded");
  EXPECT_EQ(by_id["r1"].event_ids, (std::vector<std::string>{"e1", "e3"}));
  EXPECT_EQ(by_id["r1"].changed_at, kT0);  // from the store's Clock
  EXPECT_EQ(by_id["r2"].state, "issued");

  // Duplicates change nothing, so they add no change.
  EXPECT_EQ(m.store()->Ingest(Issued("e1", "r1")).outcome, Outcome::kDuplicate);
  EXPECT_EQ(m.store()->Ingest(Refunded("e3", "r1")).outcome, Outcome::kDuplicate);
  EXPECT_EQ(ReadAll(m.store()).size(), 2u);
  EXPECT_EQ(m.store()->feed().LastSeq(), 2u);

  // The next change continues the numbering, also after a reopen.
  m.Reopen();
  EXPECT_EQ(m.store()->feed().LastSeq(), 2u);
  ASSERT_EQ(m.store()->Ingest(Issued("e4", "r3")).outcome, Outcome::kAccepted);
  feed = ReadAll(m.store());
  ASSERT_EQ(feed.size(), 3u);
  EXPECT_EQ(feed.back().seq, 3u);
  EXPECT_EQ(feed.back().id, "r3");
}

TEST(FeedTest, ReadFeedPages) {
  MemStore m;
  ChangeMaker maker(m.store());
  for (int i = 0; i < 25; ++i) maker.Touch("p" + std::to_string(i % 4));
  uint64_t after = 0;
  std::vector<size_t> sizes;
  for (;;) {
    std::vector<Change> page;
    ASSERT_TRUE(m.store()->feed().Read(after, 10, AppendTo<Change>(&page)).ok());
    if (page.empty()) break;
    sizes.push_back(page.size());
    for (const Change& c : page) {
      EXPECT_EQ(c.seq, after + 1);
      EXPECT_EQ(c.id, maker.EntityOf(c.seq));
      after = c.seq;
    }
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{10, 10, 5}));
  std::vector<Change> tail;
  ASSERT_TRUE(m.store()->feed().Read(20, 100, AppendTo<Change>(&tail)).ok());
  ASSERT_EQ(tail.size(), 5u);
  EXPECT_EQ(tail.front().seq, 21u);
  // Nothing follows the last seq, nor the largest one (its successor would
  // wrap to 0 and read the feed from its start).
  for (const uint64_t last : {uint64_t{25}, std::numeric_limits<uint64_t>::max()}) {
    std::vector<Change> none;
    ASSERT_TRUE(m.store()->feed().Read(last, 100, AppendTo<Change>(&none)).ok());
    EXPECT_TRUE(none.empty()) << "after " << last << ": " << none.size() << " changes";
  }
}

TEST(FeedTest, WaitForChangesWakesOnANewChange) {
  MemStore m;
  // Times out (briefly) when nothing comes.
  EXPECT_EQ(m.store()->feed().WaitForChanges(0, 1000), 0u);
  uint64_t seen = 0;
  std::chrono::steady_clock::duration waited{};
  std::thread waiter([&] {
    const auto start = std::chrono::steady_clock::now();
    seen = m.store()->feed().WaitForChanges(0, 30'000'000);
    waited = std::chrono::steady_clock::now() - start;
  });
  ASSERT_EQ(m.store()->Ingest(Issued("e1", "r1")).outcome, Outcome::kAccepted);
  waiter.join();
  EXPECT_EQ(seen, 1u);
  EXPECT_LT(waited, std::chrono::seconds(10));  // woken, not timed out
  // Already beyond: returns at once.
  EXPECT_EQ(m.store()->feed().WaitForChanges(0, 30'000'000), 1u);
}

}  // namespace
}  // namespace eventfold::feed_test
