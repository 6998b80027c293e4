// The filter of stored event ids (store/absent_filter.h): which new events
// need no read of their dedup entry.
//
// Why it is exact where it answers "absent": every dedup entry is either
// stored before a filter's scan starts (the scan sees it) or written by an
// ingest that starts after (NoteDedupWritten adds it, before its write).
// The build makes that split a barrier: it publishes the filter under
// `rebuild_mu_` held exclusively, which every ingest holds shared from
// before its first read of the filter until after its write. Entries that
// only compaction rewrites (tombstones) were stored before, so the filter
// holds them already; a write that failed leaves its id in the filter, which
// costs a read, not an answer. Recovery's reopen keeps the filter: the
// reopened database holds no id that was not written through ingest.

#include <algorithm>
#include <memory>

#include "storage/key_codec.h"
#include "storage/leveldb_util.h"
#include "store/store_impl.h"

namespace eventfold::storage {
namespace {

// The smallest filter: 4,096 ids in 5 KiB.
constexpr size_t kMinDedupFilterCapacity = size_t{1} << 12;

}  // namespace

bool StoreImpl::MayHoldDedup(std::string_view event_id) const {
  const AbsentFilter* f = dedup_filter_.load(std::memory_order_acquire);
  return f == nullptr || f->MayContain(event_id);
}

void StoreImpl::NoteDedupWritten(std::string_view event_id) {
  if (AbsentFilter* f = dedup_filter_.load(std::memory_order_acquire)) f->Add(event_id);
  if (AbsentFilter* f = dedup_filter_building_.load(std::memory_order_acquire)) f->Add(event_id);
}

void StoreImpl::MaybeGrowDedupFilter() {
  const AbsentFilter* f = dedup_filter_.load(std::memory_order_acquire);
  if (f == nullptr || f->added() <= f->capacity()) return;
  if (f->bytes() * 2 > options_.dedup_filter_max_bytes) return;  // as large as allowed
  {
    MutexLock lock(&dedup_filter_mu_);
    if (dedup_filter_wanted_ || dedup_filter_busy_) return;
    dedup_filter_wanted_ = true;
  }
  dedup_filter_cv_.notify_all();
}

void StoreImpl::StartDedupFilter() {
  if (options_.dedup_filter_max_bytes == 0) return;
  {
    MutexLock lock(&dedup_filter_mu_);
    dedup_filter_wanted_ = true;
  }
  dedup_filter_thread_ = std::thread([this] { DedupFilterLoop(); });
}

void StoreImpl::DedupFilterLoop() {
  MutexLock lock(&dedup_filter_mu_);
  while (!dedup_filter_stop_.load()) {
    if (!dedup_filter_wanted_) {
      dedup_filter_cv_.wait(lock.native());  // a request or StopDedupFilter
      continue;
    }
    dedup_filter_wanted_ = false;
    dedup_filter_busy_ = true;
    lock.Unlock();
    BuildDedupFilter();  // a failed scan leaves the live filter (or none) in place
    lock.Lock();
    dedup_filter_busy_ = false;
    dedup_filter_cv_.notify_all();
  }
}

bool StoreImpl::BuildDedupFilter() {
  // Room for twice the events stored so far (each has at most one dedup
  // entry), within the configured bytes.
  const size_t most = options_.dedup_filter_max_bytes * 8 / AbsentFilter::kBitsPerKey;
  const size_t capacity = std::min(
      most, std::max<size_t>(kMinDedupFilterCapacity, 2 * static_cast<size_t>(next_seq_.load())));
  auto next = std::make_unique<AbsentFilter>(capacity);
  {
    WriterLock guard(&rebuild_mu_);  // the barrier (see the top of this file)
    dedup_filter_building_.store(next.get(), std::memory_order_release);
  }
  bool complete = false;
  {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
    const std::string prefix(kDedupPrefix);
    size_t n = 0;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (++n % 4096 == 0 && dedup_filter_stop_.load()) break;
      next->Add(View(it->key()).substr(prefix.size()));
    }
    complete = it->status().ok() && !dedup_filter_stop_.load();
  }
  std::unique_ptr<AbsentFilter> old;
  {
    WriterLock guard(&rebuild_mu_);  // nobody holds a read of either pointer
    dedup_filter_building_.store(nullptr, std::memory_order_release);
    if (complete) {
      dedup_filter_.store(next.get(), std::memory_order_release);
      old = std::move(dedup_filter_owned_);
      dedup_filter_owned_ = std::move(next);
    }
  }
  return complete;
}

void StoreImpl::StopDedupFilter() {
  {
    MutexLock lock(&dedup_filter_mu_);
    dedup_filter_stop_.store(true);
  }
  dedup_filter_cv_.notify_all();
  if (dedup_filter_thread_.joinable()) dedup_filter_thread_.join();
}

size_t StoreImpl::AwaitDedupFilterForTesting() {
  {
    MutexLock lock(&dedup_filter_mu_);
    while ((dedup_filter_wanted_ || dedup_filter_busy_) && !dedup_filter_stop_.load()) {
      dedup_filter_cv_.wait(lock.native());
    }
  }
  const AbsentFilter* f = dedup_filter_.load(std::memory_order_acquire);
  return f == nullptr ? 0 : f->capacity();
}

}  // namespace eventfold::storage
