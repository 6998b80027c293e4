#include "replay/rebuild.h"

#include <chrono>
#include <memory>

#include <leveldb/write_batch.h>

#include "core/decode.h"
#include "replay/materializer.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/record_codec.h"

namespace eventfold {
namespace {

using storage::FromLevelDb;

constexpr size_t kBatchBytes = 4 << 20;
const size_t kEmptyBatchBytes = leveldb::WriteBatch().ApproximateSize();

std::string_view View(const leveldb::Slice& s) { return {s.data(), s.size()}; }

// Accumulates writes and flushes them in bounded batches.
class BatchWriter {
 public:
  explicit BatchWriter(leveldb::DB* db) : db_(db) {}
  Status Put(std::string_view key, std::string_view value) {
    batch_.Put(leveldb::Slice(key.data(), key.size()),
               leveldb::Slice(value.data(), value.size()));
    return MaybeFlush();
  }
  Status Delete(std::string_view key) {
    batch_.Delete(leveldb::Slice(key.data(), key.size()));
    return MaybeFlush();
  }
  Status Flush() {
    if (batch_.ApproximateSize() <= kEmptyBatchBytes) return Status::OK();
    Status st = FromLevelDb(db_->Write(leveldb::WriteOptions(), &batch_), "rebuild write");
    batch_.Clear();
    return st;
  }

 private:
  Status MaybeFlush() {
    return batch_.ApproximateSize() >= kBatchBytes ? Flush() : Status::OK();
  }
  leveldb::DB* db_;
  leveldb::WriteBatch batch_;
};

Status DropPrefix(leveldb::DB* db, std::string_view prefix) {
  BatchWriter w(db);
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));
  const leveldb::Slice p(prefix.data(), prefix.size());
  for (it->Seek(p); it->Valid() && it->key().starts_with(p); it->Next()) {
    Status st = w.Delete(View(it->key()));
    if (!st.ok()) return st;
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "rebuild scan");
  return w.Flush();
}

// Step 2: one log entry per routed event, dedup identities refreshed.
Status RouteEvents(leveldb::DB* db, const Profile& profile, RebuildSummary* sum) {
  BatchWriter w(db);
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));
  const leveldb::Slice prefix(storage::kEventPrefix.data(), storage::kEventPrefix.size());
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<storage::StoredEvent> stored =
        storage::DecodeStoredEvent(View(it->key()), View(it->value()));
    if (!stored.ok()) return stored.status();
    ++sum->events;
    Result<DecodedEvent> decoded = DecodeEvent(stored->body, profile);
    // A body the new profile cannot route (say, its key path is missing) stays
    // stored, unrouted: accepted events are never dropped.
    std::optional<EntityRef> ref;
    if (decoded.ok()) ref = decoded->entity;
    if (!ref) ++sum->unrouted;
    if (ref != stored->entity) {
      storage::DedupEntry d{stored->seq, stored->event.type, stored->event.occurred_at, ref};
      Status st = w.Put(storage::DedupKey(stored->event.event_id), storage::EncodeDedup(d));
      if (!st.ok()) return st;
      stored->entity = ref;
      st = w.Put(View(it->key()), storage::EncodeEvent(*stored));
      if (!st.ok()) return st;
    }
    if (!ref) continue;
    storage::LogEntry entry{RankedEvent{std::move(decoded->event), decoded->rank},
                            stored->seq, stored->received_at};
    Status st = w.Put(storage::LogKey(*ref, stored->seq), storage::EncodeLog(entry));
    if (!st.ok()) return st;
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "rebuild scan");
  return w.Flush();
}

// Step 3: fold each entity's log (consecutive keys) into its projection.
Status FoldEntities(leveldb::DB* db, const Profile& profile, RebuildSummary* sum) {
  BatchWriter w(db);
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));
  std::optional<EntityRef> current;
  std::vector<RankedEvent> events;
  auto flush_entity = [&]() -> Status {
    if (!current) return Status::OK();
    const EntityType* type = profile.FindEntity(current->entity);
    if (!type) return Status::Corruption("log of unknown entity " + current->entity);
    storage::ProjectionState state = FoldLog(*type, *current, &events);
    ++sum->entities;
    sum->applied += state.projection.applied;
    sum->rejected += state.projection.rejected.size();
    events.clear();
    return w.Put(storage::ProjectionKey(*current), storage::EncodeProjection(state));
  };
  const leveldb::Slice prefix(storage::kLogPrefix.data(), storage::kLogPrefix.size());
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    auto parsed = storage::ParseLogKey(View(it->key()));
    if (!parsed) return Status::Corruption("malformed log key");
    if (parsed->first != current) {
      Status st = flush_entity();
      if (!st.ok()) return st;
      current = std::move(parsed->first);
    }
    Result<storage::LogEntry> e = storage::DecodeLog(View(it->key()), View(it->value()));
    if (!e.ok()) return e.status();
    events.push_back(std::move(e->ranked));
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "rebuild scan");
  Status st = flush_entity();
  if (!st.ok()) return st;
  return w.Flush();
}

}  // namespace

Result<RebuildSummary> RebuildProjections(leveldb::DB* db, const Profile& profile) {
  const auto start = std::chrono::steady_clock::now();
  RebuildSummary sum;
  for (std::string_view prefix : {storage::kLogPrefix, storage::kProjectionPrefix}) {
    Status st = DropPrefix(db, prefix);
    if (!st.ok()) return st;
  }
  Status st = RouteEvents(db, profile, &sum);
  if (!st.ok()) return st;
  st = FoldEntities(db, profile, &sum);
  if (!st.ok()) return st;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sum;
}

}  // namespace eventfold
