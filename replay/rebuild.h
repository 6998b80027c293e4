// Rebuild: re-derives every log index and projection from the stored events.
//
// Streams through the store (bounded memory: one entity's log at a time):
// 1. drops every log entry and projection;
// 2. re-routes every stored event (a/) under `profile`, writing its log entry
//    and refreshing its dedup entry's identity;
// 3. folds each entity's log, in key order, into its projection.
// Writes go in bounded batches without sync; the caller makes the end durable.
// The caller must keep ingests out while it runs.

#ifndef EVENTFOLD_REPLAY_REBUILD_H_
#define EVENTFOLD_REPLAY_REBUILD_H_

#include <leveldb/db.h>

#include "eventfold/profile.h"
#include "eventfold/store.h"

namespace eventfold {

Result<RebuildSummary> RebuildProjections(leveldb::DB* db, const Profile& profile);

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_REBUILD_H_
