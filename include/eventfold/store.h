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

// A delivery the store refused (400, 401, 409, 413), as kept in its
// quarantine for operators: the sender will not retry it.
struct RefusedDelivery {
  uint64_t seq = 0;           // quarantine order
  int64_t received_at = 0;    // microseconds since the epoch
  Outcome outcome = Outcome::kInvalid;
  int status = 0;             // HTTP status answered
  std::string reason;         // field and reason
  Headers headers;            // without credentials or signatures
  std::string body_prefix;    // the first kQuarantineBodyBytes of the body
  uint64_t body_bytes = 0;    // the whole body's size
};

inline constexpr size_t kQuarantineBodyBytes = 1024;

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

class Store {
 public:
  // Opens (or, with create_if_missing, creates) the store in directory
  // `path`. Fails with kBusy when another Store holds it, kInvalidArgument
  // when options.profile differs from the store's, kCorruption or kIOError
  // when its files cannot be read.
  static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                             const Options& options);

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
  virtual std::vector<IngestResult> IngestBatch(
      const std::vector<Delivery>& deliveries) = 0;

  // The current projection of one entity; kNotFound when it has no events.
  virtual Result<Projection> Get(std::string_view entity,
                                 std::string_view id) = 0;

  // Calls `fn` for every projection, ordered by entity then id (bytewise);
  // only those of `entity` when it is not empty. Stops early when `fn`
  // returns false. Sees one consistent snapshot of the store.
  virtual Status List(std::string_view entity,
                      const std::function<bool(const Projection&)>& fn) = 0;

  // The entity's events with their fold verdicts; kNotFound when none.
  virtual Result<EntityLog> Log(std::string_view entity,
                                std::string_view id) = 0;

  // Rebuilds every log index and projection from the stored events, under
  // `profile` when given (which then becomes the store's profile) or the
  // store's own. Ingest is paused meanwhile. An interrupted rebuild is
  // finished by the next Open.
  virtual Result<RebuildSummary> Rebuild(const Profile* profile) = 0;

  // Rebuilds every projection from the stored events into a scratch store
  // beside this one (path + ".verify", removed afterwards) and compares it
  // with the live projections as of the call, reporting each difference.
  // Live data is never written; ingest may go on meanwhile.
  virtual Result<VerifySummary> Verify(const DifferenceFn& on_difference) = 0;

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

  // The profile this store routes and folds with.
  virtual const Profile& profile() const = 0;

  virtual Counters counters() const = 0;
};

}  // namespace eventfold

#endif  // EVENTFOLD_STORE_H_
