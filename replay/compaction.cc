#include "replay/compaction.h"

#include <memory>

#include <leveldb/write_batch.h>

#include "replay/materializer.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/record_codec.h"

namespace eventfold {
namespace {

using storage::FromLevelDb;

std::string_view View(const leveldb::Slice& s) { return {s.data(), s.size()}; }

// One compacted entity: its snapshot, then what its log holds in `gen`.
Status Seed(leveldb::DB* db, const EntityType& type, const EntityRef& ref,
            storage::ProjectionState state, uint32_t gen, uint64_t interval,
            RebuildSummary* sum) {
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));
  leveldb::WriteBatch batch;
  std::vector<RankedEvent> events;
  const std::string log = storage::LogPrefix(gen, ref);
  for (it->Seek(log); it->Valid() && it->key().starts_with(log); it->Next()) {
    Result<storage::LogEntry> e = storage::DecodeLog(View(it->key()), View(it->value()));
    if (!e.ok()) return e.status();
    events.push_back(std::move(e->ranked));
  }
  // The log's fold from none, written by the fold step, is replaced.
  const std::string snaps = storage::SnapshotPrefix(gen, ref);
  for (it->Seek(snaps); it->Valid() && it->key().starts_with(snaps); it->Next()) {
    batch.Delete(it->key());
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "seeding a compacted entity");
  const std::string pkey = storage::ProjectionKey(gen, ref);
  std::string value;
  leveldb::Status s = db->Get(ro, pkey, &value);
  if (s.ok()) {
    Result<storage::ProjectionState> from_none = storage::DecodeProjection(pkey, value);
    if (!from_none.ok()) return from_none.status();
    sum->applied -= from_none->projection.applied;
    sum->rejected -= from_none->projection.rejected.size();
  } else if (s.IsNotFound()) {
    ++sum->entities;
  } else {
    return FromLevelDb(s, "seeding a compacted entity");
  }
  batch.Put(storage::SnapshotKey(gen, ref, storage::CompactionPoint()),
            storage::EncodeProjection(state));
  std::vector<storage::ProjectionState> snapshots;
  FoldOnto(type, ref, events, interval, &state, &snapshots);
  for (const storage::ProjectionState& snap : snapshots) {
    batch.Put(storage::SnapshotKey(gen, ref, snap.last), storage::EncodeProjection(snap));
  }
  batch.Put(pkey, storage::EncodeProjection(state));
  sum->applied += state.projection.applied;
  sum->rejected += state.projection.rejected.size();
  return FromLevelDb(db->Write(leveldb::WriteOptions(), &batch), "seeding a compacted entity");
}

}  // namespace

Status SeedCompacted(leveldb::DB* db, const leveldb::Snapshot* snapshot, const Profile& profile,
                     uint32_t gen, uint64_t snapshot_interval, RebuildSummary* sum) {
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  ro.snapshot = snapshot;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));
  const leveldb::Slice prefix(storage::kCompactionPrefix.data(),
                              storage::kCompactionPrefix.size());
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<storage::CompactionEntry> c =
        storage::DecodeCompaction(View(it->key()), View(it->value()));
    if (!c.ok()) return c.status();
    const EntityRef ref{c->snapshot.projection.entity, c->snapshot.projection.id};
    const EntityType* type = profile.FindEntity(ref.entity);
    if (!type) {
      return Status::InvalidArgument("compacted entity " + ref.entity + "/" + ref.id +
                                     ": the profile has no such entity type, and its "
                                     "compacted events cannot be routed anew");
    }
    Status st = Seed(db, *type, ref, std::move(c->snapshot), gen, snapshot_interval, sum);
    if (!st.ok()) return st;
  }
  return FromLevelDb(it->status(), "reading compaction records");
}

}  // namespace eventfold
