// Feed retention (Store::TrimFeed): only what every subscription has passed,
// minus the grace, and never the newest change; subscriptions across trims.

#include <gtest/gtest.h>

#include "eventfold/subscription.h"
#include "tests/feed/feed_test_util.h"

namespace eventfold::feed_test {
namespace {

std::vector<uint64_t> Seqs(Store* store) {
  std::vector<uint64_t> out;
  for (const Change& c : ReadAll(store)) out.push_back(c.seq);
  return out;
}

std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
  std::vector<uint64_t> out;
  for (uint64_t s = first; s <= last; ++s) out.push_back(s);
  return out;
}

TEST(RetentionTest, NothingIsTrimmedBeforeTheFirstSubscription) {
  MemStore m;
  ChangeMaker maker(m.store());
  for (int i = 0; i < 10; ++i) maker.Touch("p");
  Result<FeedTrimSummary> t = m.store()->maintenance().TrimFeed(0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->trimmed, 0u);
  EXPECT_EQ(t->subscriptions, 0u);
  EXPECT_EQ(t->first_seq, 1u);
  EXPECT_EQ(t->last_seq, 10u);
  EXPECT_EQ(Seqs(m.store()), Range(1, 10));
}

TEST(RetentionTest, TrimsBelowTheLowestCheckpointMinusTheGrace) {
  MemStore m;
  ChangeMaker maker(m.store());
  for (int i = 0; i < 10; ++i) maker.Touch("p" + std::to_string(i % 3));
  ASSERT_TRUE(m.store()->feed().SetCheckpoint("fast", 8).ok());
  ASSERT_TRUE(m.store()->feed().SetCheckpoint("slow", 5).ok());

  Result<FeedTrimSummary> t = m.store()->maintenance().TrimFeed(2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->min_checkpoint, 5u);
  EXPECT_EQ(t->subscriptions, 2u);
  EXPECT_EQ(t->trimmed, 3u);
  EXPECT_EQ(t->first_seq, 4u);
  EXPECT_EQ(Seqs(m.store()), Range(4, 10));

  t = m.store()->maintenance().TrimFeed(0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->trimmed, 2u);
  EXPECT_EQ(Seqs(m.store()), Range(6, 10));
  // Trimming again is a no-op.
  EXPECT_EQ(m.store()->maintenance().TrimFeed(0)->trimmed, 0u);

  // Everyone at the end: the newest change stays.
  ASSERT_TRUE(m.store()->feed().SetCheckpoint("slow", 10).ok());
  ASSERT_TRUE(m.store()->feed().SetCheckpoint("fast", 10).ok());
  t = m.store()->maintenance().TrimFeed(0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->trimmed, 4u);
  EXPECT_EQ(t->first_seq, 10u);
  EXPECT_EQ(Seqs(m.store()), Range(10, 10));
  EXPECT_TRUE(m.store()->maintenance().Compact().ok());

  // The numbering goes on, also after a reopen (recovered from the newest).
  m.Reopen();
  maker.set_store(m.store());
  EXPECT_EQ(m.store()->feed().LastSeq(), 10u);
  EXPECT_EQ(maker.Touch("p0"), 11u);
  EXPECT_EQ(Seqs(m.store()), Range(10, 11));
  std::vector<Change> from_trimmed;
  ASSERT_TRUE(m.store()->feed().Read(2, 10, AppendTo<Change>(&from_trimmed)).ok());  // starts at
                                                                                     // what is left
  ASSERT_FALSE(from_trimmed.empty());
  EXPECT_EQ(from_trimmed.front().seq, 10u);
}

TEST(RetentionTest, SubscriptionsAcrossTrims) {
  MemStore m;
  ChangeMaker maker(m.store());
  for (int i = 0; i < 20; ++i) maker.Touch("p" + std::to_string(i % 4));
  std::vector<uint64_t> seen;
  auto record = [&](const Change& c) {
    seen.push_back(c.seq);
    return Status::OK();
  };
  SubscriptionOptions o;
  o.threads = 0;
  o.clock = m.clock();
  o.name = "first";
  auto first = Subscription::Start(m.store(), o, record);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->RunUntilIdle().ok());
  EXPECT_EQ(seen, Range(1, 20));
  ASSERT_EQ(m.store()->maintenance().TrimFeed(5)->trimmed, 15u);

  // A new subscription starts at the oldest change left.
  seen.clear();
  o.name = "second";
  auto second = Subscription::Start(m.store(), o, record);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(Checkpoint(m.store(), "second"), 15u);
  ASSERT_TRUE((*second)->RunUntilIdle().ok());
  EXPECT_EQ(seen, Range(16, 20));

  // Running subscriptions go on after a trim.
  seen.clear();
  maker.Touch("p9");
  ASSERT_EQ(m.store()->maintenance().TrimFeed(0)->trimmed, 5u);  // 16..20: 21, the newest, stays
  ASSERT_TRUE((*first)->RunUntilIdle().ok());
  ASSERT_TRUE((*second)->RunUntilIdle().ok());
  EXPECT_EQ(seen, (std::vector<uint64_t>{21, 21}));

  // A checkpoint below what is left cannot be honoured: refused, not skipped.
  ASSERT_TRUE(m.store()->feed().SetCheckpoint("stale", 3).ok());
  o.name = "stale";
  Result<std::unique_ptr<Subscription>> stale = Subscription::Start(m.store(), o, record);
  EXPECT_TRUE(stale.status().IsCorruption()) << stale.status().ToString();
}

}  // namespace
}  // namespace eventfold::feed_test
