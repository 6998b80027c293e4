#include "replay/compaction.h"

#include <leveldb/write_batch.h>

#include <memory>

#include "core/materializer.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/log_data.h"
#include "storage/record_codec.h"

namespace eventfold {
namespace {

using storage::FromLevelDb;
using storage::View;

constexpr size_t kBatchBytes = 4 << 20;

// One compacted entity: its snapshot, then what its log holds in `gens`.
// `it` reads the live database, `logs` the logs the build folded; `batch`
// collects the writes.
Status Seed(leveldb::DB* db, leveldb::Iterator* it, leveldb::Iterator* logs, const Profile& profile,
            const EntityType& type, const EntityRef& ref, storage::ProjectionState state,
            const storage::Generations& gens, uint64_t interval, leveldb::WriteBatch* batch,
            RebuildSummary* sum) {
  std::vector<RankedEvent> events;
  const std::string log = storage::LogPrefix(gens.logs, ref);
  for (logs->Seek(log); logs->Valid() && logs->key().starts_with(log); logs->Next()) {
    Result<storage::LogEntry> e =
        storage::DecodeLog(View(logs->key()), View(logs->value()), profile);
    if (!e.ok()) return e.status();
    leveldb::ReadOptions ro;
    ro.fill_cache = false;
    Status st = storage::LoadLogData(db, ro, profile, &*e);
    if (!st.ok()) return st;
    events.push_back(std::move(e->ranked));
  }
  if (!logs->status().ok()) return FromLevelDb(logs->status(), "seeding a compacted entity");
  const std::string pkey = storage::ProjectionKey(gens.projections, ref);
  if (events.empty()) {
    ++sum->entities;  // the fold step did not see it
  } else {
    // The fold step folded the log from none: its projection and snapshots
    // are replaced.
    std::string value;
    leveldb::ReadOptions ro;
    ro.fill_cache = false;
    Status st = FromLevelDb(db->Get(ro, pkey, &value), "seeding a compacted entity");
    if (!st.ok()) return st;
    Result<storage::ProjectionState> from_none = storage::DecodeProjection(pkey, value);
    if (!from_none.ok()) return from_none.status();
    // Every folded event was applied or rejected (a cursor-only record
    // keeps no rejection list, only the counts).
    sum->applied -= from_none->projection.applied;
    sum->rejected -= from_none->events - from_none->projection.applied;
    const std::string snaps = storage::SnapshotPrefix(gens.projections, ref);
    for (it->Seek(snaps); it->Valid() && it->key().starts_with(snaps); it->Next()) {
      batch->Delete(it->key());
    }
    if (!it->status().ok()) return FromLevelDb(it->status(), "seeding a compacted entity");
  }
  state.snapshots = storage::ProjectionState::Snapshots::kSome;  // this one
  batch->Put(storage::SnapshotKey(gens.projections, ref, storage::CompactionPoint()),
             storage::EncodeProjection(state));
  std::vector<storage::ProjectionState> snapshots;
  if (Status st = FoldOnto(type, ref, events, interval, &state, &snapshots); !st.ok()) return st;
  for (const storage::ProjectionState& snap : snapshots) {
    batch->Put(storage::SnapshotKey(gens.projections, ref, snap.last),
               storage::EncodeProjection(snap));
  }
  batch->Put(pkey, storage::EncodeProjectionCursor(state));
  sum->applied += state.projection.applied;
  sum->rejected += state.projection.rejected.size();
  return Status::OK();
}

}  // namespace

Status SeedCompacted(leveldb::DB* db, const leveldb::Snapshot* snapshot, const Profile& profile,
                     const storage::Generations& gens, uint64_t snapshot_interval,
                     RebuildSummary* sum) {
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  // Renewed after each write: an iterator would step over every key written
  // after it was made, one by one, on each seek.
  std::unique_ptr<leveldb::Iterator> live(db->NewIterator(ro));
  leveldb::ReadOptions input = ro;
  input.snapshot = snapshot;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(input));
  // Logs the build wrote are not in its input snapshot; kept ones are, and
  // only as of it (ingest goes on adding to them, for the catch-up).
  const bool kept_logs = gens.logs != gens.projections;
  std::unique_ptr<leveldb::Iterator> kept(kept_logs ? db->NewIterator(input) : nullptr);
  leveldb::WriteBatch batch;
  const leveldb::Slice prefix(storage::kCompactionPrefix.data(), storage::kCompactionPrefix.size());
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
    Status st = Seed(db, live.get(), kept_logs ? kept.get() : live.get(), profile, *type, ref,
                     std::move(c->snapshot), gens, snapshot_interval, &batch, sum);
    if (!st.ok()) return st;
    if (batch.ApproximateSize() >= kBatchBytes) {
      st = FromLevelDb(db->Write(leveldb::WriteOptions(), &batch), "seeding compacted entities");
      if (!st.ok()) return st;
      batch.Clear();
      live.reset(db->NewIterator(ro));
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading compaction records");
  return FromLevelDb(db->Write(leveldb::WriteOptions(), &batch), "seeding compacted entities");
}

}  // namespace eventfold
