// Retention (Store::Gc): feed trimming, compaction of old terminal entities
// into their snapshot with a dedup tombstone per dropped event, tombstone
// expiry, and the background pass. What is kept and dropped, and why:
// docs/RETENTION.md.

#include <leveldb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>

#include "core/parse_number.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/log_data.h"
#include "storage/meta_text.h"
#include "storage/projection_read.h"
#include "store/store_impl.h"

namespace eventfold::storage {
namespace {

// Entities compacted (or whose tombstones expire) under one lock set and
// one synced write.
constexpr size_t kCompactionGroup = 64;

// A state no transition of the profile leaves: nothing can change the
// entity any more, except a late event, which the compaction snapshot takes.
bool IsTerminal(const EntityType& type, std::string_view state) {
  if (state == kInitialState) return false;
  return std::none_of(type.transitions.begin(), type.transitions.end(), [&](const Transition& t) {
    return std::find(t.from.begin(), t.from.end(), state) != t.from.end();
  });
}

struct LoggedAt {
  std::string key;
  LogEntry entry;
};

Status ReadLog(leveldb::DB* db, uint32_t gen, const Profile& profile, const EntityRef& ref,
               std::vector<LoggedAt>* out) {
  const std::string prefix = LogPrefix(gen, ref);
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ScanOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<LogEntry> e = DecodeLog(View(it->key()), View(it->value()), profile);
    if (!e.ok()) return e.status();
    out->push_back(LoggedAt{it->key().ToString(), std::move(*e)});
  }
  return FromLevelDb(it->status(), "reading an entity log");
}

// Whether an event of `log` arrived after `cutoff`. A format 8 log record
// leaves its received_at to a/<seq>, read here (only for the log of an
// entity that is otherwise due for compaction).
Result<bool> AnyArrivedAfter(leveldb::DB* db, const std::vector<LoggedAt>& log, int64_t cutoff) {
  for (const LoggedAt& l : log) {
    int64_t at = l.entry.received_at;
    if (at == 0) {
      Result<int64_t> read = ReadReceivedAt(db, leveldb::ReadOptions(), l.entry.seq);
      if (!read.ok()) return read.status();
      at = *read;
    }
    if (at > cutoff) return true;
  }
  return false;
}

}  // namespace

Result<uint64_t> StoreImpl::RetiredSeq() {
  Result<std::optional<uint64_t>> seq =
      ReadNumber(db_.get(), leveldb::ReadOptions(), MetaKey("retired_seq"));
  if (!seq.ok()) return seq.status();
  return seq->value_or(0);
}

Status StoreImpl::CompactedTypesKnown(const Profile& profile) {
  const std::string prefix(kCompactionPrefix);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);) {
    std::optional<EntityRef> ref = ParseCompactionKey(View(it->key()));
    if (!ref) return Status::Corruption("malformed compaction key");
    if (!profile.FindEntity(ref->entity)) {
      return Status::InvalidArgument("rebuild: the profile has no entity type \"" + ref->entity +
                                     "\", and " + ref->entity + "/" + ref->id +
                                     " is compacted: its dropped events cannot be routed anew");
    }
    it->Seek(PrefixEnd(prefix + ref->entity + std::string(1, '\0')));  // next type
  }
  return FromLevelDb(it->status(), "reading compaction records");
}

Result<GcSummary> StoreImpl::Gc(const GcOptions& options) {
  if (options.tombstone_micros < GcOptions::kMinTombstoneMicros) {
    return Status::InvalidArgument(
        "gc: tombstones must be kept at least 35 days (a sender's portal resends for 30)");
  }
  if (options.tombstone_micros > GcOptions::kMaxTombstoneMicros) {
    return Status::InvalidArgument(
        "gc: tombstones are kept at most a thousand years (365000 days); " +
        std::to_string(options.tombstone_micros) + " microseconds is more");
  }
  if (options.compact_after_micros < 0) {
    return Status::InvalidArgument("gc: the compaction age must not be negative");
  }
  MutexLock gc_guard(&gc_mu_);
  // Compaction drops a/ records, which a rebuild reads: never both at once.
  bool idle = false;
  if (!rebuilding_.compare_exchange_strong(idle, true)) {
    return Status::Busy("gc: a rebuild of this store is running");
  }
  struct Done {
    std::atomic<bool>* flag;
    ~Done() { flag->store(false); }
  } done{&rebuilding_};
  const int64_t now = clock_->NowMicros();
  GcSummary sum;
  sum.bytes_before = ApproximateBytes();
  Result<FeedTrimSummary> trim = TrimFeed(options.feed_grace);
  if (!trim.ok()) return trim.status();
  sum.feed = *trim;
  {
    // The live generation and routing epoch change only in a rebuild's
    // switch, which `rebuilding_` holds off; the shared lock says so to
    // the analysis and costs ingest nothing.
    ReaderLock guard(&rebuild_mu_);
    if (options.compact_after_micros > 0) {
      Status st = CompactTerminal(now, options, &sum);
      if (!st.ok()) return st;
    }
    Status st = ExpireTombstones(now, &sum);
    if (!st.ok()) return st;
  }
  Status st;
  if (options.compact_storage) {
    st = Compact();
    if (!st.ok()) return st;
  }
  sum.bytes_after = ApproximateBytes();
  sum.seconds = static_cast<double>(clock_->NowMicros() - now) / 1e6;
  return sum;
}

// An old terminal entity found by the scan, with its log as first seen.
struct StoreImpl::CompactionCandidate {
  EntityRef ref;
  std::vector<LoggedAt> log;
};

Status StoreImpl::CompactTerminal(int64_t now, const GcOptions& options, GcSummary* sum) {
  const int64_t cutoff = now - options.compact_after_micros;
  std::vector<CompactionCandidate> group;
  // The iterator's implicit snapshot is not disturbed by the compactions.
  const std::string prefix = ProjectionScanPrefix(gens_.projections, "");
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    std::optional<EntityRef> ref = ParseProjectionKey(View(it->key()));
    if (!ref) return Status::Corruption("malformed projection key");
    Result<ProjectionState> p = DecodeProjection(View(it->key()), View(it->value()));
    if (!p.ok()) return p.status();
    const EntityType* type = profile_->FindEntity(ref->entity);
    if (!type || !IsTerminal(*type, p->projection.state)) continue;
    CompactionCandidate c{std::move(*ref), {}};
    Status st = ReadLog(db_.get(), gens_.logs, *profile_, c.ref, &c.log);
    if (!st.ok()) return st;
    if (c.log.empty()) continue;  // compacted, nothing since
    Result<bool> recent = AnyArrivedAfter(db_.get(), c.log, cutoff);
    if (!recent.ok()) return recent.status();
    if (*recent) {
      ++sum->entities_kept_recent;
      continue;
    }
    group.push_back(std::move(c));
    if (group.size() == kCompactionGroup) {
      st = CompactGroup(&group, now, options, sum);
      if (!st.ok()) return st;
      group.clear();
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "listing projections");
  return group.empty() ? Status::OK() : CompactGroup(&group, now, options, sum);
}

Status StoreImpl::CompactGroup(std::vector<CompactionCandidate>* group, int64_t now,
                               const GcOptions& options, GcSummary* sum) {
  // Hold the entities and every event id, as ingest does: no event joins an
  // entity and no resend reads a dedup entry while they are rewritten.
  std::vector<size_t> stripes;
  for (const CompactionCandidate& c : *group) {
    stripes.push_back(LockTable::StripeOf(StableHash(c.ref.entity, c.ref.id)));
    for (const LoggedAt& l : c.log) {
      stripes.push_back(LockTable::StripeOf(StableHash(l.entry.ranked.event.event_id)));
    }
  }
  LockTable::Guard guard(&locks_, std::move(stripes));
  Result<uint64_t> retired = RetiredSeq();
  if (!retired.ok()) return retired.status();
  uint64_t highest = *retired;
  const int64_t until = now + options.tombstone_micros;
  leveldb::WriteBatch batch;
  GcSummary done;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
  for (const CompactionCandidate& candidate : *group) {
    const EntityRef& ref = candidate.ref;
    std::vector<LoggedAt> log;
    Status st = ReadLog(db_.get(), gens_.logs, *profile_, ref, &log);
    if (!st.ok()) return st;
    if (!std::equal(log.begin(), log.end(), candidate.log.begin(), candidate.log.end(),
                    [](const LoggedAt& a, const LoggedAt& b) { return a.key == b.key; })) {
      continue;  // an event arrived meanwhile: the next pass decides
    }
    std::string value;
    const std::string pkey = ProjectionKey(gens_.projections, ref);
    st = FromLevelDb(db_->Get(leveldb::ReadOptions(), pkey, &value), "reading projection");
    if (!st.ok()) return st;
    // Whole: the fold of everything dropped becomes the entity's snapshot.
    Result<ProjectionState> state =
        ProjectionReader(db_.get(), leveldb::ReadOptions(), gens_, *profile_).Read(pkey, value);
    if (!state.ok()) return state.status();
    CompactionEntry c;
    const std::string ckey = CompactionKey(ref);
    leveldb::Status s = db_->Get(leveldb::ReadOptions(), ckey, &value);
    if (s.ok()) {
      Result<CompactionEntry> earlier = DecodeCompaction(ckey, value);
      if (!earlier.ok()) return earlier.status();
      c = std::move(*earlier);
    } else if (!s.IsNotFound()) {
      return FromLevelDb(s, "reading a compaction record");
    }

    for (const LoggedAt& l : log) {
      const Event& ev = l.entry.ranked.event;
      highest = std::max(highest, l.entry.seq);
      batch.Delete(l.key);
      batch.Delete(EventKey(l.entry.seq));
      batch.Put(DedupKey(ev.event_id),
                EncodeDedup(DedupEntry{
                    l.entry.seq, ev.type, ev.occurred_at, ref, routing_epoch_, until, {}}));
      c.tombstones.push_back(ev.event_id);
    }
    const std::string snaps = SnapshotPrefix(gens_.projections, ref);
    for (it->Seek(snaps); it->Valid() && it->key().starts_with(snaps); it->Next()) {
      batch.Delete(it->key());
    }
    if (!it->status().ok()) return FromLevelDb(it->status(), "reading snapshots");
    // The projection is the fold of everything dropped; from now on it is
    // the entity's starting point, at the position before every event.
    state->last = CompactionPoint();
    state->snapshots = ProjectionState::Snapshots::kSome;  // the one written below
    const std::string snapshot = EncodeProjection(*state);
    batch.Put(SnapshotKey(gens_.projections, ref, CompactionPoint()), snapshot);
    batch.Put(pkey, snapshot);
    c.snapshot = std::move(*state);
    c.compacted_at = now;
    c.events += log.size();
    // Earlier tombstones are kept as long as the new ones: "at least" holds.
    c.tombstones_until = until;
    batch.Put(ckey, EncodeCompaction(c));
    ++done.entities_compacted;
    done.events_compacted += log.size();
  }
  if (highest != *retired) PutNumber(&batch, MetaKey("retired_seq"), highest);
  // One synced write per group: all of it or none survives a crash.
  Status st = FromLevelDb(db_->Write(Synced(), &batch), "compacting entities");
  // Their dedup entries are tombstones now, which expire: a redelivery must
  // be decided by them, not by what was remembered of the stored event.
  recent_.Clear();
  if (!st.ok()) return st;
  sum->entities_compacted += done.entities_compacted;
  sum->events_compacted += done.events_compacted;
  sum->tombstones_written += done.events_compacted;
  return Status::OK();
}

Status StoreImpl::ExpireTombstones(int64_t now, GcSummary* sum) {
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
  // The expired ids are kept for the conflict records only: usually none.
  const std::string conflicts(kConflictPrefix);
  it->Seek(conflicts);
  const bool any_conflict = it->Valid() && it->key().starts_with(conflicts);
  std::set<std::string, std::less<>> expired;
  // Compaction records due, expired under one lock set and one synced write.
  std::vector<std::pair<std::string, CompactionEntry>> group;
  auto flush = [&]() -> Status {
    std::vector<size_t> stripes;
    for (const auto& [key, c] : group) {
      for (const std::string& id : c.tombstones) {
        stripes.push_back(LockTable::StripeOf(StableHash(id)));
      }
    }
    LockTable::Guard guard(&locks_, std::move(stripes));
    leveldb::WriteBatch batch;
    for (auto& [key, c] : group) {
      for (const std::string& id : c.tombstones) {
        std::string value;
        const std::string dkey = DedupKey(id);
        leveldb::Status s = db_->Get(leveldb::ReadOptions(), dkey, &value);
        if (s.IsNotFound()) continue;
        if (!s.ok()) return FromLevelDb(s, "reading a dedup tombstone");
        Result<DedupEntry> d = DecodeDedup(dkey, value);
        if (!d.ok()) return d.status();
        if (d->expires_at == 0) continue;  // not a tombstone: leave it
        batch.Delete(dkey);
        if (any_conflict) expired.insert(id);
        ++sum->tombstones_expired;
      }
      c.tombstones.clear();
      batch.Put(key, EncodeCompaction(c));
    }
    group.clear();
    return FromLevelDb(db_->Write(Synced(), &batch), "expiring dedup tombstones");
  };
  const std::string prefix(kCompactionPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<CompactionEntry> c = DecodeCompaction(View(it->key()), View(it->value()));
    if (!c.ok()) return c.status();
    if (c->tombstones.empty() || c->tombstones_until > now) continue;
    group.emplace_back(it->key().ToString(), std::move(*c));
    if (group.size() == kCompactionGroup) {
      Status st = flush();
      if (!st.ok()) return st;
    }
  }
  if (!group.empty()) {
    Status st = flush();
    if (!st.ok()) return st;
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading compaction records");
  if (expired.empty()) return Status::OK();

  // Conflict records of those events go with their tombstones: they name a
  // stored event that no longer exists and an identity nobody answers for.
  leveldb::WriteBatch batch;
  for (it->Seek(conflicts); it->Valid() && it->key().starts_with(conflicts); it->Next()) {
    Result<ConflictEntry> c = DecodeConflict(View(it->key()), View(it->value()));
    if (!c.ok()) return c.status();
    if (!expired.contains(c->event_id)) continue;
    batch.Delete(it->key());
    ++sum->conflicts_dropped;
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading conflict records");
  return FromLevelDb(db_->Write(Synced(), &batch), "dropping conflict records");
}

void StoreImpl::GcLoop(int64_t first_due) {
  MutexLock lock(&gc_thread_mu_);
  int64_t due = first_due;
  while (!gc_stop_) {
    if (clock_->NowMicros() < due) {
      clock_->WaitUntil(lock.native(), gc_cv_, due);  // StopGc notifies gc_cv_
      continue;
    }
    lock.Unlock();
    Result<GcSummary> pass = Gc(options_.gc);
    lock.Lock();
    gc_last_ = std::move(pass);
    ++gc_passes_;
    gc_cv_.notify_all();
    due = clock_->NowMicros() + options_.gc_interval_micros;
  }
}

void StoreImpl::StopGc() {
  {
    MutexLock lock(&gc_thread_mu_);
    gc_stop_ = true;
  }
  gc_cv_.notify_all();
  if (gc_thread_.joinable()) gc_thread_.join();
}

uint64_t StoreImpl::WaitForGcPass(uint64_t after, int64_t timeout_micros, Result<GcSummary>* last) {
  MutexLock lock(&gc_thread_mu_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(timeout_micros);
  while (gc_passes_ <= after) {
    if (gc_cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout) break;
  }
  if (last && gc_last_) *last = *gc_last_;
  return gc_passes_;
}

}  // namespace eventfold::storage
