// Shared helpers of the replay tests: in-memory stores, ingest, listing,
// and an independent reference model of docs/SPEC.md §3.2 dedup and §4 fold.

#ifndef EVENTFOLD_TESTS_REPLAY_REPLAY_UTIL_H_
#define EVENTFOLD_TESTS_REPLAY_REPLAY_UTIL_H_

#include <gtest/gtest.h>
#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/decode.h"
#include "eventfold/store.h"

namespace eventfold::testing {

// A store on its own in-memory file system; the store closes before the env.
class MemStore {
 public:
  explicit MemStore(uint64_t snapshot_interval = Options().snapshot_interval,
                    size_t write_buffer_bytes = 4 << 20)
      : env_(leveldb::NewMemEnv(leveldb::Env::Default())) {
    options_.snapshot_interval = snapshot_interval;
    options_.env = env_.get();
    options_.durability = Durability::kBuffered;
    options_.clock = &clock_;
    options_.write_buffer_bytes = write_buffer_bytes;
    options_.block_cache_bytes = 1 << 20;
    Reopen();
  }
  ~MemStore() { store_.reset(); }

  // Closes the store and opens it again from its (in-memory) files.
  void Reopen() {
    store_.reset();
    Result<std::unique_ptr<Store>> s = Store::Open(kPath, options_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) store_ = std::move(*s);
  }
  MemStore(const MemStore&) = delete;
  MemStore& operator=(const MemStore&) = delete;

  void Close() { store_.reset(); }
  leveldb::Env* env() { return env_.get(); }
  static constexpr const char* kPath = "/mem/store";

  Store* operator->() { return store_.get(); }
  Store* get() { return store_.get(); }
  explicit operator bool() const { return store_ != nullptr; }
  ManualClock* clock() { return &clock_; }

 private:
  ManualClock clock_{1795000000000000};
  Options options_;
  std::unique_ptr<leveldb::Env> env_;
  std::unique_ptr<Store> store_;
};

// Every projection, one ProjectionToJson line each, in List order.
inline std::string ListAll(Store* store) {
  std::string out;
  Status st = store->List("", [&](const Projection& p) {
    out += ProjectionToJson(p);
    out += '\n';
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

// Ingests `deliveries` in order, in batches of random sizes (some single
// Ingest calls), returning each delivery's outcome.
inline std::vector<Outcome> IngestChunked(Store* store, const std::vector<Delivery>& deliveries,
                                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Outcome> out;
  size_t i = 0;
  while (i < deliveries.size()) {
    const size_t n = std::min<size_t>(deliveries.size() - i, 1 + rng() % 40);
    if (n == 1 && rng() % 2) {
      out.push_back(store->Ingest(deliveries[i]).outcome);
    } else {
      std::vector<Delivery> batch(deliveries.begin() + static_cast<ptrdiff_t>(i),
                                  deliveries.begin() + static_cast<ptrdiff_t>(i + n));
      for (const IngestResult& r : store->IngestBatch(batch)) out.push_back(r.outcome);
    }
    i += n;
  }
  return out;
}

// What dedup compares: an event's identity.
struct Identity {
  std::string type;
  int64_t occurred_at = 0;
  std::optional<EntityRef> entity;
  bool operator==(const Identity&) const = default;
};

// A valid delivery's decoded event (nullopt when it must be refused 400).
inline std::optional<DecodedEvent> DecodeValid(const Delivery& d, const Profile& profile) {
  Result<DecodedEvent> e = DecodeEvent(d.body, profile);
  if (!e.ok()) return std::nullopt;
  if (!CheckEventIdHeader(d.headers, e->event.event_id).ok()) return std::nullopt;
  return std::move(*e);
}

// The reference model, written from docs/SPEC.md §3.2 and §4 alone: what a store must
// answer and list after ingesting `arrival` in that order.
struct Reference {
  std::vector<Outcome> outcomes;  // per delivery
  std::string list;               // as ListAll
  size_t rejected = 0;
};

inline Reference ReferenceModel(const std::vector<Delivery>& arrival,
                                const Profile& profile = Profile::ReceiptRoller()) {
  struct Routed {
    Event event;
    uint32_t rank = 0;
    const Transition* transition = nullptr;
  };
  Reference ref;
  std::map<std::string, Identity> stored;  // event_id -> first arrival
  std::map<EntityRef, std::vector<Routed>> entities;
  for (const Delivery& d : arrival) {
    std::optional<DecodedEvent> e = DecodeValid(d, profile);
    if (!e) {
      ref.outcomes.push_back(Outcome::kInvalid);
      continue;
    }
    Identity id{e->event.type, e->event.occurred_at, e->entity};
    auto it = stored.find(e->event.event_id);
    if (it != stored.end()) {
      // Same id again: first one wins, whatever this one says.
      ref.outcomes.push_back(it->second == id ? Outcome::kDuplicate : Outcome::kConflict);
      continue;
    }
    stored.emplace(e->event.event_id, id);
    ref.outcomes.push_back(Outcome::kAccepted);
    if (!e->entity) continue;  // unrouted: stored, never projected
    const Route* route = profile.Find(e->event.type);
    entities[*e->entity].push_back(Routed{e->event, route->rank, route->transition});
  }

  for (auto& [key, events] : entities) {
    // docs/SPEC.md §4 order: occurred_at, version (absent first), rank, event_id.
    std::sort(events.begin(), events.end(), [](const Routed& a, const Routed& b) {
      if (a.event.occurred_at != b.event.occurred_at) {
        return a.event.occurred_at < b.event.occurred_at;
      }
      if (a.event.version.has_value() != b.event.version.has_value()) {
        return !a.event.version.has_value();
      }
      if (a.event.version && *a.event.version != *b.event.version) {
        return *a.event.version < *b.event.version;
      }
      if (a.rank != b.rank) return a.rank < b.rank;
      return a.event.event_id < b.event.event_id;
    });
    Projection p;
    p.entity = key.entity;
    p.id = key.id;
    p.state = "none";
    for (const Routed& r : events) {
      const Transition& t = *r.transition;
      std::string reason;
      if (std::find(t.from.begin(), t.from.end(), p.state) == t.from.end()) {
        reason = "impossible transition " + p.state + " -> " + t.to;
      } else if (r.event.version && p.version && *p.version >= *r.event.version) {
        reason = "stale version " + std::to_string(*r.event.version) + " (entity is at version " +
                 std::to_string(*p.version) + ")";
      }
      if (!reason.empty()) {
        p.rejected.push_back(Rejection{r.event.event_id, r.event.type, reason});
        ++ref.rejected;
        continue;
      }
      p.state = t.to;
      for (const Field& f : r.event.data) {
        bool found = false;
        for (Field& g : p.fields) {
          if (g.name == f.name) {
            g.json = f.json;
            found = true;
          }
        }
        if (!found) p.fields.push_back(f);
      }
      if (r.event.version) p.version = r.event.version;
      p.occurred_at = r.event.occurred_at;
      ++p.applied;
    }
    ref.list += ProjectionToJson(p);
    ref.list += '\n';
  }
  return ref;
}

// Moves each conflicting reuse of an event_id (a valid delivery whose
// identity differs from the original in `originals`) that arrives before its
// original's first delivery to a random place after it: then every arrival
// order stores the same set of events.
inline void ConflictsAfterOriginals(const std::vector<std::string>& originals,
                                    std::vector<Delivery>* deliveries, uint64_t seed,
                                    const Profile& profile = Profile::ReceiptRoller()) {
  std::map<std::string, Identity> identity;
  for (const std::string& body : originals) {
    Result<DecodedEvent> e = DecodeEvent(body, profile);
    EXPECT_TRUE(e.ok()) << e.status().ToString() << " in " << body;
    if (e.ok())
      identity[e->event.event_id] = Identity{e->event.type, e->event.occurred_at, e->entity};
  }
  std::set<std::string> seen;
  std::vector<Delivery> kept, held;
  std::vector<std::string> held_ids;
  for (Delivery& d : *deliveries) {
    std::optional<DecodedEvent> e = DecodeValid(d, profile);
    if (e) {
      const std::string& id = e->event.event_id;
      auto it = identity.find(id);
      const bool original = it != identity.end() &&
                            it->second == Identity{e->event.type, e->event.occurred_at, e->entity};
      if (it != identity.end() && !original && !seen.count(id)) {
        held.push_back(std::move(d));
        held_ids.push_back(id);
        continue;
      }
      if (original) seen.insert(id);
    }
    kept.push_back(std::move(d));
  }
  std::mt19937_64 rng(seed);
  for (size_t h = 0; h < held.size(); ++h) {
    size_t first = 0;
    for (; first < kept.size(); ++first) {
      std::optional<DecodedEvent> e = DecodeValid(kept[first], profile);
      if (e && e->event.event_id == held_ids[h] &&
          identity[held_ids[h]] == Identity{e->event.type, e->event.occurred_at, e->entity}) {
        break;
      }
    }
    // No original at all: the reuse simply stays (it is then the event).
    const size_t lo = first < kept.size() ? first + 1 : 0;
    const size_t pos = lo + rng() % (kept.size() - lo + 1);
    kept.insert(kept.begin() + static_cast<ptrdiff_t>(pos), std::move(held[h]));
  }
  *deliveries = std::move(kept);
}

}  // namespace eventfold::testing

#endif  // EVENTFOLD_TESTS_REPLAY_REPLAY_UTIL_H_
