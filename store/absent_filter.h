// AbsentFilter: an in-memory Bloom filter over the keys of one family a
// store has written (the event ids of its dedup entries, d/, or its
// projection keys, g/<gen>/p/), so that ingest learns that a new event's id,
// or its entity, was never stored without asking LevelDB.
//
// Why not just ask: a LevelDB `Get` of a key that is absent consults a file
// in every level, and LevelDB charges each lookup that consults more than
// one file to the first file's "allowed seeks"; a file whose allowance runs
// out is compacted into the next level, whether or not that level needs it.
// A missed `Get` per new event (two, with its new entity) thus makes the
// background thread compact far more than the writes alone need
// (docs/BENCHMARKS.md, "Seek compactions"). A `MayContain` of false
// decides instead, and a true (an id stored, or a false positive, about 1%
// at the default size) asks LevelDB as before, so the filter only ever
// saves reads and never changes an answer.
//
// A blocked Bloom filter: each key sets and tests kProbes bits of one
// 512-bit block (one cache line) chosen by its 64-bit hash (XXH3). Written by
// hand because no Debian package offers a concurrent, incremental one
// (LevelDB's FilterPolicy builds immutable filters from a key list).
//
// It holds `capacity` keys at its false-positive rate; past that the rate
// climbs, which costs reads, never answers (the owner builds a larger one:
// StoreImpl::KeyFiltersLoop in store/key_filters.cc). Keys are never removed.
//
// Thread-safe and lock-free: Add and MayContain may run concurrently. An Add
// that happens-before a MayContain (through a mutex, for instance) is seen by
// it; a concurrent one may or may not be.

#ifndef EVENTFOLD_STORE_ABSENT_FILTER_H_
#define EVENTFOLD_STORE_ABSENT_FILTER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace eventfold::storage {

class AbsentFilter {
 public:
  // Bits of filter per key of capacity: about 1% false positives.
  static constexpr size_t kBitsPerKey = 10;

  // Room for `capacity` keys (at least one block), for the keys of what
  // `tag` names (its owner's: a generation, say).
  explicit AbsentFilter(size_t capacity, uint64_t tag = 0);
  AbsentFilter(const AbsentFilter&) = delete;
  AbsentFilter& operator=(const AbsentFilter&) = delete;

  // Records `key`: every later MayContain(key) is true. A key the filter
  // may contain already changes nothing and is not counted.
  void Add(std::string_view key);

  // False: `key` was never added. True: it may have been.
  bool MayContain(std::string_view key) const;

  size_t capacity() const { return capacity_; }
  uint64_t tag() const { return tag_; }
  // Keys added so far (not counting those it may have contained).
  size_t added() const { return added_.load(std::memory_order_relaxed); }
  // The filter's memory.
  size_t bytes() const { return blocks_ * sizeof(Block); }

 private:
  static constexpr int kProbes = 7;
  struct alignas(64) Block {
    std::atomic<uint64_t> words[8];
  };

  const Block& BlockOf(uint64_t hash) const;

  const size_t capacity_;
  const uint64_t tag_;
  const size_t blocks_;
  std::unique_ptr<Block[]> table_;
  std::atomic<size_t> added_{0};
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORE_ABSENT_FILTER_H_
