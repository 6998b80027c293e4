// Rebuild: derives one projection generation from the stored events.
//
// Streams through the store with bounded memory (a fixed sort budget, not
// proportional to the store or to any entity's length):
// 1. routes every stored event (a/) under `profile` into log entries keyed
//    in fold order, the seq range split across the worker threads; each
//    worker sorts its entries in memory-bounded runs, spilled to
//    `scratch_path` (see replay/run_file.h); the events it cannot route go
//    into the generation's index of unrouted events (g/<gen>/u/<seq>);
// 2. merges the runs and writes the per-entity logs in key order, folding
//    each entity as its events stream past into its projection and a fold
//    snapshot every `snapshot_interval` events, which are written after the
//    logs, each family in key order: LevelDB gets ascending keys only and
//    does not have to rewrite them by compaction.
// Under the profile the live logs were routed under, both steps' writes of
// logs are left out (RebuildTarget::logs_from): those logs are exactly what
// routing would give, so the build reads them in key order and folds each
// entity as it passes, writing projections and snapshots only; the new
// projection generation shares the logs (storage/key_codec.h, format 5). The
// fold then needs no event data except where a snapshot is due, which it
// reads from a/<seq>.
// It writes only under g/<gen>/, in bounded unsynced batches; the caller
// makes the switch to the new generation durable. It reads the events of
// `snapshot` (the live store when null), so ingest may go on meanwhile.

#ifndef EVENTFOLD_REPLAY_REBUILD_H_
#define EVENTFOLD_REPLAY_REBUILD_H_

#include <leveldb/db.h>
#include <leveldb/env.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "eventfold/clock.h"
#include "eventfold/profile.h"
#include "eventfold/status.h"
#include "eventfold/store.h"
#include "storage/key_codec.h"

namespace eventfold {

struct RebuildTarget {
  uint32_t gen = 1;
  uint64_t snapshot_interval = 1000;
  int threads = 1;
  std::function<void(const RebuildProgress&)> progress;  // about once a second
  // Times `progress` (its ticks and RebuildProgress::seconds) and the
  // summary's seconds; nullptr: the SystemClock().
  Clock* clock = nullptr;
  // A directory for the external sort's run files (up to the size of the
  // routed logs), created and removed by the build; in `env` (null: the
  // default Env).
  std::string scratch_path;
  leveldb::Env* env = nullptr;
  // What the sorted runs may hold in memory, all workers together.
  size_t sort_budget_bytes = 64 << 20;
  // The log generation of the same database whose logs and index of
  // unrouted events (complete) were routed under `profile`: the build folds
  // those logs as they are and writes no logs of its own. nullopt: route
  // every stored event anew into logs under `gen`. The caller vouches for
  // both conditions; folding carries over whatever damage the logs have, so
  // a repair routes anew.
  std::optional<uint32_t> logs_from;
};

Result<RebuildSummary> BuildGeneration(leveldb::DB* db, const leveldb::Snapshot* snapshot,
                                       const Profile& profile, const RebuildTarget& target);

// Deletes every key of generation `gen` (a dropped or abandoned one).
Status DropGeneration(leveldb::DB* db, uint32_t gen);

// Deletes the keys of generation `gen` that are not live under `live`
// (storage::IsLiveFamily): all of them when `gen` is neither live
// generation, else the families the other generation holds (the logs of an
// old projection generation, the projections of the shared log one).
Status DropDeadFamilies(leveldb::DB* db, uint32_t gen, const storage::Generations& live);

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_REBUILD_H_
