// Store: an embedded, durable event store for one webhook receiver.
//
// Ingest takes deliveries exactly as they arrive — duplicated, late, out of
// order — dedups them by event_id (exactly and permanently), appends each to
// its entity's log, and keeps that entity's projection current in the same
// atomic write, so a log and its projection never disagree. Reads see every
// write that returned (read-your-writes).
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

#include "eventfold/backup.h"
#include "eventfold/feed.h"
#include "eventfold/ingest.h"
#include "eventfold/options.h"
#include "eventfold/profile.h"
#include "eventfold/projection.h"
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
};

// Totals of a rebuild.
struct RebuildSummary {
  uint64_t entities = 0;
  uint64_t events = 0;  // events stored, routed or not
  uint64_t applied = 0;
  uint64_t rejected = 0;
  uint64_t unrouted = 0;
  double seconds = 0;
};

// Where a running rebuild is; reported about once a second.
struct RebuildProgress {
  uint64_t events_done = 0;    // stored events done: half once routed, all
                               // once their log is written and folded
  uint64_t events_total = 0;   // stored events to route (an upper bound)
  uint64_t entities_done = 0;  // projections written so far
  double seconds = 0;          // since the rebuild started
};

struct RebuildOptions {
  // Rebuild under this profile, which then becomes the store's profile;
  // nullptr keeps the store's own.
  const Profile* profile = nullptr;

  // Only this entity type (and with `id`, only that one entity): re-folds
  // its logs in place, without re-routing. Refused together with `profile`.
  std::string entity;
  std::string id;

  // Worker threads; 0 means one per core.
  int threads = 0;

  // Called from a monitoring thread while the rebuild runs; may be empty.
  std::function<void(const RebuildProgress&)> progress;
};

// A delivery the store refused (400, 401, 409, 413), as kept in its
// quarantine for operators: the sender will not retry it.
struct RefusedDelivery {
  uint64_t seq = 0;         // quarantine order
  int64_t received_at = 0;  // microseconds since the epoch
  Outcome outcome = Outcome::kInvalid;
  int status = 0;           // HTTP status answered
  std::string reason;       // field and reason
  Headers headers;          // without credentials or signatures
  std::string body_prefix;  // the first kQuarantineBodyBytes of the body
  uint64_t body_bytes = 0;  // the whole body's size
};

inline constexpr size_t kQuarantineBodyBytes = 1024;

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
  uint64_t last_seq = 0;              // highest arrival sequence used so far
  uint64_t refused = 0;               // deliveries in the quarantine
  uint64_t approximate_bytes = 0;     // on disk
};

// What Store::TrimFeed removed and kept.
struct FeedTrimSummary {
  uint64_t trimmed = 0;         // change records deleted
  uint64_t first_seq = 0;       // the oldest change still in the feed (0: none)
  uint64_t last_seq = 0;        // the newest change (0: none)
  uint64_t min_checkpoint = 0;  // the lowest subscription checkpoint
  size_t subscriptions = 0;     // subscriptions with a checkpoint
};

// What one gc pass (Store::Gc) kept and dropped.
struct GcSummary {
  FeedTrimSummary feed;
  uint64_t entities_compacted = 0;    // terminal entities folded into a snapshot
  uint64_t events_compacted = 0;      // their events dropped (a/, log, snapshots)
  uint64_t entities_kept_recent = 0;  // terminal, but an event is too recent
  uint64_t tombstones_written = 0;    // one per compacted event
  uint64_t tombstones_expired = 0;    // dedup tombstones past their time
  uint64_t conflicts_dropped = 0;     // conflict records of expired tombstones
  uint64_t bytes_before = 0;          // ApproximateBytes() before and after
  uint64_t bytes_after = 0;
  double seconds = 0;
};

// Result of comparing the live projections with a rebuild made aside.
struct VerifySummary {
  uint64_t entities = 0;     // entities compared
  uint64_t differences = 0;  // entities whose projections differ
  double seconds = 0;
};

// Called for each entity whose live projection differs from the rebuilt one;
// either side is nullopt when that side has no projection for the entity.
using DifferenceFn = std::function<void(const std::optional<Projection>& live,
                                        const std::optional<Projection>& rebuilt)>;

// One problem Store::Check found.
struct CheckProblem {
  std::string key;      // the record concerned, printable (\xNN for other bytes); may be empty
  std::string message;  // what is wrong
};

// What Store::Check examined and found.
struct CheckSummary {
  uint64_t records = 0;       // keys read, every family
  uint64_t events = 0;        // a/ records
  uint64_t dedup = 0;         // d/ records
  uint64_t tombstones = 0;    // of which dedup tombstones of compacted events
  uint64_t compacted = 0;     // r/ records: compacted entities
  uint64_t conflicts = 0;     // c/ records
  uint64_t refused = 0;       // q/ records
  uint64_t log_entries = 0;   // log entries of the live generation
  uint64_t projections = 0;   // projections of the live generation
  uint64_t snapshots = 0;     // fold snapshots of the live generation
  uint64_t changes = 0;       // change feed records
  uint64_t first_change = 0;  // the feed's range (0: empty)
  uint64_t last_change = 0;
  uint64_t verified = 0;  // entities Verify compared with a rebuild aside
  uint64_t problems = 0;  // 0: the store is intact
  double seconds = 0;
};

using CheckProblemFn = std::function<void(const CheckProblem&)>;

class Store {
 public:
  // Opens (or, with create_if_missing, creates) the store in directory
  // `path`. Fails with kBusy when another Store holds it, kCorruption or
  // kIOError when its files cannot be read. An existing store keeps its own
  // profile; when options.profile differs, Stats() reports it as stale.
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
  IngestResult Ingest(std::string_view body);

  // Ingests many deliveries with one atomic write and one sync; results are
  // per delivery, in input order, as if ingested one by one in that order.
  // If the write fails, every delivery that would have been stored reports
  // kStorageError and none is stored.
  virtual std::vector<IngestResult> IngestBatch(const std::vector<Delivery>& deliveries) = 0;

  // The current projection of one entity; kNotFound when it has no events.
  virtual Result<Projection> Get(std::string_view entity, std::string_view id) = 0;

  // Calls `fn` for every projection, ordered by entity then id (bytewise);
  // only those of `entity` when it is not empty. Stops early when `fn`
  // returns false. Sees one consistent snapshot of the store.
  virtual Status List(std::string_view entity,
                      const std::function<bool(const Projection&)>& fn) = 0;

  // The entity's events with their fold verdicts; kNotFound when none.
  virtual Result<EntityLog> Log(std::string_view entity, std::string_view id) = 0;

  // Rebuilds the projections from the stored events. A full rebuild writes a
  // new generation of logs and projections beside the live one while ingest
  // and reads go on against the live one, then catches up with what arrived
  // meanwhile and switches over atomically; the old generation is dropped.
  // A crash before the switch leaves the live generation untouched (the
  // partial one is removed on the next Open). kBusy when another rebuild of
  // this store or a gc pass (Gc) runs; kInvalidArgument for bad filters, or
  // for a profile that lacks the type of a compacted entity.
  virtual Result<RebuildSummary> Rebuild(const RebuildOptions& options) = 0;

  // Rebuild(options) with only a profile (nullptr: the store's own).
  Result<RebuildSummary> Rebuild(const Profile* profile) {
    RebuildOptions options;
    options.profile = profile;
    return Rebuild(options);
  }

  // Rebuilds every projection from the stored events into a scratch store
  // beside this one (path + ".verify", removed afterwards) and compares it
  // with the live projections as of the call, reporting each difference.
  // Live data is never written; ingest may go on meanwhile.
  virtual Result<VerifySummary> Verify(const DifferenceFn& on_difference) = 0;

  // Checks the integrity of the whole store over one snapshot (the list is
  // in replay/check.h): every record's checksum and structure, events and
  // dedup entries one-to-one, every log entry's event stored and routed to
  // that entity, every projection equal to the fold of its log and to a
  // rebuild aside, the change feed without gaps. Calls `on_problem` for each
  // problem, naming its key; summary.problems > 0 means the store is damaged.
  // An error status only when the check could not run. Live data is never
  // written.
  virtual Result<CheckSummary> Check(const CheckProblemFn& on_problem) = 0;

  // Writes an online, consistent backup (eventfold/backup.h) to the new
  // directory `out` while ingest goes on: a fresh LevelDB from one snapshot,
  // synced, then verified. Refuses an `out` that exists and is not empty
  // (kInvalidArgument); kCorruption when the copy fails verification, or the
  // error that stopped it. A failed backup leaves `out` to be removed.
  virtual Result<BackupSummary> Backup(const std::string& out) = 0;

  // Keeps a refused delivery in the quarantine (best effort: not synced).
  // Ingest quarantines its own refusals; a receiver adds those it refuses
  // before ingest (401, 413). The oldest entries are dropped past
  // Options::quarantine_max_entries.
  // The store sets seq, received_at (from its Clock) and status, removes
  // credential headers, and cuts body_prefix to kQuarantineBodyBytes;
  // body_bytes 0 means body_prefix's full size.
  virtual Status Quarantine(RefusedDelivery refused) = 0;

  // Calls `fn` for each quarantined delivery, oldest first, until it
  // returns false.
  virtual Status ListRefused(const std::function<bool(const RefusedDelivery&)>& fn) = 0;

  // Approximate bytes the store occupies on disk.
  virtual uint64_t ApproximateBytes() = 0;

  virtual StoreStats Stats() = 0;

  // Appends to `out` up to `max` changes with seq > after_seq, in order
  // (see eventfold/feed.h). Changes below the retention point are gone.
  virtual Status ReadFeed(uint64_t after_seq, size_t max, std::vector<Change>* out) = 0;

  // Durable subscription state (see eventfold/subscription.h). A
  // subscription's checkpoint is the highest seq below which every change is
  // handled or parked; 0 for a new subscription. Writes are synced.
  virtual Result<uint64_t> GetCheckpoint(std::string_view subscription) = 0;
  virtual Status SetCheckpoint(std::string_view subscription, uint64_t seq) = 0;
  // Every subscription with a checkpoint, by name.
  virtual Status ListSubscriptions(
      const std::function<bool(const std::string& name, uint64_t checkpoint)>& fn) = 0;
  // Parks a change in its subscription's dead letters (replacing an earlier
  // park of the same seq), lists them in seq order, removes one.
  virtual Status Park(const ParkedChange& parked) = 0;
  virtual Status ListParked(std::string_view subscription,
                            const std::function<bool(const ParkedChange&)>& fn) = 0;
  virtual Status Unpark(std::string_view subscription, uint64_t seq) = 0;

  // The newest change's seq (0: none yet).
  virtual uint64_t LastChangeSeq() = 0;

  // Feed retention: deletes the change records every subscription has
  // passed, keeping `grace_changes` more below the lowest checkpoint. The
  // newest change is always kept (the next seq is recovered from it at Open),
  // and with no subscription at all nothing is trimmed: a feed nobody has
  // subscribed to yet is kept for its first subscriber. Dead letters keep
  // their own copy of their change and are not affected.
  virtual Result<FeedTrimSummary> TrimFeed(uint64_t grace_changes) = 0;

  // One retention pass: TrimFeed(options.feed_grace), then (when
  // options.compact_after_micros > 0) compaction of old terminal entities,
  // then expiry of dedup tombstones past their time (docs/RETENTION.md).
  // kBusy while a rebuild runs; kInvalidArgument for a tombstone time below
  // GcOptions::kMinTombstoneMicros.
  virtual Result<GcSummary> Gc(const GcOptions& options) = 0;

  // Background gc (Options::gc_interval_micros): blocks until more than
  // `after` passes have finished or the timeout (real time) passes; returns
  // the passes finished so far. `last`, when given, receives the latest
  // pass's result.
  virtual uint64_t WaitForGcPass(uint64_t after, int64_t timeout_micros,
                                 Result<GcSummary>* last = nullptr) = 0;

  // Compacts the whole store so that deleted records give back their space
  // (ApproximateBytes drops). Slow on a big store: maintenance, not hot path.
  virtual Status Compact() = 0;

  // Blocks until a change with seq > after_seq exists or the timeout passes;
  // returns LastChangeSeq().
  virtual uint64_t WaitForChanges(uint64_t after_seq, int64_t timeout_micros) = 0;

  // The profile this store routes and folds with.
  virtual const Profile& profile() const = 0;

  virtual Counters counters() const = 0;
};

}  // namespace eventfold

#endif  // EVENTFOLD_STORE_H_
