// The command line's waits for a store (tools/store_waits.h) driven by a
// ManualClock: `feed --follow` lets go of the store between reads and waits
// on the clock, and opening a held store retries on the clock until its
// deadline. Threads hand over through callbacks; nothing sleeps on the wall
// clock (the real-time bounds below only keep a broken build from hanging).

#include "tools/store_waits.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/common/scratch_dir.h"

namespace eventfold::cli {
namespace {

using test_util::ScratchDir;

constexpr int64_t kStart = 1795000000000000;
constexpr auto kBound = std::chrono::seconds(60);  // a hang, not a race

std::string Receipt(const std::string& event_id, const std::string& receipt_id) {
  return R"({"event_id":")" + event_id +
         R"(","type":"receipt.issued","occurred_at":"2026-11-29T10:00:00Z","data":{"receipt_id":")" +
         receipt_id + R"("}})";
}

Options StoreOptions(Clock* clock) {
  Options o;
  o.clock = clock;
  return o;
}

void IngestOne(const std::string& dir, Clock* clock, const std::string& event_id,
               const std::string& id) {
  Result<std::unique_ptr<Store>> store = Store::Open(dir, StoreOptions(clock));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Ingest(Receipt(event_id, id)).outcome, Outcome::kAccepted);
}

// What the follower did, handed to the test thread.
struct Observed {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> ids;  // each change's entity id
  int rounds = 0;                // reads finished (stop() asked)
  int busy = 0;                  // on_busy calls
  bool stop = false;

  // Waits until `done` holds (under mu); false after kBound.
  template <typename Pred>
  bool WaitFor(Pred done) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, kBound, done);
  }
};

FollowOptions Follower(ManualClock* clock, Observed* seen) {
  FollowOptions o;
  o.clock = clock;
  o.poll_micros = 200 * 1000;
  o.on_change = [seen](const Change& c) {
    std::lock_guard lock(seen->mu);
    seen->ids.push_back(c.id);
  };
  o.on_busy = [seen] {
    std::lock_guard lock(seen->mu);
    ++seen->busy;
  };
  o.stop = [seen] {
    std::lock_guard lock(seen->mu);
    ++seen->rounds;
    seen->cv.notify_all();
    return seen->stop;
  };
  return o;
}

TEST(FollowFeed, LetsGoOfTheStoreBetweenReadsAndWaitsOnTheClock) {
  ScratchDir dir("follow");
  ManualClock clock(kStart);
  IngestOne(dir.path(), &clock, "evt_1", "rcp_1");
  Observed seen;
  std::future<Status> follower = std::async(
      std::launch::async, [&] { return FollowFeed(dir.path(), 0, Follower(&clock, &seen)); });
  ASSERT_TRUE(seen.WaitFor([&] { return seen.rounds == 1; }));
  EXPECT_EQ(seen.ids, std::vector<std::string>{"rcp_1"});
  // Between reads the store is closed: another writer opens it at once.
  IngestOne(dir.path(), &clock, "evt_2", "rcp_2");
  {
    // The clock has not moved: no second read yet.
    std::lock_guard lock(seen.mu);
    EXPECT_EQ(seen.rounds, 1);
  }
  clock.Advance(200 * 1000);
  ASSERT_TRUE(seen.WaitFor([&] { return seen.rounds == 2; }));
  EXPECT_EQ(seen.ids, (std::vector<std::string>{"rcp_1", "rcp_2"}));
  EXPECT_EQ(seen.busy, 0);
  {
    std::lock_guard lock(seen.mu);
    seen.stop = true;
  }
  clock.Advance(200 * 1000);
  ASSERT_EQ(follower.wait_for(kBound), std::future_status::ready);
  EXPECT_TRUE(follower.get().ok());
}

TEST(FollowFeed, SkipsARoundWhileAnotherProcessHoldsTheStore) {
  ScratchDir dir("follow-busy");
  ManualClock clock(kStart);
  IngestOne(dir.path(), &clock, "evt_1", "rcp_1");
  Result<std::unique_ptr<Store>> holder = Store::Open(dir.path(), StoreOptions(&clock));
  ASSERT_TRUE(holder.ok());
  Observed seen;
  std::future<Status> follower = std::async(
      std::launch::async, [&] { return FollowFeed(dir.path(), 0, Follower(&clock, &seen)); });
  ASSERT_TRUE(seen.WaitFor([&] { return seen.rounds == 1; }));
  clock.Advance(200 * 1000);
  ASSERT_TRUE(seen.WaitFor([&] { return seen.rounds == 2; }));
  {
    std::lock_guard lock(seen.mu);
    EXPECT_TRUE(seen.ids.empty());
    EXPECT_EQ(seen.busy, 1) << "said once per busy spell";
  }
  EXPECT_EQ((*holder)->Ingest(Receipt("evt_2", "rcp_2")).outcome, Outcome::kAccepted);
  holder->reset();
  clock.Advance(200 * 1000);
  ASSERT_TRUE(seen.WaitFor([&] { return seen.rounds == 3; }));
  EXPECT_EQ(seen.ids, (std::vector<std::string>{"rcp_1", "rcp_2"}));
  {
    std::lock_guard lock(seen.mu);
    seen.stop = true;
  }
  clock.Advance(200 * 1000);
  ASSERT_EQ(follower.wait_for(kBound), std::future_status::ready);
  EXPECT_TRUE(follower.get().ok());
}

TEST(FollowFeed, AMissingStoreIsAnError) {
  ScratchDir dir("follow-missing");
  ManualClock clock(kStart);
  Observed seen;
  Status st = FollowFeed(dir.path(), 0, Follower(&clock, &seen));
  EXPECT_FALSE(st.ok()) << "not waited for: only a held store is";
  EXPECT_EQ(seen.rounds, 0);
}

TEST(OpenWhenFree, TakesTheStoreOnceItsHolderLetsGo) {
  ScratchDir dir("open-free");
  ManualClock clock(kStart);
  IngestOne(dir.path(), &clock, "evt_1", "rcp_1");
  Result<std::unique_ptr<Store>> holder = Store::Open(dir.path(), StoreOptions(&clock));
  ASSERT_TRUE(holder.ok());
  std::promise<void> busy;
  BusyRetry retry;
  retry.clock = &clock;
  retry.on_busy = [&, said = false]() mutable {
    if (!said) busy.set_value();
    said = true;
  };
  std::future<Result<std::unique_ptr<Store>>> opener = std::async(
      std::launch::async, [&] { return OpenWhenFree(dir.path(), StoreOptions(&clock), retry); });
  ASSERT_EQ(busy.get_future().wait_for(kBound), std::future_status::ready);
  holder->reset();
  clock.Advance(retry.retry_micros);
  ASSERT_EQ(opener.wait_for(kBound), std::future_status::ready);
  Result<std::unique_ptr<Store>> store = opener.get();
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->Get("receipt", "rcp_1").ok());
}

TEST(OpenWhenFree, GivesUpWhenTheClockPassesTheDeadline) {
  ScratchDir dir("open-held");
  ManualClock clock(kStart);
  IngestOne(dir.path(), &clock, "evt_1", "rcp_1");
  Result<std::unique_ptr<Store>> holder = Store::Open(dir.path(), StoreOptions(&clock));
  ASSERT_TRUE(holder.ok());
  std::mutex mu;
  std::condition_variable cv;
  int attempts = 0;
  BusyRetry retry;
  retry.clock = &clock;
  retry.on_busy = [&] {
    std::lock_guard lock(mu);
    ++attempts;
    cv.notify_all();
  };
  std::future<Result<std::unique_ptr<Store>>> opener = std::async(
      std::launch::async, [&] { return OpenWhenFree(dir.path(), StoreOptions(&clock), retry); });
  // Step the clock one retry at a time, each after the opener's next busy
  // answer: it tries max_wait / retry times, then stops.
  const int expected = static_cast<int>(retry.max_wait_micros / retry.retry_micros);
  for (int i = 1; i <= expected; ++i) {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kBound, [&] { return attempts >= i; })) << i;
    lock.unlock();
    clock.Advance(retry.retry_micros);
  }
  ASSERT_EQ(opener.wait_for(kBound), std::future_status::ready);
  Result<std::unique_ptr<Store>> store = opener.get();
  EXPECT_TRUE(store.status().IsBusy()) << store.status().ToString();
  EXPECT_EQ(attempts, expected);
}

}  // namespace
}  // namespace eventfold::cli
