// LockTable: striped mutexes that serialize ingests touching the same entity
// or event_id while letting all others run in parallel.
//
// Keys hash (FNV-1a, deterministic across processes and builds) to one of a
// fixed number of stripes; a caller locks every stripe it needs at once, in
// ascending order, so two callers can never deadlock.
//
// Each stripe also counts its releases: whoever held a stripe may have
// written what it guards, and counts the release after its writes and
// before the unlock. So a reader that read a stripe's count, then found a
// key absent without holding the stripe, knows the key is still absent if
// the count is the same once it holds the stripe: nobody who could have
// written the key held it in between (StoreImpl::KnownDuplicate). Thread-safe.
//
// The stripes are eventfold::Mutex like every other lock, but what a stripe
// guards is a set of LevelDB keys, not members the thread-safety analysis
// could name, and a Guard holds a set of stripes chosen at run time, which
// the analysis cannot follow: Guard's constructor and destructor are exempt
// from it, and the ascending order above is what keeps them deadlock-free.

#ifndef EVENTFOLD_STORE_LOCK_TABLE_H_
#define EVENTFOLD_STORE_LOCK_TABLE_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/stable_hash.h"
#include "core/thread_annotations.h"

namespace eventfold::storage {

// 64-bit FNV-1a (core/stable_hash.h): stable, so it also picks partitions.
using eventfold::StableHash;

class LockTable {
 public:
  // An ingest holds its stripes (its entity's and its event id's) until its
  // commit is synced, so at 64 producers about 128 stripes are held at any
  // time. With 1024 stripes about one ingest in four found one of its
  // stripes held for an unrelated key and waited a whole sync; with 16384,
  // one in sixteen does, same entities included (measured with 64
  // producers: context switches an event 2.2 → 1.9). The table takes
  // 16384 × 48 B = 768 KiB a store.
  static constexpr size_t kStripes = 16384;

  // Holds a set of stripes until destroyed.
  class Guard {
   public:
    Guard(LockTable* table, std::vector<size_t> stripes) NO_THREAD_SAFETY_ANALYSIS
        : table_(table),
          stripes_(std::move(stripes)) {
      std::sort(stripes_.begin(), stripes_.end());
      stripes_.erase(std::unique(stripes_.begin(), stripes_.end()), stripes_.end());
      for (size_t s : stripes_) table_->mu_[s].lock();
    }
    ~Guard() NO_THREAD_SAFETY_ANALYSIS {
      for (auto it = stripes_.rbegin(); it != stripes_.rend(); ++it) {
        table_->releases_[*it].fetch_add(1, std::memory_order_release);
        table_->mu_[*it].unlock();
      }
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    LockTable* table_;
    std::vector<size_t> stripes_;
  };

  static size_t StripeOf(uint64_t hash) { return hash % kStripes; }

  // How often `stripe` has been released so far. Read it before a lookup
  // made without the stripe, and compare once holding it (see above).
  uint64_t Releases(size_t stripe) const {
    return releases_[stripe].load(std::memory_order_acquire);
  }

 private:
  std::array<Mutex, kStripes> mu_;
  std::array<std::atomic<uint64_t>, kStripes> releases_{};
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORE_LOCK_TABLE_H_
