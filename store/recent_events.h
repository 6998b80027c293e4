// RecentEvents: the bodies a store accepted most recently, by a keyed hash
// of their bytes, held in memory so that a redelivery of the very same bytes
// (a sender's retry) is answered as a duplicate without reading the database
// and without a SHA-256 of the body.
//
// A fixed table of slots in sets of kWays (Key: 128 bits of XXH3 under a
// secret drawn from the kernel's random source when the table is made); a
// slot holds the key, the event id and the entity the event was routed to,
// inline (96 bytes a body, no allocation). Each key has two sets, one chosen
// by each half of the key, and a new body takes a free slot of the emptier
// of its two or, when both are full, the slot of its first set filled
// longest ago. Two choices keep bodies from evicting each other while the
// table has room: with one set a body, about 6% of a table filled to 60%
// are evicted by their set's neighbours (sets of four overflow), with two
// next to none. It holds at most its capacity, and a miss only means the
// caller asks the database (StoreImpl::KnownDuplicate).
// An entry states: a body with this key and this event id is stored, routed
// to this entity under the routing in force when it was added, and its dedup
// entry is not a tombstone. Whatever can make that untrue — a compaction
// turns entries into tombstones that later expire, a rebuild may switch the
// profile, a recovery reopens the database — calls Clear().
//
// Why XXH3 and not the SHA-256 the dedup entry keeps: on a 750-byte body it
// costs 60 ns against 560 ns, the larger part of a duplicate's answer. It is
// no cryptographic hash, so the table never relies on it alone: a hit also
// needs the body's event id to equal the slot's, byte for byte. Two bodies
// with the same event id are the same event, answered as a duplicate or
// refused as a conflict, never stored twice; so even a chosen collision
// under the secret (which nobody outside the process sees) could at most
// turn a conflict's 409 into a duplicate's 200, and cannot lose an event.
// An accidental one is a 2^-128 chance per pair.
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
#include <utility>

#include "core/thread_annotations.h"
#include "eventfold/event.h"

namespace eventfold::storage {

class RecentEvents {
 public:
  // Room for `capacity` bodies, rounded up to a multiple of 256 (whole sets
  // in every stripe); 0 holds none.
  explicit RecentEvents(size_t capacity);
  ~RecentEvents();
  RecentEvents(const RecentEvents&) = delete;
  RecentEvents& operator=(const RecentEvents&) = delete;

  // A count of Clear() calls. An adder reads it before it commits the
  // events it will add: an Add that a Clear() overtook is then dropped.
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // A body's place and name in this table (its keyed hash).
  struct Key {
    uint64_t low = 0, high = 0;
  };
  Key KeyOf(std::string_view body) const;

  // Asks for the memory Find(key, ...) will read, without waiting for it:
  // a caller with other work to do first calls this, then that work, then
  // Find. Changes nothing.
  void Prefetch(const Key& key) const;

  // Records that the body with key `key` and event id `event_id` is stored,
  // routed to `entity` (nullopt: unrouted), as of `epoch` (read before the
  // commit that stored it). Does nothing when a Clear() came since, or when
  // the event id and the entity id together exceed kIdBytes (64).
  void Add(const Key& key, std::string_view event_id, const std::optional<EntityRef>& entity,
           uint64_t epoch);

  // True, with *entity set to the entity it was added with, when a body
  // with key `key` and event id `event_id` was added since the last Clear()
  // and still holds its slot; false otherwise, *entity unchanged.
  bool Find(const Key& key, std::string_view event_id, std::optional<EntityRef>* entity) const;

  // Forgets every body, and every Add of an earlier epoch still to come.
  void Clear();

 private:
  static constexpr size_t kSecretBytes = 192;  // XXH3's default secret size
  static constexpr size_t kIdBytes = 64;       // event id and entity id, inline
  static constexpr size_t kStripes = 64;
  static constexpr size_t kWays = 4;

  static constexpr size_t kMaxTypes = 256;              // distinct entity type names
  static constexpr uint16_t kEmpty = 0, kUnrouted = 1;  // else a type index + 2

  // A set of kWays slots in 384 bytes (96 a body), its keys first: a
  // lookup reads one cache line of keys and then the one slot that
  // matched. A slot's entity type is an index into types_; its event id and
  // entity id are stored one after the other in ids[slot].
  struct alignas(64) Set {
    std::array<Key, kWays> keys{};
    std::array<uint16_t, kWays> types{};  // kEmpty: a free slot
    std::array<uint8_t, kWays> event_id_sizes{};
    std::array<uint8_t, kWays> id_sizes{};
    uint8_t next = 0;  // the slot a new body takes when none is free
    std::array<std::array<char, kIdBytes>, kWays> ids{};

    std::string_view event_id(size_t slot) const {
      return {ids[slot].data(), event_id_sizes[slot]};
    }
    std::string_view id(size_t slot) const {
      return {ids[slot].data() + event_id_sizes[slot], id_sizes[slot]};
    }
    // The slot holding `key` and `event_id`, or kWays.
    size_t Find(const Key& key, std::string_view event_id) const;
  };
  // A stripe's sets live in a mapping of their own, zero pages until a body
  // is added to them: a table costs memory as it fills, not when made. A
  // stripe whose mapping failed holds nothing (sets null). The mapping's
  // address is set by the constructor and never changes after it (so
  // Prefetch reads it without the lock); the sets in it are under mu.
  struct Stripe {
    mutable Mutex mu;
    Set* sets PT_GUARDED_BY(mu) = nullptr;
  };

  // Asks for every line of both sets (see Find).
  static void PrefetchSets(const Set* first, const Set* second);

  // Which of a key's two sets holds `key` and `event_id` (`second`, when
  // the first does not and the second does; else `first`), and its slot
  // there, or kWays. S is Set or const Set.
  template <typename S>
  static std::pair<S*, size_t> FindInEither(S* first, S* second, const Key& key,
                                            std::string_view event_id) {
    const size_t slot = first->Find(key, event_id);
    if (slot != kWays || second == first) return {first, slot};
    const size_t other = second->Find(key, event_id);
    return other != kWays ? std::pair<S*, size_t>{second, other}
                          : std::pair<S*, size_t>{first, kWays};
  }

  // A key's stripe (from its low half) and its two sets in that stripe
  // (one from each half; they may be the same set).
  struct Place {
    size_t stripe, first, second;
  };
  Place PlaceOf(const Key& key) const;

  // The slot's `type` for `entity`, adding its type name to types_ when new;
  // nullopt when types_ is full (the body is then not remembered).
  std::optional<uint16_t> TypeOf(const std::optional<EntityRef>& entity);

  std::array<unsigned char, kSecretBytes> secret_;
  size_t sets_per_stripe_;
  size_t stripe_bytes_;  // the length of a stripe's mapping
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
