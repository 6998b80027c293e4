// Compacted entities in a rebuild: an entity whose events retention dropped
// (store/retention.cc) keeps its fold in an r/ record; every generation
// starts the entity from it. Its projection is that snapshot followed by the
// events still in its log (those that arrived after the compaction), in fold
// order — the same rule the materializer follows at ingest, where the
// snapshot sits at CompactionPoint(), before every event's position.

#ifndef EVENTFOLD_REPLAY_COMPACTION_H_
#define EVENTFOLD_REPLAY_COMPACTION_H_

#include <leveldb/db.h>

#include <cstdint>

#include "eventfold/profile.h"
#include "eventfold/status.h"
#include "eventfold/store.h"
#include "storage/key_codec.h"

namespace eventfold {

// Run after the logs of `gens` are folded into its projection generation
// (which folded a compacted entity's remaining events from none): re-folds
// each compacted entity of `snapshot` (the live store when null) from its
// compaction snapshot and fixes `sum` to match. kInvalidArgument when `profile` lacks a compacted
// entity's type: its events are gone and cannot be routed anew.
Status SeedCompacted(leveldb::DB* db, const leveldb::Snapshot* snapshot, const Profile& profile,
                     const storage::Generations& gens, uint64_t snapshot_interval,
                     RebuildSummary* sum);

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_COMPACTION_H_
