// Options: how a store is opened. A plain struct; every default is the safe one.
//
// The world is injected here: the Clock every timestamp comes from and the
// leveldb::Env every file operation goes through, so tests can drive time and
// disk faults deterministically. Neither is owned by the store; both must
// outlive it. leveldb::Env is only forward-declared: embedding code that does
// not inject one never needs LevelDB's headers.

#ifndef EVENTFOLD_OPTIONS_H_
#define EVENTFOLD_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "eventfold/clock.h"
#include "eventfold/profile.h"

namespace leveldb {
class Env;
}

namespace eventfold {

enum class Durability {
  // Every ingest returns only after its write is synced to disk: an accepted
  // event survives a power cut. Concurrent ingests share syncs.
  kSync,
  // Writes reach the OS but are not synced: an accepted event survives a
  // process crash, not a power cut. Several times faster.
  kBuffered,
};

struct Options {
  // Create the store when the directory holds none.
  bool create_if_missing = true;

  // Fail when a store already exists at the path.
  bool error_if_exists = false;

  // See Durability. Default: an accepted event is on disk.
  Durability durability = Durability::kSync;

  // The profile a new store is created with; default the built-in
  // "receiptroller". An existing store keeps the profile it records; when
  // this one differs, Store::Stats() reports the projections as stale until
  // Store::Rebuild with this profile switches the store to it.
  std::optional<Profile> profile;

  // Bodies larger than this are refused (413) before any parsing.
  size_t max_body_bytes = 1 << 20;

  // Events between an entity's fold snapshots: a late event re-folds at
  // most about this many events, however long the entity's log. 0: none.
  uint64_t snapshot_interval = 1000;

  // Refused deliveries kept for operators; the oldest go first.
  size_t quarantine_max_entries = 10000;

  // Source of time; nullptr means SystemClock().
  Clock* clock = nullptr;

  // LevelDB environment for all file I/O; nullptr means LevelDB's default.
  leveldb::Env* env = nullptr;

  // LevelDB block cache for reads of logs and projections.
  size_t block_cache_bytes = 32 << 20;

  // LevelDB memtable size; larger absorbs bursts with fewer compactions.
  size_t write_buffer_bytes = 16 << 20;
};

}  // namespace eventfold

#endif  // EVENTFOLD_OPTIONS_H_
