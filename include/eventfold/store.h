// Store: an embedded, durable event store for one webhook receiver.
//
// Ingest takes deliveries exactly as they arrive — duplicated, late, out of
// order — dedups them by event_id (exactly and permanently), appends each to
// its entity's log, and keeps that entity's projection current in the same
// atomic write, so a log and its projection never disagree. Reads see every
// write that returned (read-your-writes).
//
// Reads follow one style: a point read returns Result<T> (kNotFound when
// absent); a scan calls `fn` with each item in key order until `fn` returns
// false. Rebuilds, checks and retention are on maintenance(), the change
// feed and subscription state on feed(), refused deliveries on quarantine().
//
// Thread-safety: a Store is safe to use from any number of threads. Ingests
// touching the same entity or event_id serialize; others run in parallel and
// share disk syncs. A store directory may be open in one Store at a time
// (LevelDB's file lock); one process may hold many stores at different paths.

#ifndef EVENTFOLD_STORE_H_
#define EVENTFOLD_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/change_feed.h"
#include "eventfold/feed.h"
#include "eventfold/ingest.h"
#include "eventfold/maintenance.h"
#include "eventfold/options.h"
#include "eventfold/profile.h"
#include "eventfold/projection.h"
#include "eventfold/quarantine.h"
#include "eventfold/status.h"

namespace eventfold {

// Outcome counts since the store was opened.
struct Counters {
  uint64_t accepted = 0;
  uint64_t duplicate = 0;
  uint64_t conflict = 0;
  uint64_t invalid = 0;
  uint64_t too_large = 0;
  uint64_t storage_error = 0;
  uint64_t unrouted = 0;  // accepted events whose type no entity knows
  uint64_t late = 0;      // accepted events that sorted before their entity's last
  uint64_t refolded = 0;  // events re-folded because of late ones
  // Refused deliveries the quarantine did not keep: over its write rate,
  // larger than its byte cap, or its best-effort write failed.
  uint64_t quarantine_dropped = 0;
  // Headers of quarantined deliveries not kept: not on the allowlist, or
  // past the per-delivery header budget (values are cut, not counted).
  uint64_t quarantine_headers_dropped = 0;
};

// What a store is and holds, cheaply (no scans).
struct StoreStats {
  std::string profile_name;         // the profile projections are built with
  std::string profile_fingerprint;  // its Profile::Fingerprint()
  // Options::profile differed from the store's profile at Open: the store
  // keeps routing and folding with its own, and the projections are stale
  // for the opener until a Rebuild with the requested profile.
  bool profile_stale = false;
  std::string requested_fingerprint;  // set when profile_stale
  uint32_t generation = 0;            // live projection generation
  // Live log generation: the projections' until a rebuild under the same
  // profile builds new projections over the logs it keeps.
  uint32_t log_generation = 0;
  // The highest arrival seq of a stored event or conflict record (0: none).
  // A write that fails stores nothing and counts nothing here.
  uint64_t last_seq = 0;
  uint64_t refused = 0;  // deliveries in the quarantine
  // Empty while the quarantine's database is open; otherwise why it is
  // closed (it did not open, or a write failed): refused deliveries are
  // then dropped (Counters::quarantine_dropped) until it reopens, which the
  // store retries on its own, or until `eventfold repair` brings back one
  // whose files are damaged.
  std::string quarantine_closed;
  // Stored events the profile routes to no entity (UnroutedEvent): kept
  // current by ingest and rebuild, not counted by a scan.
  uint64_t unrouted = 0;
  uint64_t approximate_bytes = 0;  // on disk
  // Memory held by the filters of stored keys (the dedup entries' event
  // ids, the live projections' keys): at most Options::key_filter_max_bytes
  // each, twice that while one is rebuilt larger. 0 until the first ingest
  // after Open has them built.
  uint64_t key_filter_bytes = 0;
};

class Store {
 public:
  // Opens (or, with create_if_missing, creates) the store in directory
  // `path`. Fails with kBusy when another Store holds it (in this process,
  // under any spelling of `path`, too: see Options::env); kCorruption or
  // kIOError when its files cannot be read; kInvalidArgument for an empty
  // path, a missing store without create_if_missing, an existing one with
  // error_if_exists, a store in an older format without
  // Options::upgrade_format, or one in a format this build does not know;
  // kCorruption for a directory a backup or a restore was writing when it
  // was stopped (eventfold/backup.h); kUnavailable when the system refuses
  // one of its threads. An existing
  // store keeps its own profile; when options.profile differs, Stats()
  // reports it as stale.
  static Result<std::unique_ptr<Store>> Open(const std::string& path, const Options& options);

  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  // Closes the store; pending writes have already returned.
  virtual ~Store() = default;

  // Ingests one delivery. On kAccepted the event, its log entry and its
  // entity's projection are stored atomically (and synced under
  // Durability::kSync) before this returns. Never throws; every refusal
  // names the field and the reason; storage failures give kStorageError.
  virtual IngestResult Ingest(const Delivery& delivery) = 0;
  // Ingest() of a bare body, with no header fields.
  IngestResult Ingest(std::string_view body);

  // Ingests many deliveries with one atomic write and one sync; results are
  // per delivery, in input order, as if ingested one by one in that order.
  // If the write fails, every delivery that would have been stored reports
  // kStorageError and none is stored.
  [[nodiscard]] virtual std::vector<IngestResult> IngestBatch(
      const std::vector<Delivery>& deliveries) = 0;

  // Makes every ingest that returned before this call durable: synced to
  // disk, as Durability::kSync makes each one before it returns. For a
  // store opened with kBuffered that chooses its own sync points: a bulk
  // load syncs one batch on another thread while it stages the next, and
  // counts a batch as stored only once its sync returned OK. Concurrent
  // syncing ingests share the sync. Fails with the disk's error (and the
  // store then refuses writes until it recovers, as after any failed
  // write); what was ingested since the last good sync may be lost.
  virtual Status Sync() = 0;

  // The current projection of one entity, as of one snapshot of the store:
  // folded from its nearest fold snapshot through at most
  // Options::snapshot_interval logged events (each a read of its body).
  // kNotFound when it has no events; kCorruption naming the entity when its
  // stored log does not fold to its stored cursor; kIOError when a read
  // fails.
  virtual Result<Projection> Get(std::string_view entity, std::string_view id) = 0;

  // Calls `fn` for every projection, ordered by entity then id (bytewise);
  // only those of `entity` when it is not empty (an entity the profile does
  // not have lists nothing). Stops early when `fn` returns false. Sees one
  // consistent snapshot of the store. Fails with kCorruption when a record
  // does not decode or fold, kIOError when a read fails; `fn` has then been
  // called for every projection before it.
  virtual Status List(std::string_view entity,
                      const std::function<bool(const Projection&)>& fn) = 0;

  // List() resumed where a page ended: the projections strictly after
  // `after` in that order (of `entity` only, when it is not empty). It
  // seeks there, so a page costs what it returns, not what precedes it.
  virtual Status ListAfter(std::string_view entity, const EntityRef& after,
                           const std::function<bool(const Projection&)>& fn) = 0;

  // The entity's events with their fold verdicts; kNotFound when it has
  // none; kCorruption when a stored record does not decode, kIOError when
  // a read fails. When gc compacted its older events, `compacted` says so
  // (snapshot, events dropped, when) and fold_order holds the events that
  // remain.
  virtual Result<EntityLog> Log(std::string_view entity, std::string_view id) = 0;

  // What the store is and holds, without scanning it. Never fails; waits
  // only while a rebuild switches generations.
  virtual StoreStats Stats() = 0;

  // The store's other jobs, each its own interface, valid while this Store
  // lives: whole-store passes (rebuild, verify, check, gc), the change feed
  // and subscription state, and the quarantine of refused deliveries.
  virtual Maintenance& maintenance() = 0;
  virtual ChangeFeed& feed() = 0;
  virtual Quarantine& quarantine() = 0;

  // The profile this store routes and folds with: an immutable snapshot,
  // safe to hold and use from any thread while a Rebuild switches the store
  // to another profile (the holder keeps the one it got; call again for the
  // new one). Never null.
  virtual std::shared_ptr<const Profile> profile() const = 0;

  // The counters since Open (ingest outcomes, late and re-folded events,
  // quarantine drops),
  // read without a lock: each figure is exact, the set is not one instant.
  virtual Counters counters() const = 0;
};

// Deletes the store in directory `path`: its database and its quarantine,
// and only the files they own (as leveldb::DestroyDB does), so any other
// file in the directory stays, and with it the directory. OK when there is
// nothing at `path`. Fails with kBusy, deleting nothing, while a Store (in
// this process or another) has it open; with kInvalidArgument when `path`
// holds files but no store; with kIOError when `path` cannot be listed or a
// file cannot be deleted. A backup or restore that did not finish
// (eventfold/backup.h) is deleted whole, its mark last. The store's lock is
// held throughout, so a Store
// opening `path` meanwhile fails with kBusy. On OK the deletion is durable:
// the directory that held the names removed is synced, so a power cut does
// not bring the store back.
Status DestroyStore(const std::string& path, const Options& options);

}  // namespace eventfold

#endif  // EVENTFOLD_STORE_H_
