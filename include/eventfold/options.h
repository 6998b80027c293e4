// Options: how a store is opened. A plain struct; every default is the safe one.
//
// The world is injected here: the Clock every timestamp comes from and the
// leveldb::Env every file operation goes through, so tests can drive time and
// disk faults deterministically. Neither is owned by the store; both must
// outlive it. leveldb::Env is only forward-declared: embedding code that does
// not inject one never needs LevelDB's headers.
//
// Thread-safety: a plain value; Store::Open copies what it keeps.

#ifndef EVENTFOLD_OPTIONS_H_
#define EVENTFOLD_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
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

// What a gc pass (Maintenance::Gc, `eventfold gc`, the background pass) does; see
// docs/RETENTION.md for what it keeps and drops.
struct GcOptions {
  // Change records kept below the lowest subscription checkpoint.
  uint64_t feed_grace = 0;

  // Event retention, opt-in: an entity in a terminal state (one no
  // transition of the profile leaves) whose newest event arrived at least
  // this long ago (on the store's Clock) is compacted: its events are
  // folded into a snapshot and dropped. 0: never.
  int64_t compact_after_micros = 0;

  // How long a compacted event's dedup tombstone is kept, so a resend still
  // answers duplicate (or conflict). At least kMinTombstoneMicros, at most
  // kMaxTombstoneMicros (a thousand years: a longer time is a mistake, and
  // far longer ones would overflow the expiry time).
  int64_t tombstone_micros = 35LL * 24 * 3600 * 1'000'000;
  static constexpr int64_t kMinTombstoneMicros = 35LL * 24 * 3600 * 1'000'000;
  static constexpr int64_t kMaxTombstoneMicros = 365'000LL * 24 * 3600 * 1'000'000;

  // Compact all of LevelDB afterwards so the space comes back at once
  // (slow on a big store); otherwise LevelDB reclaims it in its own time.
  bool compact_storage = false;
};

struct Options {
  // Create the store when the directory holds none.
  bool create_if_missing = true;

  // Fail when a store already exists at the path.
  bool error_if_exists = false;

  // A store in an older on-disk format this build can upgrade: when true,
  // Open upgrades it in place (crash-safe: one synced write); when false
  // (default), Open refuses with InvalidArgument naming the command that
  // upgrades it (`eventfold migrate --data DIR`). Never read as it is.
  bool upgrade_format = false;

  // Called during such an upgrade with the number of keys rewritten so far
  // (an upgrade to format 8 rewrites every key under g/, about two an
  // event), after each batch of about 1 MiB and once at the end; may be
  // empty. Called on the thread that calls Open.
  std::function<void(uint64_t keys_rewritten)> upgrade_progress;

  // See Durability. Default: an accepted event is on disk.
  Durability durability = Durability::kSync;

  // The profile a new store is created with; default the built-in
  // "receiptroller". An existing store keeps the profile it records; when
  // this one differs, Store::Stats() reports the projections as stale until
  // Maintenance::Rebuild with this profile switches the store to it.
  std::optional<Profile> profile;

  // Bodies larger than this are refused (413) before any parsing.
  size_t max_body_bytes = 1 << 20;

  // Events between an entity's fold snapshots: a late event re-folds at
  // most about this many events, however long the entity's log, and so does
  // a read of the projection (its record is the fold's cursor since format
  // 4; Get folds its fields from the nearest snapshot). 0: none, and a read
  // folds the whole log. A re-folded event reads and decodes its body
  // (a/<seq>: logs carry no data since format 2), so each costs a random
  // read: 128 keeps a late arrival near a millisecond, for one snapshot
  // (about a projection's bytes) per 128 events of an entity.
  uint64_t snapshot_interval = 128;

  // Bodies of the most recently accepted events remembered in memory (a
  // keyed hash, the event id and the entity, 96 bytes each: 24 MiB when
  // full, taken as it fills), so that a redelivery of the same bytes, a
  // sender's retry, is answered as a duplicate without a database read. A
  // redelivery of an older event reads its dedup entry instead and is
  // remembered again. Events whose event id and entity id together pass 64
  // bytes are not remembered. 0: remember none.
  size_t recent_events = 1 << 18;

  // Memory for each of two filters of stored keys, which tell a new event
  // from a stored one and an entity's first event from a later one without
  // reading the database (about 1.25 bytes per key they have room for,
  // sized at twice the keys there may be and grown as the store grows;
  // built in the background from the first ingest after Open). Every read
  // they save also saves LevelDB compaction work. Past this size a filter
  // stops growing and saves fewer reads as the store grows. 0: no filters;
  // every new event reads its dedup entry and its entity's projection.
  size_t key_filter_max_bytes = 64 << 20;

  // Refused deliveries kept for operators; the oldest go first when either
  // cap is reached. 0 in either: keep none.
  size_t quarantine_max_entries = 10000;
  // Bytes the quarantine's records may take (keys and values, before
  // LevelDB's compression). An entry is at most about 6 KiB (a 1 KiB body
  // prefix, 16 headers of 256 bytes, the reason), so the default keeps the
  // newest few thousand refusals and bounds what an unauthenticated flood
  // can make the store hold.
  size_t quarantine_max_bytes = 16 << 20;
  // Refused deliveries quarantined per second of the store's Clock; more in
  // the same second are dropped (counted in Counters::quarantine_dropped).
  // 0: no limit.
  size_t quarantine_max_per_second = 200;

  // Source of time; nullptr means SystemClock().
  Clock* clock = nullptr;

  // LevelDB environment for all file I/O; nullptr means LevelDB's default.
  // leveldb::Env has no directory sync: the store makes the POSIX call
  // (open, fsync) on the same path, and skips a directory the file system
  // does not have (an in-memory Env's).
  // With the default, a store directory is locked at most once in the
  // process, whatever its spelling (a second open is kBusy and leaves the
  // first one's lock held); an Env of your own that wraps the default one
  // gets LevelDB's check alone, which compares names and, refusing, drops
  // the process's lock on the directory (POSIX fcntl locks).
  leveldb::Env* env = nullptr;

  // LevelDB block cache for reads of logs and projections.
  size_t block_cache_bytes = 32 << 20;

  // LevelDB memtable size; larger absorbs bursts with fewer compactions.
  size_t write_buffer_bytes = 16 << 20;

  // LevelDB's paranoid checks (default on): compactions verify every block
  // they read, and opening refuses a damaged log record instead of skipping
  // it; on damage the store stops writing (503, the sender retries) rather
  // than rewriting the damage into new tables or dropping records silently.
  // Costs up to ~10% of kBuffered ingest throughput (docs/RELIABILITY.md). Turning
  // it off only makes sense for a store that `eventfold repair` salvages.
  bool paranoid_checks = true;

  // Background gc: a store-owned thread runs Maintenance::Gc(gc) every this many
  // microseconds on `clock` (the first pass one interval after Open), and
  // stops when the store closes. 0 (default): no background pass; e.g.
  // 3'600'000'000 for hourly.
  int64_t gc_interval_micros = 0;
  // What each background pass does (GcOptions above); by default it
  // compacts no entity (event retention is opt-in).
  GcOptions gc;
};

}  // namespace eventfold

#endif  // EVENTFOLD_OPTIONS_H_
