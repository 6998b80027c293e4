#include "store/ingest_txn.h"

#include <algorithm>
#include <memory>

#include "core/materializer.h"
#include "core/rfc3339.h"
#include "core/sha256.h"
#include "storage/commit_queue.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/log_data.h"
#include "store/store_impl.h"

namespace eventfold::storage {
namespace {

// A WriteBatch with no records is its 12-byte header (LevelDB's format).
const size_t kEmptyBatchBytes = leveldb::WriteBatch().ApproximateSize();

std::string Describe(const std::string& type, int64_t occurred_at,
                     const std::optional<EntityRef>& entity) {
  std::string s = "type " + type + ", occurred_at " + FormatRfc3339(occurred_at);
  s += entity ? ", entity " + entity->entity + "/" + entity->id : ", unrouted";
  return s;
}

}  // namespace

// The materializer's view of one entity: stored log and snapshots with this
// transaction's staged changes laid over them.
class IngestTxn::OverlayView final : public LogView {
 public:
  // Logged entries with a seq of `hide_from` or more are left out.
  OverlayView(leveldb::DB* db, const Generations& gens, std::optional<uint64_t> hide_from,
              const Profile& profile, const EntityRef& ref, EntityState* entity)
      : db_(db),
        gens_(gens),
        hide_from_(hide_from),
        profile_(profile),
        ref_(ref),
        entity_(entity) {}

  Result<std::optional<ProjectionState>> SnapshotBefore(const FoldKey& key) override {
    std::optional<ProjectionState> best;
    // Stored snapshots after stale_after were invalidated by this batch.
    const FoldKey& bound =
        entity_->stale_after && *entity_->stale_after < key ? *entity_->stale_after : key;
    // Without a stored snapshot nothing is sought: a seek that finds none
    // steps over every deleted key after the entity's place, which a
    // dropped and rebuilt generation can hold by the million.
    if (entity_->stored_snapshots) {
      const std::string prefix = SnapshotPrefix(gens_.projections, ref_);
      std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
      it->Seek(SnapshotKey(gens_.projections, ref_, bound));
      it->Valid() ? it->Prev() : it->SeekToLast();
      if (it->Valid() && it->key().starts_with(prefix)) {
        Result<ProjectionState> s = DecodeProjection(View(it->key()), View(it->value()));
        if (!s.ok()) return s.status();
        best = std::move(*s);
        best->projection.entity = ref_.entity;
        best->projection.id = ref_.id;
      }
      if (!it->status().ok()) return FromLevelDb(it->status(), "reading snapshots");
    }
    auto staged = entity_->snapshots.lower_bound(key);
    if (staged != entity_->snapshots.begin()) {
      --staged;
      if (!best || best->last < staged->first) best = staged->second;
    }
    return best;
  }

  Status EventsAfter(const FoldKey* after, std::vector<RankedEvent>* out) override {
    const size_t first = out->size();
    const std::string prefix = LogPrefix(gens_.logs, ref_);
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    const std::string start = after ? LogKey(gens_.logs, ref_, *after) : prefix;
    for (it->Seek(start); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (after && View(it->key()) == start) continue;
      Result<LogEntry> e = DecodeLog(View(it->key()), View(it->value()), profile_);
      if (!e.ok()) return e.status();
      if (hide_from_ && e->seq >= *hide_from_) continue;
      Status st = LoadLogData(db_, leveldb::ReadOptions(), profile_, &*e);
      if (!st.ok()) return st;
      out->push_back(std::move(e->ranked));
    }
    if (!it->status().ok()) return FromLevelDb(it->status(), "reading entity log");
    // The stored ones come in key (fold) order; the few staged ones are
    // sorted on their own and merged in.
    const std::ptrdiff_t stored = out->end() - out->begin();
    for (const RankedEvent& e : entity_->staged) {
      if (after && !(*after < KeyOf(e.event, e.rank))) continue;
      out->push_back(e);
      if (Status st = CompleteData(&out->back()); !st.ok()) return st;
    }
    const auto middle = out->begin() + stored;
    std::sort(middle, out->end(), FoldsBefore);
    std::inplace_merge(out->begin() + static_cast<std::ptrdiff_t>(first), middle, out->end(),
                       FoldsBefore);
    return Status::OK();
  }

 private:
  leveldb::DB* db_;
  Generations gens_;
  std::optional<uint64_t> hide_from_;
  const Profile& profile_;
  const EntityRef& ref_;
  EntityState* entity_;
};

Result<std::optional<DedupEntry>> IngestTxn::FindDedup(const std::string& event_id,
                                                       const std::optional<AbsentDedup>& absent) {
  if (auto it = dedup_.find(event_id); it != dedup_.end()) return {it->second};
  if (absent && absent->event_id == event_id &&
      store_->locks_.Releases(absent->stripe) == absent->releases) {
    return std::optional<DedupEntry>();
  }
  // Under the event id's stripe: a write of its entry by another ingest
  // is in the filter by now (store/key_filters.cc).
  if (use_key_filters_ && !store_->MayHoldDedup(event_id)) return std::optional<DedupEntry>();
  std::string value;
  const std::string key = DedupKey(event_id);
  leveldb::Status s = store_->db_->Get(leveldb::ReadOptions(), key, &value);
  if (s.IsNotFound()) return std::optional<DedupEntry>();
  if (!s.ok()) return FromLevelDb(s, "reading dedup entry");
  Result<DedupEntry> d = DecodeDedup(key, value);
  if (!d.ok()) return d.status();
  return std::optional<DedupEntry>(std::move(*d));
}

Result<StoredEvent> IngestTxn::ReadStored(uint64_t seq, bool identity) {
  std::string value;
  const std::string key = EventKey(seq);
  leveldb::Status s = store_->db_->Get(leveldb::ReadOptions(), key, &value);
  if (!s.ok()) return FromLevelDb(s, "reading the stored event of a dedup entry");
  return identity ? DecodeStoredEvent(key, value) : DecodeStoredBody(key, value);
}

Status IngestTxn::LoadIdentity(DedupEntry* d) {
  if (d->has_identity) return Status::OK();
  Result<StoredEvent> stored = ReadStored(d->seq, /*identity=*/true);
  if (!stored.ok()) return stored.status();
  d->type = std::move(stored->event.type);
  d->occurred_at = stored->event.occurred_at;
  d->has_identity = true;
  return Status::OK();
}

Result<std::optional<EntityRef>> IngestTxn::CurrentRoute(const DedupEntry& d) {
  // A tombstone's event is gone: it answers with the entity it was compacted in.
  if (d.routing_epoch == routing_epoch_ || d.expires_at != 0) return d.entity;
  // Written under an older profile: route the stored body again.
  Result<StoredEvent> stored = ReadStored(d.seq, /*identity=*/false);
  if (!stored.ok()) return stored.status();
  Result<DecodedEvent> decoded = DecodeEvent(stored->body, *profile_);
  if (!decoded.ok()) return std::optional<EntityRef>();
  return decoded->entity;
}

Result<IngestTxn::EntityState*> IngestTxn::LoadEntity(const EntityRef& ref) {
  auto it = entities_.find(ref);
  if (it != entities_.end()) return &it->second;
  EntityState loaded;
  loaded.key = ProjectionKey(gens_.projections, ref);
  // Read only a key that may be stored: under the entity's stripe, as
  // FindDedup's filter.
  if (!use_key_filters_ || store_->MayHoldProjection(gens_.projections, loaded.key)) {
    std::string value;
    leveldb::Status s = store_->db_->Get(leveldb::ReadOptions(), loaded.key, &value);
    if (s.ok()) {
      Result<ProjectionState> p = DecodeProjection(loaded.key, value);
      if (!p.ok()) return p.status();
      loaded.state = std::move(*p);
      loaded.before_state = loaded.state.projection.state;
      loaded.stored_snapshots = loaded.state.snapshots != ProjectionState::Snapshots::kNone;
    } else if (!s.IsNotFound()) {
      return FromLevelDb(s, "reading projection");
    }
  }
  return &entities_.emplace(ref, std::move(loaded)).first->second;
}

IngestTxn::IngestTxn(StoreImpl* store, const Generations& gens, uint32_t routing_epoch,
                     const Profile* profile, bool record_changes)
    : store_(store),
      gens_(gens),
      routing_epoch_(routing_epoch),
      profile_(profile),
      record_changes_(record_changes),
      batch_(store->batch_pool_.Take()) {}

IngestTxn::~IngestTxn() { store_->batch_pool_.Give(std::move(batch_)); }

Status IngestTxn::Stage(DecodedEvent&& decoded, const Delivery& delivery,
                        std::string_view body_digest, const std::optional<AbsentDedup>& absent,
                        IngestResult* result) {
  const Event& ev = decoded.event;
  const std::optional<EntityRef>& ref = decoded.entity;
  const int64_t now = delivery.received_at > 0 ? delivery.received_at : store_->clock_->NowMicros();

  // The body's SHA-256: the caller's, or computed once here.
  const std::string computed = body_digest.empty() ? Sha256(delivery.body) : std::string();
  const std::string_view digest = body_digest.empty() ? computed : body_digest;

  Result<std::optional<DedupEntry>> existing = FindDedup(ev.event_id, absent);
  if (!existing.ok()) return existing.status();
  if (*existing) {
    DedupEntry& first = **existing;
    // The same bytes are the same event, routed the same under one profile.
    if (DigestMatches(first.body_digest, digest)) {
      result->outcome = Outcome::kDuplicate;
      return Status::OK();
    }
    if (Status st = LoadIdentity(&first); !st.ok()) return st;
    bool same = first.type == ev.type && first.occurred_at == ev.occurred_at;
    if (same) {
      Result<std::optional<EntityRef>> route = CurrentRoute(first);
      if (!route.ok()) return route.status();
      same = *route == ref;
    }
    if (same) {
      result->outcome = Outcome::kDuplicate;
      return Status::OK();
    }
    ConflictEntry c;
    c.event_id = ev.event_id;
    c.first_seq = first.seq;
    c.type = ev.type;
    c.occurred_at = ev.occurred_at;
    c.entity = ref;
    c.received_at = now;
    c.reason = ev.event_id + " is already stored with " +
               Describe(first.type, first.occurred_at, first.entity) + "; this delivery has " +
               Describe(ev.type, ev.occurred_at, ref);
    c.body = delivery.body;
    highest_seq_ = store_->next_seq_.fetch_add(1);
    batch_->Put(ConflictKey(highest_seq_), EncodeConflict(c));
    result->outcome = Outcome::kConflict;
    result->message = "event_id: " + c.reason + " (the first one wins)";
    return Status::OK();
  }

  const uint64_t seq = store_->next_seq_.fetch_add(1);
  highest_seq_ = seq;
  // The record is the arrival time and the body: the rest is the body's.
  batch_->Put(EventKey(seq), EncodeEventRecord(now, delivery.body));

  DedupEntry dedup{seq,
                   ev.type,
                   ev.occurred_at,
                   ref,
                   routing_epoch_,
                   /*expires_at=*/0,
                   std::string(digest)};
  batch_->Put(DedupKey(ev.event_id), EncodeDedup(dedup));
  dedup_.emplace(ev.event_id, std::move(dedup));
  result->outcome = Outcome::kAccepted;

  if (!ref) {
    MarkUnrouted(seq);
    return Status::OK();
  }
  // Without its data, the event is read from the body for a snapshot or a
  // re-fold, and the body lives as long as this transaction.
  const std::string_view data_from = decoded.without_data ? delivery.body : std::string_view();
  return Project(*ref, RankedEvent{std::move(decoded.event), decoded.rank, data_from}, seq);
}

Status IngestTxn::Project(const EntityRef& ref, RankedEvent ranked, uint64_t seq) {
  if (!logs_hold_from_) {
    const FoldKey key = KeyOf(ranked.event, ranked.rank);
    batch_->Put(LogKey(gens_.logs, ref, key), EncodeLeanLog(seq));
  }

  Result<EntityState*> entity = LoadEntity(ref);
  if (!entity.ok()) return entity.status();
  EntityState& e = **entity;
  OverlayView view(store_->db_.get(), gens_, logs_hold_from_, *profile_, ref, &e);
  const EntityType& type = *profile_->FindEntity(ref.entity);
  Result<Materialized> m =
      Materialize(type, ref, ranked, view, store_->options_.snapshot_interval, &e.state);
  if (!m.ok()) return m.status();
  if (m->stale_after) {
    ++late_;
    refolded_ += m->events_folded;
    e.snapshots.erase(e.snapshots.upper_bound(*m->stale_after), e.snapshots.end());
    if (!e.stale_after || *m->stale_after < *e.stale_after) e.stale_after = m->stale_after;
  }
  for (ProjectionState& s : m->snapshots) {
    FoldKey at = s.last;
    e.snapshots.insert_or_assign(std::move(at), std::move(s));
  }
  e.staged.push_back(std::move(ranked));
  return Status::OK();
}

void IngestTxn::MarkUnrouted(uint64_t seq) {
  if (!logs_hold_from_) batch_->Put(UnroutedKey(gens_.logs, seq), "");
  ++unrouted_;
}

Status IngestTxn::Commit(bool sync) {
  const uint32_t gen = gens_.projections;
  std::vector<Change> changes;
  const int64_t now = store_->clock_->NowMicros();
  for (const auto& [ref, e] : entities_) {
    if (e.staged.empty()) continue;
    // Every staged event changes its projection: it is applied (applied
    // grows) or rejected (it joins the rejections).
    if (record_changes_) {
      Change c;
      c.entity = ref.entity;
      c.id = ref.id;
      c.state = e.state.projection.state;
      c.previous_state = e.before_state.empty() ? std::string(kInitialState) : e.before_state;
      for (const RankedEvent& r : e.staged) c.event_ids.push_back(r.event.event_id);
      c.changed_at = now;
      changes.push_back(std::move(c));
    }
    if (e.stale_after) {
      // Drop stored snapshots past the earliest late event of this batch.
      const std::string prefix = SnapshotPrefix(gen, ref);
      const std::string from = SnapshotKey(gen, ref, *e.stale_after);
      std::unique_ptr<leveldb::Iterator> it(store_->db_->NewIterator(leveldb::ReadOptions()));
      for (it->Seek(from); it->Valid() && it->key().starts_with(prefix); it->Next()) {
        if (View(it->key()) != from) batch_->Delete(it->key());
      }
      if (!it->status().ok()) return FromLevelDb(it->status(), "reading snapshots");
    }
    for (const auto& [at, snapshot] : e.snapshots) {
      batch_->Put(SnapshotKey(gen, ref, at), EncodeProjection(snapshot));
    }
    // The cursor only: a read folds the fields (storage/projection_read.h).
    batch_->Put(e.key, EncodeProjectionCursor(e.state));
  }
  if (batch_->ApproximateSize() <= kEmptyBatchBytes) return Status::OK();  // all duplicates
  return store_->commit_queue_->Commit(batch_.get(), &changes, sync);
}

}  // namespace eventfold::storage
