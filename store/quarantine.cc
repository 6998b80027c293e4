// The quarantine of refused deliveries: bounded, best effort, never projected.
//
// Bounded: in entries and bytes (Options::quarantine_max_entries, _bytes;
// the oldest go first), in rate (Options::quarantine_max_per_second), and
// per delivery (a body prefix, allowlisted headers with cut values). Best
// effort: writes are unsynced and never wait behind the commit path
// (GuardedDb::TryWrite); while it is busy, refusals wait in a small buffer
// that the next quarantine call or ingest flushes. What is not kept is
// counted (Counters::quarantine_dropped, quarantine_headers_dropped).

#include <leveldb/write_batch.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <memory>
#include <vector>

#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "store/store_impl.h"

namespace eventfold::storage {
namespace {

// Headers kept with a refused delivery (lower case): what traces it to its
// sender and what it claimed to be. Anything else, credentials under any
// name included, is dropped: an allowlist, not a denylist.
constexpr std::array<std::string_view, 12> kKeptHeaders = {
    "content-type", "content-length", "content-encoding", "transfer-encoding",
    "user-agent",   "host",           "x-forwarded-for",  "x-real-ip",
    "x-request-id", "x-rr-event-id",  "webhook-id",       "webhook-timestamp"};

// Refusals held while the write path is busy; more drop the oldest held.
constexpr size_t kMaxPending = 64;

bool Kept(std::string_view name) {
  if (name.size() > 32) return false;
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::find(kKeptHeaders.begin(), kKeptHeaders.end(), lower) != kKeptHeaders.end();
}

// Keeps the allowlisted headers, at most kQuarantineHeaderCount, each value
// cut to kQuarantineHeaderValueBytes; returns how many were dropped.
uint64_t TrimHeaders(Headers* headers) {
  Headers kept;
  uint64_t dropped = 0;
  for (auto& [name, value] : *headers) {
    if (!Kept(name) || kept.size() == kQuarantineHeaderCount) {
      ++dropped;
      continue;
    }
    if (value.size() > kQuarantineHeaderValueBytes) value.resize(kQuarantineHeaderValueBytes);
    kept.emplace_back(std::move(name), std::move(value));
  }
  *headers = std::move(kept);
  return dropped;
}

}  // namespace

Status StoreImpl::RecoverQuarantine() {
  // Every entry's size, for the byte cap: the cap bounds the scan too.
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
  const std::string prefix(kQuarantinePrefix);
  quarantine_sizes_.clear();
  quarantine_bytes_ = 0;
  quarantine_oldest_ = quarantine_next_ = 1;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::optional<uint64_t> seq = ParseSeqKey(View(it->key()), kQuarantinePrefix);
    if (!seq) continue;
    if (quarantine_sizes_.empty()) quarantine_oldest_ = *seq;
    const uint64_t bytes = it->key().size() + it->value().size();
    quarantine_sizes_.emplace_back(*seq, bytes);
    quarantine_bytes_ += bytes;
    quarantine_next_ = *seq + 1;
  }
  return FromLevelDb(it->status(), "scanning quarantine");
}

Status StoreImpl::Add(RefusedDelivery r) {
  if (options_.quarantine_max_entries == 0 || options_.quarantine_max_bytes == 0) {
    return Status::OK();
  }
  r.received_at = clock_->NowMicros();
  r.status = HttpStatus(r.outcome);
  counters_.quarantine_headers_dropped.fetch_add(TrimHeaders(&r.headers),
                                                 std::memory_order_relaxed);
  if (r.body_bytes == 0) r.body_bytes = r.body_prefix.size();
  if (r.body_prefix.size() > kQuarantineBodyBytes) r.body_prefix.resize(kQuarantineBodyBytes);
  if (r.reason.size() > kQuarantineBodyBytes) r.reason.resize(kQuarantineBodyBytes);

  MutexLock lock(&quarantine_mu_);
  if (const size_t limit = options_.quarantine_max_per_second; limit > 0) {
    const int64_t second = r.received_at / 1000000;
    if (second != quarantine_second_) {
      quarantine_second_ = second;
      quarantine_this_second_ = 0;
    }
    if (quarantine_this_second_ >= limit) {
      counters_.quarantine_dropped.fetch_add(1, std::memory_order_relaxed);
      return Status::OK();
    }
    ++quarantine_this_second_;
  }
  if (quarantine_pending_.size() == kMaxPending) {
    quarantine_pending_.erase(quarantine_pending_.begin());
    counters_.quarantine_dropped.fetch_add(1, std::memory_order_relaxed);
  }
  quarantine_pending_.push_back(std::move(r));
  return FlushQuarantineLocked();
}

void StoreImpl::FlushQuarantine() {
  MutexLock lock(&quarantine_mu_);
  (void)FlushQuarantineLocked();
}

Status StoreImpl::FlushQuarantineLocked() {
  if (quarantine_pending_.empty()) return Status::OK();
  leveldb::WriteBatch batch;
  std::vector<std::pair<uint64_t, uint64_t>> added;  // seq and bytes of each new entry
  uint64_t bytes = quarantine_bytes_;
  uint64_t next = quarantine_next_;
  uint64_t too_big = 0;
  for (const RefusedDelivery& r : quarantine_pending_) {
    std::string key = QuarantineKey(next);
    std::string value = EncodeRefused(r);
    const uint64_t size = key.size() + value.size();
    if (size > options_.quarantine_max_bytes) {
      ++too_big;
      continue;
    }
    batch.Put(key, value);
    added.emplace_back(next++, size);
    bytes += size;
  }
  // The oldest go first (the stored ones, then those of this batch).
  const size_t total = quarantine_sizes_.size() + added.size();
  auto entry = [&](size_t i) REQUIRES(quarantine_mu_) -> const std::pair<uint64_t, uint64_t>& {
    return i < quarantine_sizes_.size() ? quarantine_sizes_[i]
                                        : added[i - quarantine_sizes_.size()];
  };
  size_t evicted = 0;
  while (evicted < total && (total - evicted > options_.quarantine_max_entries ||
                             bytes > options_.quarantine_max_bytes)) {
    batch.Delete(QuarantineKey(entry(evicted).first));
    bytes -= entry(evicted).second;
    ++evicted;
  }
  leveldb::Status s;
  if (!db_->TryWrite(&batch, &s)) return Status::OK();  // busy: the next call flushes
  const uint64_t attempted = quarantine_pending_.size();
  quarantine_pending_.clear();
  counters_.quarantine_dropped.fetch_add(too_big, std::memory_order_relaxed);
  if (!s.ok()) {
    counters_.quarantine_dropped.fetch_add(attempted - too_big, std::memory_order_relaxed);
    return FromLevelDb(s, "quarantining");
  }
  quarantine_sizes_.insert(quarantine_sizes_.end(), added.begin(), added.end());
  quarantine_sizes_.erase(quarantine_sizes_.begin(),
                          quarantine_sizes_.begin() + static_cast<ptrdiff_t>(evicted));
  quarantine_bytes_ = bytes;
  quarantine_next_ = next;
  quarantine_oldest_ = quarantine_sizes_.empty() ? next : quarantine_sizes_.front().first;
  return Status::OK();
}

Status StoreImpl::List(const std::function<bool(const RefusedDelivery&)>& fn) {
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
  const std::string prefix(kQuarantinePrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<RefusedDelivery> r = DecodeRefused(View(it->key()), View(it->value()));
    if (!r.ok()) return r.status();
    if (!fn(*r)) break;
  }
  return FromLevelDb(it->status(), "listing quarantine");
}

void StoreImpl::QuarantineRefusals(const Delivery* const* deliveries,
                                   const std::vector<IngestResult>& results) {
  for (size_t i = 0; i < results.size(); ++i) {
    const Outcome o = results[i].outcome;
    if (o != Outcome::kInvalid && o != Outcome::kTooLarge && o != Outcome::kConflict) continue;
    RefusedDelivery r;
    r.outcome = o;
    r.reason = results[i].message;
    r.headers = deliveries[i]->headers;
    r.body_prefix = deliveries[i]->body.substr(0, kQuarantineBodyBytes);
    r.body_bytes = deliveries[i]->body.size();
    (void)Add(std::move(r));
  }
}

}  // namespace eventfold::storage
