// BatchPool: write batches kept for reuse, so that a transaction starts
// with the capacity an earlier one grew to.
//
// A LevelDB WriteBatch is one string. A new one starts empty and grows by
// doubling as puts are added: a single delivery's batch (five records,
// about 1.2 KB) is reallocated and copied a few times on its way, and
// `eventfold ingest`'s batch of 1,000 deliveries (about 1.2 MB) about ten
// times, the last copies into memory fresh from the system. A cleared
// batch keeps its capacity (WriteBatch::Clear clears the string), so a
// kept one takes the next transaction's records without any of that.
//
// At most kSlots batches are kept, each no larger than kMaxKeptBytes when
// given back (its capacity at most twice that): a store holds at most
// 2 × 2 × 2 MiB = 8 MiB here, and a batch outgrown by a merged group or a
// large IngestBatch is freed, not kept.
//
// Thread-safety: Take and Give may be called from any threads at once;
// each slot is one atomic pointer, so neither ever waits.

#ifndef EVENTFOLD_STORAGE_BATCH_POOL_H_
#define EVENTFOLD_STORAGE_BATCH_POOL_H_

#include <leveldb/write_batch.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>

namespace eventfold::storage {

class BatchPool {
 public:
  static constexpr size_t kSlots = 2;
  static constexpr size_t kMaxKeptBytes = size_t{2} << 20;

  BatchPool() = default;
  BatchPool(const BatchPool&) = delete;
  BatchPool& operator=(const BatchPool&) = delete;
  ~BatchPool() {
    for (std::atomic<leveldb::WriteBatch*>& slot : slots_) delete slot.load();
  }

  // An empty batch: a kept one when there is one, else a new one.
  std::unique_ptr<leveldb::WriteBatch> Take() {
    for (std::atomic<leveldb::WriteBatch*>& slot : slots_) {
      if (slot.load(std::memory_order_relaxed) == nullptr) continue;
      if (leveldb::WriteBatch* kept = slot.exchange(nullptr, std::memory_order_acquire)) {
        return std::unique_ptr<leveldb::WriteBatch>(kept);
      }
    }
    return std::make_unique<leveldb::WriteBatch>();
  }

  // Clears `batch` and keeps it for a later Take, when a slot is free and
  // it is no larger than kMaxKeptBytes; frees it otherwise.
  void Give(std::unique_ptr<leveldb::WriteBatch> batch) {
    if (!batch || batch->ApproximateSize() > kMaxKeptBytes) return;
    batch->Clear();
    for (std::atomic<leveldb::WriteBatch*>& slot : slots_) {
      leveldb::WriteBatch* empty = nullptr;
      if (slot.load(std::memory_order_relaxed) == nullptr &&
          slot.compare_exchange_strong(empty, batch.get(), std::memory_order_release)) {
        batch.release();
        return;
      }
    }
  }

 private:
  std::array<std::atomic<leveldb::WriteBatch*>, kSlots> slots_{};
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_BATCH_POOL_H_
