// RecentEvents: the bodies a store accepted most recently, by digest, held
// in memory so that a redelivery of the very same bytes (a sender's retry)
// is answered as a duplicate without reading the database.
//
// A fixed table of slots in sets of kWays, the set chosen by the body's
// SHA-256; a slot holds the first 16 bytes of it and the entity the event
// was routed to. A new body takes a free slot of its set or, when none is
// free, the one filled longest ago (so a set-associative table: bodies that
// share a set do not evict each other while it has room). It therefore holds
// at most its capacity, and a miss only means the caller asks the database
// (StoreImpl::KnownDuplicate).
// An entry states: a body with this digest is stored, routed to this entity
// under the routing in force when it was added, and its dedup entry is not
// a tombstone. Whatever can make that untrue — a compaction turns entries
// into tombstones that later expire, a rebuild may switch the profile, a
// recovery reopens the database — calls Clear().
//
// The digest stands for the whole body: equal digests mean the same bytes,
// hence the same event id, type, time and route. 128 bits of SHA-256 keep a
// collision (even a chosen one) out of reach.
//
// Thread-safe: the slots are split into stripes, each under its own mutex.

#ifndef EVENTFOLD_STORE_RECENT_EVENTS_H_
#define EVENTFOLD_STORE_RECENT_EVENTS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_annotations.h"
#include "eventfold/event.h"

namespace eventfold::storage {

class RecentEvents {
 public:
  // Room for `capacity` bodies, rounded up to a multiple of 256 (whole sets
  // in every stripe); 0 holds none.
  explicit RecentEvents(size_t capacity);

  // A count of Clear() calls. An adder reads it before it commits the
  // events it will add: an Add that a Clear() overtook is then dropped.
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // Records that the body with SHA-256 `digest` (32 bytes) is stored, routed
  // to `entity` (nullopt: unrouted), as of `epoch` (read before the commit
  // that stored it). Does nothing when a Clear() came since, or for a digest
  // of another size.
  void Add(std::string_view digest, const std::optional<EntityRef>& entity, uint64_t epoch);

  // True, with *entity set to the entity it was added with, when a body
  // with SHA-256 `digest` was added since the last Clear() and still holds
  // its slot; false otherwise, *entity unchanged.
  bool Find(std::string_view digest, std::optional<EntityRef>* entity) const;

  // Forgets every body, and every Add of an earlier epoch still to come.
  void Clear();

 private:
  static constexpr size_t kDigestBytes = 16;  // of SHA-256's 32
  static constexpr size_t kStripes = 64;
  static constexpr size_t kWays = 4;

  static constexpr size_t kMaxTypes = 256;              // distinct entity type names
  static constexpr uint16_t kEmpty = 0, kUnrouted = 1;  // else a type index + 2

  // 56 bytes: the entity's type is an index into types_, its id a string
  // (inline up to 15 bytes).
  struct Slot {
    std::array<char, kDigestBytes> digest{};
    uint16_t type = kEmpty;
    std::string id;
  };
  struct Set {
    std::array<Slot, kWays> slots;
    uint8_t next = 0;  // the slot a new body takes when none is free
  };
  struct Stripe {
    mutable Mutex mu;
    std::vector<Set> sets GUARDED_BY(mu);
  };

  // The stripe and set of a digest: from bytes 16-31, which a slot does not
  // store (a digest is uniformly random, so any of its bytes index).
  std::pair<size_t, size_t> Place(std::string_view digest) const;

  // The slot's `type` for `entity`, adding its type name to types_ when new;
  // nullopt when types_ is full (the body is then not remembered).
  std::optional<uint16_t> TypeOf(const std::optional<EntityRef>& entity);

  size_t sets_per_stripe_;
  std::unique_ptr<Stripe[]> stripes_;
  std::atomic<uint64_t> epoch_{0};
  // Entity type names, each written once before type_count_ publishes it
  // (release) and never changed: readers take no lock.
  Mutex types_mu_;
  std::array<std::string, kMaxTypes> types_;
  std::atomic<size_t> type_count_{0};
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORE_RECENT_EVENTS_H_
