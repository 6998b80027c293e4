// Rebuild: derives one projection generation from the stored events.
//
// Streams through the store with bounded memory (per worker thread, one
// entity's log at a time):
// 1. routes every stored event (a/) under `profile` into the generation's
//    per-entity logs (keyed in fold order), the seq range split across the
//    worker threads;
// 2. folds each entity's log into its projection, keeping a fold snapshot
//    every `snapshot_interval` events, the log key range split across the
//    workers at entity boundaries (chosen from keys sampled in step 1).
// It writes only under g/<gen>/, in bounded unsynced batches; the caller
// makes the switch to the new generation durable. It reads the events of
// `snapshot` (the live store when null), so ingest may go on meanwhile.

#ifndef EVENTFOLD_REPLAY_REBUILD_H_
#define EVENTFOLD_REPLAY_REBUILD_H_

#include <cstdint>
#include <functional>

#include <leveldb/db.h>

#include "eventfold/profile.h"
#include "eventfold/status.h"
#include "eventfold/store.h"

namespace eventfold {

struct RebuildTarget {
  uint32_t gen = 1;
  uint64_t snapshot_interval = 1000;
  int threads = 1;
  std::function<void(const RebuildProgress&)> progress;  // about once a second
};

Result<RebuildSummary> BuildGeneration(leveldb::DB* db, const leveldb::Snapshot* snapshot,
                                       const Profile& profile, const RebuildTarget& target);

// Deletes every key of generation `gen` (a dropped or abandoned one).
Status DropGeneration(leveldb::DB* db, uint32_t gen);

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_REBUILD_H_
