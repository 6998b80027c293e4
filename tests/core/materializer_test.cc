// Materialize(): in-order events are applied to the stored projection without
// reading the log; an event that sorts earlier re-folds from the log (from
// the nearest snapshot before it). Either way the state equals the fold of
// every event, computed here with core Fold over the whole log.

#include "core/materializer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/rfc3339.h"
#include "eventfold/profile.h"

namespace eventfold {
namespace {

constexpr int64_t kT0 = 1795000000000000;
constexpr int64_t kSec = 1000000;

const EntityType& TypeOf(const std::string& entity) {
  return *Profile::ReceiptRoller().FindEntity(entity);
}

RankedEvent Ev(const std::string& id, const std::string& type, int64_t at,
               std::optional<int64_t> version = std::nullopt, std::vector<Field> data = {}) {
  const Route* route = Profile::ReceiptRoller().Find(type);
  EXPECT_NE(route, nullptr) << type;
  RankedEvent r;
  r.event.event_id = id;
  r.event.type = type;
  r.event.occurred_at = at;
  r.event.version = version;
  r.event.data = std::move(data);
  r.rank = route ? route->rank : 0;
  return r;
}

FoldKey Key(const RankedEvent& e) { return KeyOf(e.event, e.rank); }

// The fold of `events` (any order) from state none, as a projection state.
ProjectionState FoldAll(const EntityType& type, const EntityRef& ref,
                        std::vector<RankedEvent> events) {
  ProjectionState s;
  s.projection = Fold(type, ref, &events).value();
  s.events = events.size();
  if (!events.empty()) s.last = Key(events.back());
  return s;
}

// An entity's log and snapshots kept the way a store keeps them; counts
// every read the materializer makes.
class FakeLog : public LogView {
 public:
  Result<std::optional<ProjectionState>> SnapshotBefore(const FoldKey& key) override {
    ++snapshot_reads;
    if (!fail.ok()) return fail;
    std::optional<ProjectionState> found;
    for (const auto& [last, s] : snapshots) {
      if (last < key) found = s;
    }
    return found;
  }
  Status EventsAfter(const FoldKey* after, std::vector<RankedEvent>* out) override {
    ++event_reads;
    if (!fail.ok()) return fail;
    std::vector<RankedEvent> sorted = events;
    std::sort(sorted.begin(), sorted.end(), FoldsBefore);
    for (const RankedEvent& e : sorted) {
      if (!after || *after < Key(e)) out->push_back(e);
    }
    return Status::OK();
  }
  int reads() const { return snapshot_reads + event_reads; }

  std::vector<RankedEvent> events;               // the log
  std::map<FoldKey, ProjectionState> snapshots;  // by last key
  int snapshot_reads = 0, event_reads = 0;
  Status fail;
};

// Materializes `e` as the store does: then logs the event, drops stale
// snapshots and keeps the new ones.
Result<Materialized> Feed(const EntityType& type, const EntityRef& ref, const RankedEvent& e,
                          uint64_t interval, FakeLog* log, ProjectionState* state) {
  Result<Materialized> m = Materialize(type, ref, e, *log, interval, state);
  if (!m.ok()) return m;
  log->events.push_back(e);
  if (m->stale_after) {
    std::erase_if(log->snapshots, [&](const auto& kv) { return *m->stale_after < kv.first; });
  }
  for (const ProjectionState& s : m->snapshots) {
    log->snapshots[s.last] = s;
  }
  return m;
}

// True when `e` folds after every event of `log`: an in-order arrival.
bool SortsLast(const FakeLog& log, const RankedEvent& e) {
  return std::all_of(log.events.begin(), log.events.end(),
                     [&](const RankedEvent& o) { return FoldsBefore(o, e); });
}

void ExpectSameState(const ProjectionState& got, const ProjectionState& want) {
  EXPECT_EQ(ProjectionToJson(got.projection), ProjectionToJson(want.projection));
  EXPECT_EQ(got.projection, want.projection);
  EXPECT_EQ(got.events, want.events);
  EXPECT_EQ(got.last, want.last);
}

// Every kept snapshot is the fold of the events up to its position, taken
// at a multiple of the interval.
void ExpectValidSnapshots(const EntityType& type, const EntityRef& ref, const FakeLog& log,
                          uint64_t interval) {
  for (const auto& [last, s] : log.snapshots) {
    std::vector<RankedEvent> prefix;
    for (const RankedEvent& e : log.events) {
      if (!(last < Key(e))) prefix.push_back(e);
    }
    SCOPED_TRACE("snapshot after " + last.event_id);
    ASSERT_GT(interval, 0u);
    EXPECT_EQ(s.events % interval, 0u);
    ExpectSameState(s, FoldAll(type, ref, prefix));
  }
}

TEST(Materializer, InOrderEventsAreAppliedWithoutReadingTheLog) {
  const EntityType& type = TypeOf("product");
  const EntityRef ref{"product", "p1"};
  const std::vector<RankedEvent> events = {
      Ev("e1", "product.created", kT0, 1, {{"product_id", "\"p1\""}, {"price", "100"}}),
      Ev("e2", "product.updated", kT0, 2, {{"price", "120"}}),         // a tie: version orders it
      Ev("e3", "product.updated", kT0 + kSec, 2, {{"price", "999"}}),  // stale
      Ev("e4", "product.deleted", kT0 + 2 * kSec, 3),
      Ev("e5", "product.updated", kT0 + 3 * kSec, 4),  // impossible
  };
  FakeLog log;
  ProjectionState state;
  for (const RankedEvent& e : events) {
    SCOPED_TRACE(e.event.event_id);
    Result<Materialized> m = Feed(type, ref, e, 0, &log, &state);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(log.reads(), 0) << "an in-order event made the materializer read the log";
    EXPECT_EQ(m->events_folded, 1u);
    EXPECT_FALSE(m->stale_after.has_value());
    EXPECT_TRUE(m->snapshots.empty());
    ExpectSameState(state, FoldAll(type, ref, log.events));
  }
  EXPECT_EQ(state.projection.state, "deleted");
  EXPECT_EQ(state.projection.applied, 3u);
  ASSERT_EQ(state.projection.rejected.size(), 2u);
  EXPECT_EQ(state.projection.rejected[0].reason, "stale version 2 (entity is at version 2)");
  EXPECT_EQ(state.projection.rejected[1].reason, "impossible transition deleted -> active");
}

TEST(Materializer, LateEventRefoldsFromTheLog) {
  const EntityType& type = TypeOf("product");
  const EntityRef ref{"product", "p1"};
  FakeLog log;
  ProjectionState state;
  ASSERT_TRUE(
      Feed(type, ref, Ev("e1", "product.created", kT0, 1, {{"price", "100"}}), 0, &log, &state)
          .ok());
  ASSERT_TRUE(Feed(type, ref, Ev("e3", "product.updated", kT0 + 3 * kSec, 3, {{"price", "300"}}), 0,
                   &log, &state)
                  .ok());
  EXPECT_EQ(log.reads(), 0);

  const RankedEvent late = Ev("e2", "product.updated", kT0 + 2 * kSec, 2,
                              {{"price", "200"}, {"promotion", "\"2-for-1\""}});
  Result<Materialized> m = Feed(type, ref, late, 0, &log, &state);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_GT(log.event_reads, 0) << "a late event must re-fold from the log";
  EXPECT_EQ(m->events_folded, 3u);  // no snapshot: all of it
  ASSERT_TRUE(m->stale_after.has_value());
  EXPECT_EQ(*m->stale_after, Key(late));
  ExpectSameState(state, FoldAll(type, ref, log.events));
  EXPECT_EQ(state.events, 3u);
  EXPECT_EQ(state.last, Key(log.events[1]));  // e3 stays last
  EXPECT_EQ(ProjectionToJson(state.projection),
            "{\"entity\":\"product\",\"id\":\"p1\",\"state\":\"active\","
            "\"fields\":{\"price\":300,\"promotion\":\"2-for-1\"},\"version\":3,"
            "\"applied\":3,\"rejected\":[],"
            "\"occurred_at\":\"2026-11-18T11:06:43.000000Z\"}");
}

TEST(Materializer, LateIssueTurnsAnEarlyRefundIntoAnApplication) {
  const EntityType& type = TypeOf("receipt");
  const EntityRef ref{"receipt", "r1"};
  FakeLog log;
  ProjectionState state;
  ASSERT_TRUE(Feed(type, ref, Ev("b", "receipt.refunded", kT0 + kSec), 0, &log, &state).ok());
  EXPECT_EQ(state.projection.state, "none");
  ASSERT_EQ(state.projection.rejected.size(), 1u);
  EXPECT_EQ(state.projection.rejected[0].reason, "impossible transition none -> refunded");
  EXPECT_FALSE(state.projection.occurred_at.has_value());

  ASSERT_TRUE(Feed(type, ref, Ev("a", "receipt.issued", kT0), 0, &log, &state).ok());
  EXPECT_GT(log.reads(), 0);
  EXPECT_EQ(state.projection.state, "refunded");
  EXPECT_EQ(state.projection.applied, 2u);
  EXPECT_TRUE(state.projection.rejected.empty());
  ExpectSameState(state, FoldAll(type, ref, log.events));
}

TEST(Materializer, EqualTimeLowerRankIsLate) {
  // Same occurred_at, no versions: the issue (rank 0) sorts before the
  // refund (rank 1) despite its larger event_id, so it is a late event.
  const EntityType& type = TypeOf("receipt");
  const EntityRef ref{"receipt", "r1"};
  FakeLog log;
  ProjectionState state;
  ASSERT_TRUE(Feed(type, ref, Ev("a", "receipt.refunded", kT0), 0, &log, &state).ok());
  ASSERT_TRUE(Feed(type, ref, Ev("z", "receipt.issued", kT0), 0, &log, &state).ok());
  EXPECT_GT(log.reads(), 0);
  EXPECT_EQ(state.projection.state, "refunded");
  ExpectSameState(state, FoldAll(type, ref, log.events));
}

TEST(Materializer, LogErrorIsReturnedAndStateKept) {
  const EntityType& type = TypeOf("inventory");
  const EntityRef ref{"inventory", "p1"};
  FakeLog log;
  ProjectionState state;
  ASSERT_TRUE(Feed(type, ref, Ev("e2", "inventory.updated", kT0 + kSec, 2), 0, &log, &state).ok());
  const ProjectionState before = state;
  log.fail = Status::IOError("disk gone");
  Result<Materialized> m =
      Materialize(type, ref, Ev("e1", "inventory.updated", kT0, 1), log, 0, &state);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsIOError()) << m.status().ToString();
  ExpectSameState(state, before);
}

// A rank past the type's transitions (a damaged record) is a Corruption and
// leaves the state as it was, in order and late alike.
TEST(Materializer, RankOutsideTheTransitionsIsCorruptionAndStateKept) {
  const EntityType& type = TypeOf("inventory");
  const EntityRef ref{"inventory", "p1"};
  FakeLog log;
  ProjectionState state;
  ASSERT_TRUE(Feed(type, ref, Ev("e2", "inventory.updated", kT0 + kSec, 2), 0, &log, &state).ok());
  const ProjectionState before = state;
  for (const int64_t at : {kT0 + 2 * kSec, kT0}) {  // in order, then late
    RankedEvent bad = Ev("e3", "inventory.updated", at, 3);
    bad.rank = static_cast<uint32_t>(type.transitions.size()) + 7;
    Result<Materialized> m = Materialize(type, ref, bad, log, 0, &state);
    ASSERT_FALSE(m.ok());
    EXPECT_TRUE(m.status().IsCorruption()) << m.status().ToString();
    ExpectSameState(state, before);
  }
  ProjectionState fresh;
  RankedEvent bad = Ev("e4", "inventory.updated", kT0, 4);
  bad.rank = 1000;
  EXPECT_TRUE(ApplyToState(type, bad, &fresh).IsCorruption());
  EXPECT_EQ(fresh.events, 0u);
}

// With snapshots every 4 events, a late event re-folds only what follows
// the nearest snapshot before it, not the whole log.
TEST(Materializer, SnapshotsBoundTheRefold) {
  constexpr uint64_t kInterval = 4;
  const EntityType& type = TypeOf("inventory");
  const EntityRef ref{"inventory", "p1"};
  FakeLog log;
  ProjectionState state;
  for (int i = 0; i < 40; ++i) {
    Result<Materialized> m = Feed(type, ref,
                                  Ev("e" + std::to_string(100 + i), "inventory.updated",
                                     kT0 + 10 * i * kSec, 10 * i, {{"on_hand", std::to_string(i)}}),
                                  kInterval, &log, &state);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->snapshots.size(), (i + 1) % kInterval == 0 ? 1u : 0u);
  }
  EXPECT_EQ(log.reads(), 0);
  EXPECT_EQ(log.snapshots.size(), 10u);
  ExpectValidSnapshots(type, ref, log, kInterval);

  // Between the 37th and 38th event: resumes from the snapshot after 36.
  Result<Materialized> m = Feed(type, ref, Ev("late1", "inventory.updated", kT0 + 365 * kSec, 365),
                                kInterval, &log, &state);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->events_folded, 5u);  // 37, the late one, 38, 39, 40
  ExpectSameState(state, FoldAll(type, ref, log.events));
  ExpectValidSnapshots(type, ref, log, kInterval);

  // Before everything: no snapshot precedes it, so the whole log.
  m = Feed(type, ref, Ev("late0", "inventory.updated", kT0 - kSec, 0), kInterval, &log, &state);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->events_folded, 42u);
  ExpectSameState(state, FoldAll(type, ref, log.events));
  ExpectValidSnapshots(type, ref, log, kInterval);
  EXPECT_EQ(log.snapshots.size(), 10u);  // 42 events: at 4, 8, ..., 40
}

// Random logs of one entity (few instants, so ties are common; versions
// sometimes absent; every event type), fed in random orders, with and
// without snapshots: after every step the state equals the fold of what was
// fed, only events that sort before the last folded one read the log, and
// every kept snapshot is right.
TEST(Materializer, RandomArrivalOrdersMatchTheFullFold) {
  const char* kTypes[] = {"product.created", "product.updated", "product.deleted",
                          "inventory.updated"};
  int refolds = 0, direct = 0;
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const bool inventory = seed % 4 == 0;
    const uint64_t interval = std::vector<uint64_t>{0, 1, 2, 3, 5}[seed % 5];
    const EntityType& type = TypeOf(inventory ? "inventory" : "product");
    const EntityRef ref{type.name, "p1"};
    std::vector<RankedEvent> events;
    const int n = 1 + static_cast<int>(rng() % 16);
    for (int i = 0; i < n; ++i) {
      const std::string t = inventory ? kTypes[3] : kTypes[rng() % 3];
      std::optional<int64_t> version;
      if (rng() % 3) version = static_cast<int64_t>(rng() % 6);
      events.push_back(Ev("e" + std::to_string(rng() % 1000) + "_" + std::to_string(i), t,
                          kT0 + static_cast<int64_t>(rng() % 4) * kSec, version,
                          {{"k" + std::to_string(rng() % 3), std::to_string(i)}}));
    }
    FakeLog log;
    ProjectionState state;
    for (const RankedEvent& e : events) {
      const bool sorts_last = SortsLast(log, e);
      const int reads = log.reads();
      Result<Materialized> m = Feed(type, ref, e, interval, &log, &state);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      if (sorts_last) {
        EXPECT_EQ(log.reads(), reads);
        EXPECT_EQ(m->events_folded, 1u);
        ++direct;
      } else {
        EXPECT_GT(log.reads(), reads);
        EXPECT_LE(m->events_folded, log.events.size());
        ++refolds;
      }
      ExpectSameState(state, FoldAll(type, ref, log.events));
      if (interval > 0) ExpectValidSnapshots(type, ref, log, interval);
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(refolds, 200);
  EXPECT_GT(direct, 200);
}

// What a format 4 projection record keeps of a state: the cursor.
ProjectionState CursorOf(ProjectionState s) {
  s.projection.fields.clear();
  s.projection.rejected.clear();
  s.cursor_only = true;
  return s;
}

// The store keeps only the cursor between events. Fed random logs in random
// orders with the state cut to its cursor after each step, the cursor still
// equals the full fold's, every kept snapshot is the whole fold up to it, and
// an in-order event reads the log only when a snapshot is due.
TEST(Materializer, CursorOnlyStatesKeepWholeSnapshots) {
  const char* kTypes[] = {"product.created", "product.updated", "product.deleted"};
  int due = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    std::mt19937_64 rng(seed);
    const uint64_t interval = std::vector<uint64_t>{1, 2, 3, 5}[seed % 4];
    SCOPED_TRACE("seed " + std::to_string(seed) + ", interval " + std::to_string(interval));
    const EntityType& type = TypeOf("product");
    const EntityRef ref{"product", "p1"};
    std::vector<RankedEvent> events;
    const int n = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) {
      std::optional<int64_t> version;
      if (rng() % 3) version = static_cast<int64_t>(rng() % 8);
      events.push_back(Ev("e" + std::to_string(i), kTypes[rng() % 3],
                          kT0 + static_cast<int64_t>(rng() % 6) * kSec, version,
                          {{"k" + std::to_string(rng() % 3), std::to_string(i)}}));
    }
    FakeLog log;
    ProjectionState state;
    for (const RankedEvent& e : events) {
      const bool sorts_last = SortsLast(log, e);
      const bool snapshot_due = (state.events + 1) % interval == 0;
      const int reads = log.reads();
      Result<Materialized> m = Feed(type, ref, e, interval, &log, &state);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      if (sorts_last && !(state.events > 1 && snapshot_due)) {
        EXPECT_EQ(log.reads(), reads) << "an in-order event read the log with no snapshot due";
      }
      if (sorts_last) {
        EXPECT_FALSE(m->stale_after.has_value()) << "an in-order event marked snapshots stale";
      }
      if (sorts_last && state.events > 1 && snapshot_due) ++due;
      const ProjectionState want = FoldAll(type, ref, log.events);
      EXPECT_EQ(state.projection.state, want.projection.state);
      EXPECT_EQ(state.projection.version, want.projection.version);
      EXPECT_EQ(state.projection.applied, want.projection.applied);
      EXPECT_EQ(state.projection.occurred_at, want.projection.occurred_at);
      EXPECT_EQ(state.events, want.events);
      EXPECT_EQ(state.last, want.last);
      // The cursor knows whether a read has a snapshot to start from.
      const bool any = !log.snapshots.empty() && !(state.last < log.snapshots.begin()->first);
      EXPECT_EQ(state.snapshots,
                any ? ProjectionState::Snapshots::kSome : ProjectionState::Snapshots::kNone);
      ExpectValidSnapshots(type, ref, log, interval);
      if (::testing::Test::HasFailure()) return;
      state = CursorOf(std::move(state));
    }
  }
  EXPECT_GT(due, 100) << "too few in-order events were due a snapshot to test it";
}

// A body that holds `e` (its data as the members of "data").
std::string BodyOf(const RankedEvent& e) {
  std::string body = R"({"event_id":")" + e.event.event_id + R"(","type":")" + e.event.type +
                     R"(","occurred_at":")" + FormatRfc3339(e.event.occurred_at) + "\"";
  if (e.event.version) body += R"(,"version":)" + std::to_string(*e.event.version);
  body += R"(,"data":{)";
  for (size_t i = 0; i < e.event.data.size(); ++i) {
    body += (i ? ",\"" : "\"") + e.event.data[i].name + "\":" + e.event.data[i].json;
  }
  return body + "}}";
}

// An ingest's events come without their data (DecodeEventWithoutData); the
// log gives them whole. Fed random logs in random orders that way, the
// state's cursor equals the full fold's after every step, and is whole (all
// of it equal) unless an event without its data was applied to it since;
// every snapshot kept is the whole fold up to it, whether taken in order or
// in a re-fold; and an in-order event reads neither the log nor its body
// unless a snapshot is due.
TEST(Materializer, EventsWithoutTheirDataFoldAsWholeOnes) {
  const char* kTypes[] = {"product.created", "product.updated", "product.deleted"};
  int cursor_only = 0, due_in_order = 0, refolds = 0;
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    std::mt19937_64 rng(seed);
    const uint64_t interval = std::vector<uint64_t>{0, 1, 2, 3, 5}[seed % 5];
    SCOPED_TRACE("seed " + std::to_string(seed) + ", interval " + std::to_string(interval));
    const EntityType& type = TypeOf("product");
    const EntityRef ref{"product", "p1"};
    std::deque<std::string> bodies;  // data_from points into them
    FakeLog log;
    ProjectionState state;
    const int n = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) {
      std::optional<int64_t> version;
      if (rng() % 3) version = static_cast<int64_t>(rng() % 8);
      const RankedEvent whole =
          Ev("e" + std::to_string(i), kTypes[rng() % 3],
             kT0 + static_cast<int64_t>(rng() % 6) * kSec, version,
             {{"k" + std::to_string(rng() % 3), std::to_string(i)}, {"note", R"({"a":[1,"x"]})"}});
      const bool sorts_last = SortsLast(log, whole);
      const bool snapshot_due = interval > 0 && (state.events + 1) % interval == 0;
      RankedEvent lean = whole;
      lean.event.data.clear();
      // In order with no snapshot due the body is not read: one that does
      // not decode would fail the step.
      lean.data_from =
          bodies.emplace_back(sorts_last && !snapshot_due ? "not a body" : BodyOf(whole));
      const bool was_cursor_only = state.cursor_only;
      const int reads = log.reads();
      Result<Materialized> m = Materialize(type, ref, lean, log, interval, &state);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      log.events.push_back(whole);
      if (m->stale_after) {
        std::erase_if(log.snapshots, [&](const auto& kv) { return *m->stale_after < kv.first; });
      }
      for (const ProjectionState& s : m->snapshots) log.snapshots[s.last] = s;
      if (sorts_last && !(was_cursor_only && snapshot_due)) {
        EXPECT_EQ(log.reads(), reads) << "an in-order event read the log";
        EXPECT_EQ(state.cursor_only, !snapshot_due || was_cursor_only)
            << "applied without its data, a state is whole only at a snapshot";
        if (snapshot_due) ++due_in_order;
      } else {
        ++refolds;
        EXPECT_FALSE(state.cursor_only) << "a re-fold reads every event whole";
      }
      const ProjectionState want = FoldAll(type, ref, log.events);
      if (state.cursor_only) {
        ++cursor_only;
        EXPECT_EQ(CursorOf(state).projection, CursorOf(want).projection);
        EXPECT_EQ(state.events, want.events);
        EXPECT_EQ(state.last, want.last);
      } else {
        ExpectSameState(state, want);
      }
      if (interval > 0) ExpectValidSnapshots(type, ref, log, interval);
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(cursor_only, 500);
  EXPECT_GT(due_in_order, 100);
  EXPECT_GT(refolds, 300);
}

}  // namespace
}  // namespace eventfold
