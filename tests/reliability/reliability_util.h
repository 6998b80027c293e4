// Helpers shared by the reliability tests: what "consistent" means for a
// store after a crash or a fault, checked the same way everywhere.
//
//  - every acknowledged event (kAccepted or kDuplicate) is stored: its a/
//    record exists, and when it routes to an entity, Store::Log shows it;
//  - no event is stored twice: a/ records have unique event ids (a raw
//    LevelDB scan of the closed store), and a log shows each event_id once;
//  - every projection equals a from-scratch fold (Store::Verify: no
//    difference) and Store::Check finds no problem;
//  - the change feed has no gap: ReadFeed from 0 gives 1..LastChangeSeq.

#ifndef EVENTFOLD_TESTS_RELIABILITY_RELIABILITY_UTIL_H_
#define EVENTFOLD_TESTS_RELIABILITY_RELIABILITY_UTIL_H_

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/env.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "eventfold/store.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "tests/common/check_clean.h"
#include "tests/common/own_thread_env.h"

namespace eventfold::reliability {

// Acknowledged events: event_id -> the entity it routes to (nullopt: unrouted).
using Acked = std::map<std::string, std::optional<EntityRef>>;

inline bool Acknowledged(Outcome o) { return o == Outcome::kAccepted || o == Outcome::kDuplicate; }

// Event ids of the a/ records of a closed store, with how often each occurs;
// read with raw LevelDB (through `env` when not null).
inline std::map<std::string, int> RawEventIds(const std::string& dir, leveldb::Env* env = nullptr) {
  std::map<std::string, int> out;
  leveldb::Options lo;
  if (env) lo.env = env;
  leveldb::DB* raw = nullptr;
  leveldb::Status s = leveldb::DB::Open(lo, dir, &raw);
  EXPECT_TRUE(s.ok()) << "raw open: " << s.ToString();
  if (!s.ok()) return out;
  std::unique_ptr<leveldb::DB> db(raw);
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
  const std::string prefix(storage::kEventPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::string_view key(it->key().data(), it->key().size());
    Result<storage::StoredEvent> e =
        storage::DecodeStoredEvent(key, std::string_view(it->value().data(), it->value().size()));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (e.ok()) ++out[e->event.event_id];
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

// After closing: every acknowledged event has exactly one a/ record and no
// event has two. Returns the number of events stored.
inline size_t ExpectStoredOnce(const std::string& dir, const Acked& acked,
                               leveldb::Env* env = nullptr) {
  const std::map<std::string, int> ids = RawEventIds(dir, env);
  size_t missing = 0, twice = 0;
  for (const auto& [id, n] : ids) {
    if (n != 1 && ++twice <= 5) ADD_FAILURE() << "event " << id << " is stored " << n << " times";
  }
  for (const auto& [id, ref] : acked) {
    if (!ids.contains(id) && ++missing <= 5) {
      ADD_FAILURE() << "acknowledged event " << id << " is not stored";
    }
  }
  EXPECT_EQ(missing, 0u) << "acknowledged events lost";
  EXPECT_EQ(twice, 0u) << "events stored more than once";
  return ids.size();
}

// Every change of `store`'s feed, oldest first (a failed read fails the
// test).
inline std::vector<Change> AllChanges(Store* store) {
  std::vector<Change> out;
  Status st = store->feed().Read(0, SIZE_MAX, AppendTo<Change>(&out));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

// The feed from 0: seqs 1..LastChangeSeq, consecutive.
inline void ExpectFeedWithoutGap(Store* store) {
  std::vector<Change> feed;
  for (uint64_t after = 0;;) {
    const size_t before = feed.size();
    Status st = store->feed().Read(after, 10000, AppendTo<Change>(&feed));
    ASSERT_TRUE(st.ok()) << st.ToString();
    if (feed.size() == before) break;
    after = feed.back().seq;
  }
  const uint64_t last = store->feed().LastSeq();
  ASSERT_EQ(feed.size(), last) << "the feed holds " << feed.size() << " changes, LastChangeSeq "
                               << last;
  for (size_t i = 0; i < feed.size(); ++i) {
    if (feed[i].seq != i + 1) {
      ADD_FAILURE() << "feed gap: position " << i << " holds seq " << feed[i].seq;
      return;
    }
  }
}

// Store::Log of each entity of `acked` (only those in `entities` when not
// null) shows each event once and every acknowledged event of the entity.
inline void ExpectInLogs(Store* store, const Acked& acked,
                         const std::set<EntityRef>* entities = nullptr) {
  std::map<EntityRef, std::vector<std::string>> by_entity;
  for (const auto& [id, ref] : acked) {
    if (ref && (!entities || entities->contains(*ref))) by_entity[*ref].push_back(id);
  }
  size_t failures = 0;
  for (const auto& [ref, ids] : by_entity) {
    Result<EntityLog> log = store->Log(ref.entity, ref.id);
    if (!log.ok()) {
      if (++failures <= 5)
        ADD_FAILURE() << ref.entity << "/" << ref.id << ": " << log.status().ToString();
      continue;
    }
    std::map<std::string, int> seen;
    for (const LoggedEvent& e : log->fold_order) ++seen[e.event.event_id];
    for (const auto& [id, n] : seen) {
      if (n != 1 && ++failures <= 5) {
        ADD_FAILURE() << ref.entity << "/" << ref.id << " logs " << id << " " << n << " times";
      }
    }
    for (const std::string& id : ids) {
      if (!seen.contains(id) && ++failures <= 5) {
        ADD_FAILURE() << "acknowledged " << id << " is not in the log of " << ref.entity << "/"
                      << ref.id;
      }
    }
  }
  EXPECT_EQ(failures, 0u);
}

inline void ExpectVerifyClean(Store* store) {
  uint64_t shown = 0;
  Result<VerifySummary> v = store->maintenance().Verify([&](const auto& live, const auto& rebuilt) {
    if (++shown <= 3) {
      ADD_FAILURE() << "projection differs: live "
                    << (live ? ProjectionToJson(*live) : std::string("none")) << " rebuilt "
                    << (rebuilt ? ProjectionToJson(*rebuilt) : std::string("none"));
    }
  });
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->differences, 0u);
}

using test_util::ExpectCheckClean;
using test_util::OwnThreadEnv;

}  // namespace eventfold::reliability

#endif  // EVENTFOLD_TESTS_RELIABILITY_RELIABILITY_UTIL_H_
