// Prefetch<T>: items in the producer's order, no more than `depth` made
// ahead of the consumer, and a Prefetch destroyed early stops its producer.
// Without a thread of its own (as when the system refuses it), the same
// items in the same order, each made on the caller's thread as asked for.

#include "tools/prefetch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <random>
#include <thread>

#include "tests/common/test_seed.h"

namespace eventfold::cli {
namespace {

TEST(Prefetch, ItemsComeInOrderAndNeverMoreThanDepthAhead) {
  std::mt19937_64 rng(test_util::TestSeed("Prefetch", 7));
  for (int round = 0; round < 20; ++round) {
    const int count = std::uniform_int_distribution<int>(0, 500)(rng);
    const size_t depth = std::uniform_int_distribution<size_t>(1, 4)(rng);
    std::atomic<int> made{0}, taken{0}, most_ahead{0};
    {
      Prefetch<int> items(
          [&]() -> std::optional<int> {
            // Made ahead of what the consumer has taken: the items waiting,
            // plus this one.
            const int ahead = made.load() - taken.load() + 1;
            if (ahead > most_ahead.load()) most_ahead.store(ahead);
            if (made.load() == count) return std::nullopt;
            return made.fetch_add(1);
          },
          depth);
      for (int want = 0; want < count; ++want) {
        std::optional<int> got = items.Next();
        ASSERT_TRUE(got.has_value()) << "round " << round << " item " << want;
        EXPECT_EQ(*got, want);
        taken.fetch_add(1);
      }
      EXPECT_FALSE(items.Next().has_value());
      EXPECT_FALSE(items.Next().has_value());  // and stays at the end
    }
    // Taken counts after Next returns, so the producer may be one more
    // ahead than the depth when it looks.
    EXPECT_LE(most_ahead.load(), static_cast<int>(depth) + 2) << "round " << round;
  }
}

TEST(Prefetch, DestroyedBeforeTheEndStopsItsProducer) {
  std::atomic<int> made{0};
  {
    Prefetch<int> endless([&]() -> std::optional<int> { return made.fetch_add(1); });
    EXPECT_EQ(endless.Next(), 0);
    EXPECT_EQ(endless.Next(), 1);
  }
  const int when_destroyed = made.load();
  // At most: the item taken, one waiting and one being made.
  EXPECT_LE(when_destroyed, 4);
}

TEST(Prefetch, WithoutAThreadMakesEachItemOnTheCallersThreadWhenAskedFor) {
  std::mt19937_64 rng(test_util::TestSeed("PrefetchInline", 7));
  for (int round = 0; round < 20; ++round) {
    const int count = std::uniform_int_distribution<int>(0, 500)(rng);
    const std::thread::id caller = std::this_thread::get_id();
    int made = 0, ends = 0;
    Prefetch<int> items(
        [&]() -> std::optional<int> {
          EXPECT_EQ(std::this_thread::get_id(), caller);
          if (made == count) {
            ++ends;
            return std::nullopt;
          }
          return made++;
        },
        /*depth=*/2, /*own_thread=*/false);
    EXPECT_FALSE(items.threaded());
    for (int want = 0; want < count; ++want) {
      EXPECT_EQ(made, want) << "round " << round << ": made ahead without a thread";
      std::optional<int> got = items.Next();
      ASSERT_TRUE(got.has_value()) << "round " << round << " item " << want;
      EXPECT_EQ(*got, want);
    }
    EXPECT_FALSE(items.Next().has_value());
    EXPECT_FALSE(items.Next().has_value());
    EXPECT_EQ(ends, 1) << "round " << round << ": the producer asked again after its end";
  }
}

}  // namespace
}  // namespace eventfold::cli
