// The filters of stored keys (store/absent_filter.h): which new events need
// no read of their dedup entry (d/<event_id>), and which events start an
// entity, so need no read of its projection (g/<gen>/p/<entity>\0<id>).
//
// Why a filter is exact where it answers "absent": every key of its family
// is either stored before the filter's scan starts (the scan sees it) or
// written by an ingest that starts after (NoteDedupWritten and
// NoteProjectionWritten add it, before its write). The build makes that
// split a barrier: it publishes the filter under `rebuild_mu_` held
// exclusively, which every ingest holds shared from before its first read of
// a filter until after its write. Other writers of these families write keys
// that are stored already (compaction's tombstones and projections), add
// them too (RefoldInPlace), or write another generation (a rebuild's): a
// projection filter answers only for the generation it was built for, and a
// switch of generation has it rebuilt. A write that failed leaves its key in
// the filter, which costs a read, not an answer. A recovery's reopen drops
// every filter, and every build running then (DropKeyFilters): a write
// whose sync failed is in LevelDB's log but invisible until the reopen
// replays it, so a scan made in between missed its key, and when the write
// came before any filter existed, nothing noted it either. Such a filter
// said "absent" for an event stored by the failed write, and its retry was
// stored a second time.

#include <algorithm>
#include <memory>

#include "core/start_thread.h"
#include "storage/key_codec.h"
#include "storage/leveldb_util.h"
#include "store/store_impl.h"

namespace eventfold::storage {
namespace {

// The smallest filter: 4,096 keys in 5 KiB.
constexpr size_t kMinFilterCapacity = size_t{1} << 12;

constexpr unsigned kDedupFilter = 1, kProjectionFilter = 2;

void AddTo(const std::atomic<AbsentFilter*>& slot, uint64_t tag, std::string_view key) {
  AbsentFilter* f = slot.load(std::memory_order_acquire);
  if (f != nullptr && f->tag() == tag) f->Add(key);
}

// False: the filter in `slot` (one of `tag`) never saw `key`.
bool MayHold(const std::atomic<AbsentFilter*>& slot, uint64_t tag, std::string_view key) {
  const AbsentFilter* f = slot.load(std::memory_order_acquire);
  return f == nullptr || f->tag() != tag || f->MayContain(key);
}

bool Overfull(const AbsentFilter* f, size_t max_bytes) {
  return f->added() > f->capacity() && f->bytes() * 2 <= max_bytes;
}

}  // namespace

bool StoreImpl::MayHoldDedup(std::string_view event_id) const {
  return MayHold(dedup_filter_.live, 0, event_id);
}

void StoreImpl::NoteDedupWritten(std::string_view event_id) {
  AddTo(dedup_filter_.live, 0, event_id);
  AddTo(dedup_filter_.building, 0, event_id);
}

bool StoreImpl::MayHoldProjection(uint32_t gen, std::string_view key) const {
  return MayHold(projection_filter_.live, gen, key);
}

void StoreImpl::NoteProjectionWritten(uint32_t gen, std::string_view key) {
  AddTo(projection_filter_.live, gen, key);
  AddTo(projection_filter_.building, gen, key);
}

void StoreImpl::MaybeRequestKeyFilters(uint32_t projection_gen) {
  // After a failed scan (a damaged table, say) no more: every ingest would
  // start another. The store goes on reading every key, as without filters.
  if (options_.key_filter_max_bytes == 0 || key_filters_failed_.load()) return;
  // None yet (the first ingest since Open asks for both: a store opened to
  // read or rebuild never scans for them), too full, or of another
  // generation.
  unsigned want = 0;
  const AbsentFilter* d = dedup_filter_.live.load(std::memory_order_acquire);
  if (d == nullptr || Overfull(d, options_.key_filter_max_bytes)) want |= kDedupFilter;
  const AbsentFilter* p = projection_filter_.live.load(std::memory_order_acquire);
  if (p == nullptr || p->tag() != projection_gen || Overfull(p, options_.key_filter_max_bytes)) {
    want |= kProjectionFilter;
  }
  if (want == 0) return;
  {
    MutexLock lock(&key_filters_mu_);
    // One request at a time: a build running now may answer it already.
    if (key_filters_wanted_ != 0 || key_filters_busy_) return;
    key_filters_wanted_ = want;
  }
  key_filters_cv_.notify_all();
}

Status StoreImpl::StartKeyFilters() {
  if (options_.key_filter_max_bytes == 0) return Status::OK();
  return StartThread(&key_filters_thread_, "the store's key filters", [this] { KeyFiltersLoop(); });
}

void StoreImpl::KeyFiltersLoop() {
  MutexLock lock(&key_filters_mu_);
  while (!key_filters_stop_.load()) {
    if (key_filters_wanted_ == 0) {
      key_filters_cv_.wait(lock.native());  // a request or StopKeyFilters
      continue;
    }
    const unsigned want = key_filters_wanted_;
    key_filters_wanted_ = 0;
    key_filters_busy_ = true;
    lock.Unlock();
    // A failed scan leaves the live filter (or none) in place.
    if (want & kDedupFilter) BuildKeyFilter(&dedup_filter_, /*projections=*/false);
    if (want & kProjectionFilter) BuildKeyFilter(&projection_filter_, /*projections=*/true);
    lock.Lock();
    key_filters_busy_ = false;
    key_filters_cv_.notify_all();
  }
}

void StoreImpl::BuildKeyFilter(KeyFilter* slot, bool projections) {
  // Room for twice the keys there may be: one dedup entry per stored event
  // at most, and at most one projection per event, or twice the entities
  // the previous filter held (its count, not its room, as the generation
  // may have changed).
  std::unique_ptr<AbsentFilter> next;
  std::string prefix;
  uint64_t epoch = 0;
  {
    WriterLock guard(&rebuild_mu_);  // the barrier (see the top of this file)
    // Read under the lock: a reopen's DropKeyFilters frees the live filter.
    const AbsentFilter* previous = slot->live.load(std::memory_order_acquire);
    const size_t estimate = projections && previous != nullptr
                                ? previous->added()
                                : static_cast<size_t>(next_seq_.load());
    const size_t most = options_.key_filter_max_bytes * 8 / AbsentFilter::kBitsPerKey;
    const size_t capacity = std::min(most, std::max(kMinFilterCapacity, 2 * estimate));
    epoch = key_filters_epoch_;
    const uint32_t gen = gens_.projections;
    next = std::make_unique<AbsentFilter>(capacity, projections ? gen : 0);
    prefix = projections ? ProjectionScanPrefix(gen, "") : std::string(kDedupPrefix);
    slot->building.store(next.get(), std::memory_order_release);
  }
  // A dedup filter holds event ids, a projection filter whole keys.
  const size_t strip = projections ? 0 : prefix.size();
  bool complete = false;
  {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
    size_t n = 0;
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (++n % 4096 == 0 && key_filters_stop_.load()) break;
      next->Add(View(it->key()).substr(strip));
    }
    complete = it->status().ok() && !key_filters_stop_.load();
    if (!it->status().ok()) key_filters_failed_.store(true);
  }
  std::unique_ptr<AbsentFilter> old;
  {
    WriterLock guard(&rebuild_mu_);  // nobody holds a read of either pointer
    if (slot->building.load(std::memory_order_relaxed) == next.get()) {
      slot->building.store(nullptr, std::memory_order_release);
    }
    if (complete && epoch == key_filters_epoch_) {  // no reopen since the scan began
      slot->live.store(next.get(), std::memory_order_release);
      old = std::move(slot->owned);
      slot->owned = std::move(next);
    }
  }
}

void StoreImpl::DropKeyFilters() {
  ++key_filters_epoch_;
  for (KeyFilter* slot : {&dedup_filter_, &projection_filter_}) {
    slot->live.store(nullptr, std::memory_order_release);
    slot->building.store(nullptr, std::memory_order_release);  // its build's to free
    slot->owned.reset();  // nobody holds a read of it: rebuild_mu_ is held exclusively
  }
}

uint64_t StoreImpl::KeyFilterBytes() const {
  // Held shared, rebuild_mu_ keeps every filter a slot points to alive: a
  // build swaps and frees them under it held exclusively.
  uint64_t bytes = 0;
  for (const KeyFilter* slot : {&dedup_filter_, &projection_filter_}) {
    for (const std::atomic<AbsentFilter*>* f : {&slot->live, &slot->building}) {
      if (const AbsentFilter* filter = f->load(std::memory_order_acquire)) bytes += filter->bytes();
    }
  }
  return bytes;
}

void StoreImpl::StopKeyFilters() {
  {
    MutexLock lock(&key_filters_mu_);
    key_filters_stop_.store(true);
  }
  key_filters_cv_.notify_all();
  if (key_filters_thread_.joinable()) key_filters_thread_.join();
}

StoreImpl::KeyFilterSizes StoreImpl::AwaitKeyFiltersForTesting() {
  {
    MutexLock lock(&key_filters_mu_);
    while ((key_filters_wanted_ != 0 || key_filters_busy_) && !key_filters_stop_.load()) {
      key_filters_cv_.wait(lock.native());
    }
  }
  KeyFilterSizes sizes;
  ReaderLock guard(&rebuild_mu_);  // a reopen's DropKeyFilters frees them
  if (const AbsentFilter* f = dedup_filter_.live.load(std::memory_order_acquire)) {
    sizes.dedup = f->capacity();
  }
  if (const AbsentFilter* f = projection_filter_.live.load(std::memory_order_acquire)) {
    sizes.projections = f->capacity();
    sizes.projection_gen = static_cast<uint32_t>(f->tag());
  }
  return sizes;
}

}  // namespace eventfold::storage
