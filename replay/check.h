// Check: the integrity check of a whole store (`eventfold check`,
// Store::Check), record by record, over one consistent snapshot.
//
// 1. Every key of every family parses by the key grammar (storage/key_codec.h)
//    and every value decodes: masked CRC-32C, then FlatBuffers verification
//    (LevelDB's block checksums are verified on the way too).
// 2. Events and dedup entries are one-to-one: each a/<seq> has d/<event_id>
//    naming that seq with the same identity, so no event is stored twice,
//    and each d/ points at an existing a/ record of its event id. Conflict
//    records point at the stored event that won.
// 3. Logs (live log generation): each entry's fold key matches its record, its
//    event exists in a/ and routes to that entity under the store's profile;
//    conversely each stored event that routes somewhere is in that log.
// 4. Each projection equals the fold of its own log (and each fold snapshot
//    the fold up to its position); no log lacks a projection and no
//    projection lacks a log. Then Verify: the projections equal a rebuild
//    from the stored events made aside (replay/verify.h). A compacted
//    entity (r/) folds from its compaction snapshot, and its dedup
//    tombstones stand in for its dropped events (docs/RETENTION.md).
// 5. The change feed has no gap (from its retention point to its newest
//    change) and holds every change the store has numbered.
// 6. Only the live generations' families exist (besides a generation a
//    running rebuild builds): logs and the unrouted index of the log
//    generation, projections and snapshots of the projection generation.
//
// Memory stays bounded: one entity's fold at a time, point lookups for the
// cross references. Reads only; Verify's scratch store is removed afterwards.

#ifndef EVENTFOLD_REPLAY_CHECK_H_
#define EVENTFOLD_REPLAY_CHECK_H_

#include <leveldb/db.h>
#include <leveldb/env.h>

#include <cstdint>
#include <string>

#include "eventfold/clock.h"
#include "eventfold/profile.h"
#include "eventfold/store.h"
#include "storage/key_codec.h"

namespace eventfold {

struct CheckOptions {
  const Profile* profile = nullptr;  // the live generation's profile
  storage::Generations live;
  const leveldb::Snapshot* snapshot = nullptr;  // what to check (nullptr: now)
  // Changes numbered before the snapshot was taken: the feed must reach it.
  uint64_t last_change_seq = 0;
  // A rebuild may be running: keys of other generations are not problems.
  bool rebuild_running = false;
  // Verify's scratch store (must hold nothing worth keeping), its Env, and
  // the store's snapshot interval; an empty scratch_path skips Verify.
  std::string scratch_path;
  leveldb::Env* env = nullptr;
  uint64_t snapshot_interval = 1000;
  Clock* clock = nullptr;  // times CheckSummary::seconds; nullptr: SystemClock()
};

// Runs the check, calling `on_problem` for each problem found. An error
// Status only when the check could not run (e.g. a read failed).
Result<CheckSummary> CheckStore(leveldb::DB* db, const CheckOptions& options,
                                const CheckProblemFn& on_problem);

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_CHECK_H_
