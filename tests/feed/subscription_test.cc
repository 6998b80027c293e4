// Subscriptions (eventfold/subscription.h), driven deterministically on a
// ManualClock with threads == 0 (RunUntilIdle), plus threaded runs: at-least-
// once delivery with a contiguous checkpoint, per-entity order with blocked
// entities, parking with every attempt, retry timing, redrive and drop,
// restarts. Nothing here sleeps.

#include "eventfold/subscription.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/feed/feed_test_util.h"

namespace eventfold::feed_test {
namespace {

// Records every call of the handler; `decide` says how a call ends.
class Recorder {
 public:
  explicit Recorder(Clock* clock) : clock_(clock) {}

  // (change, its how-many-th call, 1-based) -> the handler's answer.
  std::function<Status(const Change&, int)> decide = [](const Change&, int) {
    return Status::OK();
  };

  ChangeHandler Handler() {
    return [this](const Change& c) {
      int n = 0;
      {
        std::lock_guard lock(mu_);
        calls_.push_back(c.seq);
        times_[c.seq].push_back(clock_->NowMicros());
        n = static_cast<int>(times_[c.seq].size());
      }
      Status st = decide(c, n);
      if (st.ok()) {
        std::lock_guard lock(mu_);
        handled_.push_back(c.seq);
        entity_of_[c.seq] = c.id;
      }
      return st;
    };
  }

  std::vector<uint64_t> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::vector<uint64_t> handled() {
    std::lock_guard lock(mu_);
    return handled_;
  }
  std::vector<int64_t> times(uint64_t seq) {
    std::lock_guard lock(mu_);
    return times_[seq];
  }
  // The highest h such that every seq 1..h was handled OK at least once.
  uint64_t ContiguousHandled() {
    std::lock_guard lock(mu_);
    std::set<uint64_t> done(handled_.begin(), handled_.end());
    uint64_t h = 0;
    while (done.contains(h + 1)) ++h;
    return h;
  }

 private:
  Clock* clock_;
  std::mutex mu_;
  std::vector<uint64_t> calls_;
  std::vector<uint64_t> handled_;
  std::map<uint64_t, std::vector<int64_t>> times_;
  std::map<uint64_t, std::string> entity_of_;
};

SubscriptionOptions DrivenOptions(const std::string& name, Clock* clock) {
  SubscriptionOptions o;
  o.name = name;
  o.threads = 0;
  o.clock = clock;
  o.jitter = 0;
  return o;
}

std::unique_ptr<Subscription> MustStart(Store* store, SubscriptionOptions o, ChangeHandler h) {
  Result<std::unique_ptr<Subscription>> s = Subscription::Start(store, std::move(o), std::move(h));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// Seqs of `all` whose change is of product `pid`, in order.
std::vector<uint64_t> Only(const std::vector<uint64_t>& all, ChangeMaker& maker,
                           const std::string& pid) {
  std::vector<uint64_t> out;
  for (uint64_t s : all) {
    if (maker.EntityOf(s) == pid) out.push_back(s);
  }
  return out;
}

std::vector<uint64_t> ParkedSeqs(Store* store, const std::string& name) {
  std::vector<uint64_t> out;
  for (const ParkedChange& p : Parked(store, name)) out.push_back(p.change.seq);
  return out;
}

TEST(SubscriptionTest, AtLeastOnceWithAContiguousCheckpoint) {
  const uint64_t seed = TestSeed("AtLeastOnceWithAContiguousCheckpoint", 7);
  MemStore m;
  ChangeMaker maker(m.store());
  std::mt19937_64 rng(seed);
  auto touch_some = [&](int n) {
    for (int i = 0; i < n; ++i) maker.Touch("p" + std::to_string(rng() % 10));
  };
  touch_some(200);

  Recorder rec(m.clock());
  std::mutex rng_mu;
  std::mt19937_64 fail_rng(seed + 1);
  rec.decide = [&](const Change&, int) {
    std::lock_guard lock(rng_mu);
    return fail_rng() % 10 < 3 ? Status::Unavailable("flaky") : Status::OK();
  };
  SubscriptionOptions o = DrivenOptions("worker", m.clock());
  o.max_attempts = 60;  // 0.3^60: nothing parks
  o.jitter = 0.2;
  o.seed = seed;
  o.max_in_flight = 64;  // so the feed is read in several steps
  auto sub = MustStart(m.store(), o, rec.Handler());
  ASSERT_NE(sub, nullptr);

  for (int round = 0; round < 10000; ++round) {
    ASSERT_TRUE(sub->RunUntilIdle().ok());
    // The saved checkpoint never passes a change that was not handled.
    const uint64_t cp = Checkpoint(m.store(), "worker");
    ASSERT_LE(cp, rec.ContiguousHandled()) << "round " << round;
    if (round == 3) touch_some(100);  // the feed grows while it runs
    std::optional<int64_t> next = sub->NextRetryMicros();
    if (next) {
      m.clock()->Set(std::max(*next, m.clock()->NowMicros()));
    } else if (cp == m.store()->feed().LastSeq()) {
      break;
    }
  }
  const uint64_t last = m.store()->feed().LastSeq();
  ASSERT_EQ(last, 300u);
  EXPECT_EQ(Checkpoint(m.store(), "worker"), last);
  EXPECT_EQ(rec.ContiguousHandled(), last);
  EXPECT_TRUE(Parked(m.store(), "worker").empty());

  // Per entity, calls (failed ones included) never go back in seq: a later
  // change was not delivered while an earlier one was unfinished.
  std::map<std::string, uint64_t> last_call;
  for (uint64_t s : rec.calls()) {
    uint64_t& prev = last_call[maker.EntityOf(s)];
    EXPECT_GE(s, prev) << "entity " << maker.EntityOf(s);
    prev = s;
  }
  const SubscriptionStats stats = sub->Stats();
  EXPECT_EQ(stats.handled, last);
  EXPECT_GT(stats.failed, 0u);
  EXPECT_EQ(stats.in_flight, 0u);
  EXPECT_EQ(stats.checkpoint, last);
}

TEST(SubscriptionTest, ABlockedEntityWaitsWhileOthersFlow) {
  MemStore m;
  ChangeMaker maker(m.store());
  // a1 b1 a2 b2 a3 b3 a4 b4
  std::vector<uint64_t> s = maker.TouchAll({"a", "b", "a", "b", "a", "b", "a", "b"});
  const uint64_t a2 = s[2];
  Recorder rec(m.clock());
  bool fail_a2 = true;
  rec.decide = [&](const Change& c, int) {
    return c.seq == a2 && fail_a2 ? Status::Unavailable("a2 is down") : Status::OK();
  };
  SubscriptionOptions o = DrivenOptions("w", m.clock());
  o.max_attempts = 3;
  auto sub = MustStart(m.store(), o, rec.Handler());

  ASSERT_TRUE(sub->RunUntilIdle().ok());
  // b flows; a stops at a2, and a3, a4 wait behind it.
  EXPECT_EQ(Only(rec.calls(), maker, "b"), (std::vector<uint64_t>{s[1], s[3], s[5], s[7]}));
  EXPECT_EQ(Only(rec.calls(), maker, "a"), (std::vector<uint64_t>{s[0], a2}));
  EXPECT_EQ(Checkpoint(m.store(), "w"), a2 - 1);
  ASSERT_EQ(sub->NextRetryMicros(), kT0 + 1 * kSecond);

  m.clock()->Advance(kSecond);
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(Only(rec.calls(), maker, "a"), (std::vector<uint64_t>{s[0], a2, a2}));
  m.clock()->Advance(2 * kSecond);
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  // The third attempt failed: a2 is parked, and a3, a4 behind it without
  // ever being delivered; the checkpoint moves past all of them.
  EXPECT_EQ(Only(rec.calls(), maker, "a"), (std::vector<uint64_t>{s[0], a2, a2, a2}));
  std::vector<ParkedChange> parked = Parked(m.store(), "w");
  ASSERT_EQ(parked.size(), 3u);
  EXPECT_EQ(parked[0].change.seq, a2);
  EXPECT_EQ(parked[0].attempts.size(), 3u);
  EXPECT_EQ(parked[1].change.seq, s[4]);
  EXPECT_TRUE(parked[1].attempts.empty());
  EXPECT_EQ(parked[2].change.seq, s[6]);
  EXPECT_EQ(Checkpoint(m.store(), "w"), s.back());
  EXPECT_FALSE(sub->NextRetryMicros().has_value());

  // New changes: b's are delivered, a's are parked behind a2.
  const uint64_t a5 = maker.Touch("a"), b5 = maker.Touch("b");
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(rec.handled().back(), b5);
  EXPECT_EQ(ParkedSeqs(m.store(), "w"), (std::vector<uint64_t>{a2, s[4], s[6], a5}));
  EXPECT_EQ(Checkpoint(m.store(), "w"), b5);

  // Redrive (any of a's dead letters means the entity): in seq order.
  fail_a2 = false;
  Result<size_t> marked = sub->Redrive(s[4]);
  ASSERT_TRUE(marked.ok()) << marked.status().ToString();
  EXPECT_EQ(*marked, 4u);
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(Only(rec.handled(), maker, "a"), (std::vector<uint64_t>{s[0], a2, s[4], s[6], a5}));
  EXPECT_TRUE(Parked(m.store(), "w").empty());
  // Unblocked: the next change of a is delivered normally.
  const uint64_t a6 = maker.Touch("a");
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(rec.handled().back(), a6);
  EXPECT_TRUE(Parked(m.store(), "w").empty());
  EXPECT_EQ(Checkpoint(m.store(), "w"), a6);
  EXPECT_EQ(sub->Stats().redriven, 4u);
}

TEST(SubscriptionTest, ParkingKeepsEveryAttemptsTimeAndErrorCutTo1KiB) {
  MemStore m;
  ChangeMaker maker(m.store());
  const uint64_t seq = maker.Touch("p");
  Recorder rec(m.clock());
  // A two-byte character straddling byte 1024 is not split.
  const std::string straddling = std::string(1023, 'x') + "\xc3\xa9" + std::string(3000, 'y');
  rec.decide = [&](const Change&, int call) {
    if (call == 1) return Status::Unavailable(straddling);
    if (call == 2) return Status::Unavailable(std::string(5000, 'z'));
    if (call == 3) throw std::runtime_error("boom");
    return Status::Unavailable("");  // no message: the code name stands in
  };
  SubscriptionOptions o = DrivenOptions("w", m.clock());
  o.max_attempts = 4;
  o.initial_backoff_micros = 10 * kSecond;
  o.backoff_multiplier = 3;
  auto sub = MustStart(m.store(), o, rec.Handler());
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  for (int i = 0; i < 3; ++i) {
    std::optional<int64_t> next = sub->NextRetryMicros();
    ASSERT_TRUE(next.has_value());
    m.clock()->Set(*next);
    ASSERT_TRUE(sub->RunUntilIdle().ok());
  }
  std::vector<ParkedChange> parked = Parked(m.store(), "w");
  ASSERT_EQ(parked.size(), 1u);
  const ParkedChange& p = parked[0];
  EXPECT_EQ(p.subscription, "w");
  EXPECT_EQ(p.change.seq, seq);
  EXPECT_EQ(p.change.id, "p");
  EXPECT_FALSE(p.redrive);
  ASSERT_EQ(p.attempts.size(), 4u);
  const std::vector<int64_t> times = rec.times(seq);
  ASSERT_EQ(times, (std::vector<int64_t>{kT0, kT0 + 10 * kSecond, kT0 + 40 * kSecond,
                                         kT0 + 130 * kSecond}));
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(p.attempts[i].at, times[i]);
  EXPECT_EQ(p.attempts[0].error, std::string(1023, 'x'));
  EXPECT_EQ(p.attempts[1].error, std::string(1024, 'z'));
  EXPECT_EQ(p.attempts[2].error, "handler threw: boom");
  EXPECT_EQ(p.attempts[3].error, "Unavailable");
  // The JSON of `dlq list`.
  const std::string json = ParkedChangeToJson(p);
  EXPECT_NE(json.find("\"subscription\":\"w\""), std::string::npos);
  EXPECT_NE(json.find("\"redrive\":false"), std::string::npos);
  EXPECT_EQ(Checkpoint(m.store(), "w"), seq);
}

// Runs one change that always fails through every attempt; returns the
// delays between consecutive attempts, checking that nothing runs early.
std::vector<int64_t> RetryDelays(SubscriptionOptions o) {
  MemStore m;
  ChangeMaker maker(m.store());
  const uint64_t seq = maker.Touch("p");
  Recorder rec(m.clock());
  rec.decide = [](const Change&, int) { return Status::Unavailable("no"); };
  o.clock = m.clock();
  auto sub = MustStart(m.store(), o, rec.Handler());
  EXPECT_TRUE(sub->RunUntilIdle().ok());
  for (int i = 1; i < o.max_attempts; ++i) {
    std::optional<int64_t> next = sub->NextRetryMicros();
    EXPECT_TRUE(next.has_value());
    if (!next) break;
    m.clock()->Set(*next - 1);  // one microsecond early: nothing happens
    EXPECT_TRUE(sub->RunUntilIdle().ok());
    EXPECT_EQ(rec.times(seq).size(), static_cast<size_t>(i));
    m.clock()->Set(*next);
    EXPECT_TRUE(sub->RunUntilIdle().ok());
    EXPECT_EQ(rec.times(seq).size(), static_cast<size_t>(i + 1));
  }
  EXPECT_FALSE(sub->NextRetryMicros().has_value());
  EXPECT_EQ(Parked(m.store(), o.name).size(), 1u);
  std::vector<int64_t> t = rec.times(seq), delays;
  for (size_t i = 1; i < t.size(); ++i) delays.push_back(t[i] - t[i - 1]);
  return delays;
}

TEST(SubscriptionTest, RetryDelaysFollowTheBackoffExactly) {
  SubscriptionOptions o;
  o.name = "w";
  o.threads = 0;
  o.jitter = 0;
  o.max_attempts = 6;
  o.initial_backoff_micros = 1 * kSecond;
  o.backoff_multiplier = 2;
  o.max_backoff_micros = 5 * kSecond;
  EXPECT_EQ(RetryDelays(o), (std::vector<int64_t>{1 * kSecond, 2 * kSecond, 4 * kSecond,
                                                  5 * kSecond, 5 * kSecond}));
}

TEST(SubscriptionTest, RetryDelaysStayWithinTheJitterAndFollowTheSeed) {
  const uint64_t seed = TestSeed("RetryDelaysStayWithinTheJitterAndFollowTheSeed", 42);
  SubscriptionOptions o;
  o.name = "w";
  o.threads = 0;
  o.jitter = 0.2;
  o.seed = seed;
  o.max_attempts = 8;
  const std::vector<int64_t> delays = RetryDelays(o);
  ASSERT_EQ(delays.size(), 7u);
  bool all_exact = true;
  for (size_t k = 0; k < delays.size(); ++k) {
    const double base = 1e6 * static_cast<double>(1 << k);  // 1 s, 2 s, ... 64 s
    EXPECT_GE(delays[k], std::llround(base * 0.8)) << "retry " << k + 1;
    EXPECT_LE(delays[k], std::llround(base * 1.2)) << "retry " << k + 1;
    all_exact = all_exact && delays[k] == std::llround(base);
  }
  EXPECT_FALSE(all_exact);            // jitter does spread them
  EXPECT_EQ(RetryDelays(o), delays);  // the same seed, the same delays
  o.seed = seed + 1;
  EXPECT_NE(RetryDelays(o), delays);
}

TEST(SubscriptionTest, RedriveGoesPerEntityInSeqOrder) {
  MemStore m;
  ChangeMaker maker(m.store());
  std::vector<uint64_t> s = maker.TouchAll({"a", "b", "a", "b", "c"});
  Recorder rec(m.clock());
  bool failing = true;
  rec.decide = [&](const Change& c, int) {
    return failing && c.id != "c" ? Status::Unavailable("down") : Status::OK();
  };
  SubscriptionOptions o = DrivenOptions("w", m.clock());
  o.max_attempts = 1;
  auto sub = MustStart(m.store(), o, rec.Handler());
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(ParkedSeqs(m.store(), "w"), (std::vector<uint64_t>{s[0], s[1], s[2], s[3]}));
  EXPECT_EQ(Checkpoint(m.store(), "w"), s[4]);

  failing = false;
  ASSERT_EQ(*sub->Redrive(s[3]), 2u);  // b's two dead letters
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(Only(rec.handled(), maker, "b"), (std::vector<uint64_t>{s[1], s[3]}));
  EXPECT_TRUE(Only(rec.handled(), maker, "a").empty());
  EXPECT_EQ(ParkedSeqs(m.store(), "w"), (std::vector<uint64_t>{s[0], s[2]}));

  Result<size_t> unknown = sub->Redrive(999);
  EXPECT_TRUE(unknown.status().IsNotFound());
  ASSERT_EQ(*sub->Redrive(), 2u);
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(Only(rec.handled(), maker, "a"), (std::vector<uint64_t>{s[0], s[2]}));
  EXPECT_TRUE(Parked(m.store(), "w").empty());
}

TEST(SubscriptionTest, AFailedRedriveParksAgainWithEveryAttemptAndStaysBlocked) {
  MemStore m;
  ChangeMaker maker(m.store());
  const uint64_t a1 = maker.Touch("a"), a2 = maker.Touch("a");
  Recorder rec(m.clock());
  bool failing = true;
  rec.decide = [&](const Change& c, int) {
    return failing && c.seq == a1 ? Status::Unavailable("down") : Status::OK();
  };
  SubscriptionOptions o = DrivenOptions("w", m.clock());
  o.max_attempts = 2;
  auto sub = MustStart(m.store(), o, rec.Handler());
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  m.clock()->Advance(kSecond);
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  ASSERT_EQ(ParkedSeqs(m.store(), "w"), (std::vector<uint64_t>{a1, a2}));

  ASSERT_EQ(*sub->Redrive(), 2u);
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  m.clock()->Advance(kSecond);
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  std::vector<ParkedChange> parked = Parked(m.store(), "w");
  ASSERT_EQ(parked.size(), 2u);
  EXPECT_EQ(parked[0].change.seq, a1);
  EXPECT_FALSE(parked[0].redrive);
  ASSERT_EQ(parked[0].attempts.size(), 4u);  // the first two, then the redrive's
  EXPECT_EQ(parked[0].attempts[2].at, kT0 + 1 * kSecond);
  EXPECT_EQ(parked[0].attempts[3].at, kT0 + 2 * kSecond);
  // a2 was not delivered behind the failed a1; a new change parks too.
  EXPECT_TRUE(Only(rec.calls(), maker, "a") == (std::vector<uint64_t>{a1, a1, a1, a1}));
  const uint64_t a3 = maker.Touch("a");
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(ParkedSeqs(m.store(), "w"), (std::vector<uint64_t>{a1, a2, a3}));

  failing = false;
  ASSERT_EQ(*sub->Redrive(a1), 3u);
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(Only(rec.handled(), maker, "a"), (std::vector<uint64_t>{a1, a2, a3}));
  EXPECT_TRUE(Parked(m.store(), "w").empty());
}

TEST(SubscriptionTest, DropUnblocksOnceNoDeadLetterIsLeft) {
  MemStore m;
  ChangeMaker maker(m.store());
  const uint64_t a1 = maker.Touch("a"), a2 = maker.Touch("a");
  Recorder rec(m.clock());
  rec.decide = [&](const Change& c, int) {
    return c.seq == a1 ? Status::Unavailable("down") : Status::OK();
  };
  SubscriptionOptions o = DrivenOptions("w", m.clock());
  o.max_attempts = 1;
  auto sub = MustStart(m.store(), o, rec.Handler());
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  ASSERT_EQ(ParkedSeqs(m.store(), "w"), (std::vector<uint64_t>{a1, a2}));

  ASSERT_EQ(*sub->Drop(a1), 1u);
  EXPECT_TRUE(sub->Drop(a1).status().IsNotFound());
  const uint64_t a3 = maker.Touch("a");
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  // Still behind a2's dead letter.
  EXPECT_EQ(ParkedSeqs(m.store(), "w"), (std::vector<uint64_t>{a2, a3}));
  EXPECT_TRUE(Only(rec.handled(), maker, "a").empty());

  ASSERT_EQ(*sub->Drop(), 2u);
  const uint64_t a4 = maker.Touch("a");
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(Only(rec.handled(), maker, "a"), (std::vector<uint64_t>{a4}));
  EXPECT_TRUE(Parked(m.store(), "w").empty());
  EXPECT_EQ(Checkpoint(m.store(), "w"), a4);
}

TEST(SubscriptionTest, RestartResumesAtTheCheckpointAndPicksUpMarksMadeOutside) {
  MemStore m;
  ChangeMaker maker(m.store());
  std::vector<uint64_t> s = maker.TouchAll({"a", "a", "b", "c"});
  Recorder rec(m.clock());
  bool failing = true;
  rec.decide = [&](const Change& c, int) {
    if (failing && c.id == "a") return Status::Unavailable("a is down");
    if (failing && c.id == "c") return Status::Unavailable("c is slow");
    return Status::OK();
  };
  SubscriptionOptions o = DrivenOptions("w", m.clock());
  o.max_attempts = 1;
  {
    auto sub = MustStart(m.store(), o, rec.Handler());
    ASSERT_TRUE(sub->RunUntilIdle().ok());
  }
  // a parked (with a2 behind), b handled, c parked.
  EXPECT_EQ(ParkedSeqs(m.store(), "w"), (std::vector<uint64_t>{s[0], s[1], s[3]}));
  EXPECT_EQ(Checkpoint(m.store(), "w"), s[3]);

  // Marked while no subscription runs (as `eventfold dlq retry` does), and
  // one dropped.
  Result<size_t> marked = MarkForRedrive(m.store(), "w", s[1]);
  ASSERT_TRUE(marked.ok());
  EXPECT_EQ(*marked, 2u);
  ASSERT_EQ(*DropParked(m.store(), "w", s[3]), 1u);
  failing = false;
  const uint64_t b2 = maker.Touch("b");
  auto sub = MustStart(m.store(), o, rec.Handler());
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  // Nothing below the checkpoint again; the marked ones in order.
  EXPECT_EQ(rec.handled(), (std::vector<uint64_t>{s[2], s[0], s[1], b2}));
  EXPECT_TRUE(Parked(m.store(), "w").empty());
}

TEST(SubscriptionTest, StopLeavesAnUnfinishedChangeForTheNextStart) {
  MemStore m;
  ChangeMaker maker(m.store());
  std::vector<uint64_t> s = maker.TouchAll({"a", "b", "c"});
  Recorder rec(m.clock());
  rec.decide = [&](const Change& c, int call) {
    return c.id == "b" && call == 1 ? Status::Unavailable("once") : Status::OK();
  };
  SubscriptionOptions o = DrivenOptions("w", m.clock());
  {
    auto sub = MustStart(m.store(), o, rec.Handler());
    ASSERT_TRUE(sub->RunUntilIdle().ok());
    sub->Stop();
    sub->Stop();  // idempotent
    EXPECT_TRUE(sub->RunUntilIdle().IsUnavailable());
  }
  EXPECT_EQ(Checkpoint(m.store(), "w"), s[0]);  // b is unfinished
  auto sub = MustStart(m.store(), o, rec.Handler());
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  // b again (at once: a new start does not wait out the old backoff), and
  // c again: it was handled, but behind the checkpoint (at least once).
  EXPECT_EQ(rec.handled(), (std::vector<uint64_t>{s[0], s[2], s[1], s[2]}));
  EXPECT_EQ(Checkpoint(m.store(), "w"), s[2]);
}

// After a crash the checkpoint may lag behind dead letters: a change already
// parked is not parked again (its attempts stay), and a marked one is
// redriven only after the entity's earlier changes.
TEST(SubscriptionTest, ALaggingCheckpointKeepsDeadLettersAndOrder) {
  MemStore m;
  ChangeMaker maker(m.store());
  std::vector<uint64_t> s = maker.TouchAll({"a", "b", "a", "b", "a", "a", "c", "c"});
  std::vector<Change> feed = ReadAll(m.store());
  // As a crashed run left it: s[4] (a) parked and marked, s[6] (c) parked;
  // the checkpoint still at s[1].
  ParkedChange a5{"w", feed[4], {{kT0, "earlier failure"}}, /*redrive=*/true};
  ParkedChange c7{"w", feed[6], {{kT0, "c failure"}}, /*redrive=*/false};
  ASSERT_TRUE(m.store()->feed().Park(a5).ok());
  ASSERT_TRUE(m.store()->feed().Park(c7).ok());
  ASSERT_TRUE(m.store()->feed().SetCheckpoint("w", s[1]).ok());

  Recorder rec(m.clock());
  SubscriptionOptions o = DrivenOptions("w", m.clock());
  o.max_in_flight = 1;  // read one change at a time
  auto sub = MustStart(m.store(), o, rec.Handler());
  ASSERT_TRUE(sub->RunUntilIdle().ok());
  EXPECT_EQ(Only(rec.calls(), maker, "a"), (std::vector<uint64_t>{s[2], s[4], s[5]}));
  EXPECT_TRUE(Only(rec.calls(), maker, "c").empty());
  std::vector<ParkedChange> parked = Parked(m.store(), "w");
  ASSERT_EQ(parked.size(), 2u);
  EXPECT_EQ(parked[0], c7);  // untouched
  EXPECT_EQ(parked[1].change.seq, s[7]);
  EXPECT_TRUE(parked[1].attempts.empty());
  EXPECT_EQ(Checkpoint(m.store(), "w"), s[7]);
}

TEST(SubscriptionTest, ThreadedDeliveryKeepsEntitiesSerialAndInOrder) {
  const uint64_t seed = TestSeed("ThreadedDeliveryKeepsEntitiesSerialAndInOrder", 3);
  MemStore m;
  ChangeMaker maker(m.store());
  std::mt19937_64 rng(seed);
  constexpr int kProducts = 30;
  for (int i = 0; i < 1500; ++i) maker.Touch("p" + std::to_string(rng() % kProducts));

  std::mutex mu;
  std::map<std::string, std::vector<uint64_t>> handled;  // per entity
  std::map<std::string, int> running;
  bool overlap = false;
  std::atomic<uint64_t> calls{0};
  ChangeHandler handler = [&](const Change& c) {
    {
      std::lock_guard lock(mu);
      if (running[c.id]++ != 0) overlap = true;
    }
    const uint64_t n = calls.fetch_add(1);
    std::lock_guard lock(mu);
    --running[c.id];
    if (n % 7 == 0) return Status::Unavailable("every seventh call fails");
    handled[c.id].push_back(c.seq);
    return Status::OK();
  };
  SubscriptionOptions o;
  o.name = "threaded";
  o.threads = 4;
  o.clock = m.clock();
  o.initial_backoff_micros = 0;  // retries at once: the ManualClock stands still
  o.max_attempts = 100;
  o.max_in_flight = 128;
  auto sub = MustStart(m.store(), o, handler);
  // More changes while it runs.
  std::thread producer([&] {
    std::mt19937_64 prng(seed + 1);
    for (int i = 0; i < 1500; ++i) maker.Touch("p" + std::to_string(prng() % kProducts));
  });
  producer.join();
  const uint64_t last = m.store()->feed().LastSeq();
  ASSERT_EQ(last, 3000u);
  ASSERT_TRUE(sub->WaitForCheckpoint(last, 60'000'000)) << sub->Stats().checkpoint;
  sub->Stop();
  EXPECT_FALSE(overlap) << "two changes of one entity ran at once";
  std::set<uint64_t> all;
  for (const auto& [id, seqs] : handled) {
    EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end())) << id;
    all.insert(seqs.begin(), seqs.end());
  }
  EXPECT_EQ(all.size(), last);
  EXPECT_EQ(Checkpoint(m.store(), "threaded"), last);
  EXPECT_TRUE(sub->Stats().last_error.ok());
}

TEST(SubscriptionTest, ThreadedRetriesWaitForTheInjectedClock) {
  MemStore m;
  ChangeMaker maker(m.store());
  const uint64_t a1 = maker.Touch("a");
  for (int i = 0; i < 20; ++i) maker.Touch("b" + std::to_string(i));
  std::atomic<int> a_calls{0};
  ChangeHandler handler = [&](const Change& c) {
    if (c.seq == a1 && a_calls.fetch_add(1) == 0) return Status::Unavailable("first");
    return Status::OK();
  };
  SubscriptionOptions o;
  o.name = "w";
  o.threads = 2;
  o.clock = m.clock();
  o.jitter = 0;
  o.initial_backoff_micros = 60 * kSecond;
  auto sub = MustStart(m.store(), o, handler);
  // Everything but a1 is handled; the checkpoint stays below it until the
  // clock reaches its retry.
  for (;;) {
    SubscriptionStats st = sub->Stats();
    if (st.handled == 20 && st.failed == 1) break;
    std::this_thread::yield();
  }
  EXPECT_EQ(sub->Stats().checkpoint, 0u);
  EXPECT_EQ(a_calls.load(), 1);
  m.clock()->Advance(60 * kSecond);
  ASSERT_TRUE(sub->WaitForCheckpoint(21, 30'000'000));
  EXPECT_EQ(a_calls.load(), 2);
}

// The injected clock, recording every deadline waited for on it.
class RecordingClock final : public Clock {
 public:
  explicit RecordingClock(ManualClock* inner) : inner_(inner) {}
  int64_t NowMicros() const override { return inner_->NowMicros(); }
  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 int64_t deadline_micros) const override {
    {
      std::lock_guard guard(mu_);
      deadlines_.insert(deadline_micros);
    }
    inner_->WaitUntil(lock, cv, deadline_micros);
  }
  bool WaitedFor(int64_t deadline_micros) const {
    std::lock_guard guard(mu_);
    return deadlines_.contains(deadline_micros);
  }

 private:
  ManualClock* inner_;
  mutable std::mutex mu_;
  mutable std::set<int64_t> deadlines_;
};

// A worker with nothing due waits on the injected Clock for the earliest
// retry (no real-time polling): it is seen waiting for exactly that time.
TEST(SubscriptionTest, ThreadedWorkersWaitOnTheClockForTheNextRetry) {
  MemStore m;
  ChangeMaker maker(m.store());
  const uint64_t a1 = maker.Touch("a");
  std::atomic<int> calls{0};
  ChangeHandler handler = [&](const Change& c) {
    if (c.seq == a1 && calls.fetch_add(1) == 0) return Status::Unavailable("first");
    return Status::OK();
  };
  RecordingClock clock(m.clock());
  SubscriptionOptions o;
  o.name = "w";
  o.threads = 2;
  o.clock = &clock;
  o.jitter = 0;
  o.initial_backoff_micros = 60 * kSecond;
  auto sub = MustStart(m.store(), o, handler);
  while (sub->Stats().failed < 1) std::this_thread::yield();
  const std::optional<int64_t> due = sub->NextRetryMicros();
  ASSERT_TRUE(due);
  EXPECT_EQ(*due, m.clock()->NowMicros() + 60 * kSecond);
  // A bound for a loaded machine, not a timing assumption.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!clock.WaitedFor(*due) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(clock.WaitedFor(*due)) << "no worker waited on the Clock for the retry";
  m.clock()->Advance(60 * kSecond);
  ASSERT_TRUE(sub->WaitForCheckpoint(a1, 30'000'000));
  EXPECT_EQ(calls.load(), 2);
}

TEST(SubscriptionTest, StartRefusesBadOptionsAndASecondInstance) {
  MemStore m;
  auto ok = [](const Change&) { return Status::OK(); };
  SubscriptionOptions o = DrivenOptions("", m.clock());
  EXPECT_TRUE(Subscription::Start(m.store(), o, ok).status().IsInvalidArgument());
  o.name = "w";
  o.max_attempts = 0;
  EXPECT_TRUE(Subscription::Start(m.store(), o, ok).status().IsInvalidArgument());
  o.max_attempts = 3;
  o.jitter = 1;
  EXPECT_TRUE(Subscription::Start(m.store(), o, ok).status().IsInvalidArgument());
  o.jitter = 0;
  EXPECT_TRUE(Subscription::Start(m.store(), o, nullptr).status().IsInvalidArgument());
  auto first = MustStart(m.store(), o, ok);
  EXPECT_TRUE(Subscription::Start(m.store(), o, ok).status().IsBusy());
  first.reset();
  auto again = MustStart(m.store(), o, ok);
  EXPECT_NE(again, nullptr);
  o.name = "threaded";
  o.threads = 1;
  auto threaded = MustStart(m.store(), o, ok);
  EXPECT_TRUE(threaded->RunUntilIdle().IsInvalidArgument());
  // A new subscription registers its checkpoint at once.
  std::set<std::string> names;
  ASSERT_TRUE(m.store()
                  ->feed()
                  .ListSubscriptions([&](const std::string& n, uint64_t) {
                    names.insert(n);
                    return true;
                  })
                  .ok());
  EXPECT_EQ(names, (std::set<std::string>{"threaded", "w"}));
}

// The claim that refuses a second instance is the store object's own: a
// name claimed directly refuses Start, a running subscription refuses a
// claim, each ends with its holder, and a reopened store starts with none.
TEST(SubscriptionTest, ClaimsOfANameBelongToTheStoreObject) {
  MemStore m;
  auto ok = [](const Change&) { return Status::OK(); };
  SubscriptionOptions o = DrivenOptions("w", m.clock());
  ChangeFeed& feed = m.store()->feed();
  ASSERT_TRUE(feed.ClaimSubscription("w"));
  EXPECT_FALSE(feed.ClaimSubscription("w"));
  EXPECT_TRUE(Subscription::Start(m.store(), o, ok).status().IsBusy());
  feed.ReleaseSubscription("w");
  feed.ReleaseSubscription("never claimed");  // ignored
  auto sub = MustStart(m.store(), o, ok);
  EXPECT_FALSE(feed.ClaimSubscription("w"));
  EXPECT_TRUE(feed.ClaimSubscription("other"));
  sub.reset();
  EXPECT_TRUE(feed.ClaimSubscription("w"));

  // Claims are not kept on disk: the reopened store holds none of them.
  m.Reopen();
  EXPECT_TRUE(m.store()->feed().ClaimSubscription("w"));
  EXPECT_TRUE(m.store()->feed().ClaimSubscription("other"));
  m.store()->feed().ReleaseSubscription("w");
  EXPECT_NE(MustStart(m.store(), o, ok), nullptr);
}

}  // namespace
}  // namespace eventfold::feed_test
