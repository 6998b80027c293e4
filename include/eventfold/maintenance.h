// Maintenance: the whole-store jobs of a Store — rebuilding projections,
// verifying and checking integrity, retention (gc, feed trimming) and
// compaction. Reached through Store::maintenance(); valid while its Store
// lives.
//
// These are slow, operator-driven passes, kept apart from the hot ingest and
// read path of eventfold/store.h. Each runs over a consistent snapshot or
// beside the live data, so ingest and reads go on meanwhile.
//
// Thread-safety: every method may be called from any thread. Rebuild and Gc
// exclude each other and the store's own recovery after a failed write (the
// second gets kBusy); Verify and Check may run beside anything.

#ifndef EVENTFOLD_MAINTENANCE_H_
#define EVENTFOLD_MAINTENANCE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "eventfold/backup.h"
#include "eventfold/options.h"
#include "eventfold/profile.h"
#include "eventfold/projection.h"
#include "eventfold/status.h"

namespace eventfold {

// Totals of a rebuild.
struct RebuildSummary {
  uint64_t entities = 0;
  uint64_t events = 0;  // events stored, routed or not
  // What the rebuilt projections count, each from its fold's start: for an
  // entity `gc` compacted, that includes the events folded into its
  // compaction snapshot and no longer stored, so `applied + rejected` can
  // exceed `events`.
  uint64_t applied = 0;
  uint64_t rejected = 0;
  uint64_t unrouted = 0;
  double seconds = 0;  // on the store's Clock
  // A full rebuild catches up with the events ingested while it ran: first
  // in rounds while ingest goes on, then, with ingest stopped for
  // `pause_seconds`, the last few (events_caught_up_paused) and the switch.
  uint64_t events_caught_up = 0;         // in the rounds, ingest going on
  uint64_t events_caught_up_paused = 0;  // with ingest stopped
  double pause_seconds = 0;              // ingest stopped for the switch (Clock)
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

  // A full rebuild under the store's own profile copies the live
  // generation's per-entity logs, which are routed and sorted exactly as
  // the rebuild would route and sort them, and folds them: no stored event
  // is decoded again (only those a fold snapshot needs). True derives every
  // log anew from the stored events, as a rebuild under a new profile does:
  // what a repair needs, since a copy carries over any damage the logs have
  // (`eventfold check` reports it). Ignored with `entity`.
  bool rederive_logs = false;

  // Called from a monitoring thread about once a second of the store's
  // Clock while the rebuild runs, and once at its end; may be empty.
  std::function<void(const RebuildProgress&)> progress;
};

// Result of comparing the live projections with a rebuild made aside.
struct VerifySummary {
  uint64_t entities = 0;     // entities compared
  uint64_t differences = 0;  // entities whose projections differ
  uint64_t unrouted = 0;     // stored events the rebuild aside left unrouted
  double seconds = 0;        // on the store's Clock
};

// Called for each entity whose live projection differs from the rebuilt one;
// either side is nullopt when that side has no projection for the entity.
using DifferenceFn = std::function<void(const std::optional<Projection>& live,
                                        const std::optional<Projection>& rebuilt)>;

// One problem Check found.
struct CheckProblem {
  std::string key;      // the record concerned, printable (\xNN for other bytes); may be empty
  std::string message;  // what is wrong
};

// What Check examined and found.
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
  double seconds = 0;     // on the store's Clock
};

using CheckProblemFn = std::function<void(const CheckProblem&)>;

// What TrimFeed removed and kept.
struct FeedTrimSummary {
  uint64_t trimmed = 0;         // change records deleted
  uint64_t first_seq = 0;       // the oldest change still in the feed (0: none)
  uint64_t last_seq = 0;        // the newest change (0: none)
  uint64_t min_checkpoint = 0;  // the lowest subscription checkpoint
  size_t subscriptions = 0;     // subscriptions with a checkpoint
};

// What one gc pass (Gc) kept and dropped.
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
  double seconds = 0;  // on the store's Clock
};

// An accepted event that no entity of a profile routes: its type is not in
// the profile, or the type's key field is missing. It stays stored and
// deduplicated, in no log or projection, until a profile routes it (Rebuild).
struct UnroutedEvent {
  uint64_t seq = 0;         // arrival sequence
  int64_t received_at = 0;  // microseconds since the epoch
  std::string event_id;
  std::string type;
  int64_t occurred_at = 0;  // microseconds since the epoch
  std::string reason;       // why no entity routes it
  std::string body;         // the body as stored, verbatim
};

// How many projections the live generation holds, by entity type and state.
struct ProjectionCounts {
  uint64_t projections = 0;
  std::map<std::string, std::map<std::string, uint64_t>> by_entity;  // entity -> state -> count
};

class Maintenance {
 public:
  virtual ~Maintenance() = default;

  // Rebuilds the projections from the stored events. A full rebuild writes a
  // new generation of logs and projections beside the live one while ingest
  // and reads go on against the live one, then catches up with what arrived
  // meanwhile and switches over atomically; the old generation is dropped.
  // A crash before the switch leaves the live generation untouched (the
  // partial one is removed on the next Open). kBusy when another rebuild of
  // this store, a gc pass (Gc) or a recovery after a failed write runs;
  // kNotFound for an `entity` type the
  // profile lacks or an `id` with no events; kInvalidArgument for other bad
  // filters, or for a profile that lacks the type of a compacted entity.
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
  // Live data is never written; ingest may go on meanwhile. Fails with the
  // error of the scratch store (kIOError) or of a stored record that does
  // not decode (kCorruption); the scratch store is removed either way.
  virtual Result<VerifySummary> Verify(const DifferenceFn& on_difference) = 0;

  // As Verify, with the rebuild aside made under `profile` (nullptr: the
  // store's own, which is Verify). Under another profile the differences
  // are what Rebuild(profile) would change: projections that would appear
  // (live nullopt), go (rebuilt nullopt) or change, and summary.unrouted is
  // how many stored events would be unrouted; nothing is switched and live
  // data is never written (a dry run of a profile switch). kInvalidArgument
  // for a profile that lacks the type of a compacted entity, as Rebuild.
  virtual Result<VerifySummary> Verify(const Profile* profile,
                                       const DifferenceFn& on_difference) = 0;

  // Checks the integrity of the whole store over one snapshot (the list is
  // in replay/check.h): every record's checksum and structure, events and
  // dedup entries one-to-one, every log entry's event stored and routed to
  // that entity, every projection equal to the fold of its log and to a
  // rebuild aside, the change feed without gaps. Calls `on_problem` for each
  // problem, naming its key; summary.problems > 0 means the store is damaged.
  // An error status only when the check could not run. Live data is never
  // written.
  virtual Result<CheckSummary> Check(const CheckProblemFn& on_problem) = 0;

  // Feed retention: deletes the change records every subscription has
  // passed, keeping `grace_changes` more below the lowest checkpoint. The
  // newest change is always kept (the next seq is recovered from it at Open),
  // and with no subscription at all nothing is trimmed: a feed nobody has
  // subscribed to yet is kept for its first subscriber. Dead letters keep
  // their own copy of their change and are not affected. Deletes in batches
  // of 10,000: on a write error (returned) the oldest changes may be
  // trimmed already, which the next call continues.
  virtual Result<FeedTrimSummary> TrimFeed(uint64_t grace_changes) = 0;

  // One retention pass: TrimFeed(options.feed_grace), then (when
  // options.compact_after_micros > 0) compaction of old terminal entities,
  // then expiry of dedup tombstones past their time (docs/RETENTION.md).
  // kBusy while a rebuild runs; kInvalidArgument for a tombstone time below
  // GcOptions::kMinTombstoneMicros or above kMaxTombstoneMicros, or a
  // negative compact_after_micros.
  virtual Result<GcSummary> Gc(const GcOptions& options) = 0;

  // Compacts the whole store so that deleted records give back their space
  // (ApproximateBytes drops). Slow on a big store: maintenance, not hot path.
  // Always OK: LevelDB reports nothing from a manual compaction (a write
  // error in it surfaces at the next write).
  virtual Status Compact() = 0;

  // Approximate bytes the store occupies on disk.
  virtual uint64_t ApproximateBytes() = 0;

  // Writes an online, consistent backup (eventfold/backup.h) to the new
  // directory `out` while ingest goes on: a fresh LevelDB from one snapshot,
  // synced, then verified. Refuses an `out` that exists and is not empty
  // (naming a backup that did not finish, when it holds one), or that lies
  // within a store (kInvalidArgument); kBusy when another backup or a
  // Store is writing `out` (nothing there is touched); kCorruption when the
  // copy fails verification, or the error that stopped it. A failed backup
  // removes what it wrote; one stopped midway (killed, a power cut) leaves
  // `out` marked unfinished, which Store::Open and RestoreStore refuse. One
  // abandoned (BackupOptions::abandon) removes what it wrote and returns
  // kUnavailable.
  virtual Result<BackupSummary> Backup(const std::string& out, const BackupOptions& options) = 0;
  Result<BackupSummary> Backup(const std::string& out) { return Backup(out, BackupOptions()); }

  // Calls `fn` for each stored event that `profile` (nullptr: the store's
  // own) does not route, in arrival order, until it returns false. Reads one
  // snapshot and decodes every stored event: an operator's read, not a hot
  // path. OK when the scan ended or `fn` stopped it; kCorruption or
  // kIOError when a stored record could not be read (`fn` has then been
  // called for the events before it).
  virtual Status ListUnrouted(const Profile* profile,
                              const std::function<bool(const UnroutedEvent&)>& fn) = 0;

  // Counts the projections of one snapshot by entity type and state. Reads
  // each projection's stored record (the fold's cursor holds the state)
  // without folding its fields, so it costs a scan of the projection
  // records, not a List. kCorruption naming the key when a record does not
  // decode; a storage error as its Status.
  virtual Result<ProjectionCounts> CountProjections() = 0;
};

}  // namespace eventfold

#endif  // EVENTFOLD_MAINTENANCE_H_
