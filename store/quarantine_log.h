// QuarantineLog: where a store keeps the deliveries it refused — a LevelDB
// of its own beside the store's (DIR/quarantine/), written by a background
// thread from a bounded in-memory queue.
//
// Why a database of its own: a LevelDB write error is sticky for the whole
// database, so a quarantine write that failed in the store's database would
// stop the store (503 until it reopens). Here a failure closes only this
// database: refusals are then dropped and counted, the failure is logged
// once, and the writer reopens it later on the store's Clock (a doubling
// backoff). Nothing here is synced on, or waited for by, an ingest: Add only
// trims the delivery and queues it; a full queue drops it (counted).
//
// Bounded: in entries and bytes (Options::quarantine_max_entries, _bytes;
// the oldest go first), in rate (Options::quarantine_max_per_second), per
// delivery (a body prefix, allowlisted headers with cut values), and in
// memory (kQueueEntries queued refusals of at most a few KiB each).
//
// Thread-safety: every method may be called from any thread.

#ifndef EVENTFOLD_STORE_QUARANTINE_LOG_H_
#define EVENTFOLD_STORE_QUARANTINE_LOG_H_

#include <leveldb/db.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/thread_annotations.h"
#include "eventfold/maintenance.h"
#include "eventfold/options.h"
#include "eventfold/quarantine.h"
#include "eventfold/status.h"

namespace eventfold::storage {

// The quarantine's database is this subdirectory of the store's.
inline constexpr char kQuarantineSubdir[] = "quarantine";

class QuarantineLog {
 public:
  // Refusals queued for the writer; more are dropped (counted).
  static constexpr size_t kQueueEntries = 256;
  // The reopen backoff after a failure, on the store's Clock.
  static constexpr int64_t kFirstRetryDelay = 1000 * 1000;
  static constexpr int64_t kMaxRetryDelay = 60 * 1000 * 1000;

  // Opens (creating it) the database at `dir` through options.env. Never
  // fails: a database that does not open is logged and retried by the
  // writer once Start has run. `dropped` and `headers_dropped` count what
  // was not kept (the store's counters; they outlive this object).
  QuarantineLog(std::string dir, const Options& options, std::atomic<uint64_t>* dropped,
                std::atomic<uint64_t>* headers_dropped);
  // Stops the writer after it has written what is queued (unsynced), and
  // closes the database.
  ~QuarantineLog();
  QuarantineLog(const QuarantineLog&) = delete;
  QuarantineLog& operator=(const QuarantineLog&) = delete;

  // Keeps records that older builds wrote into the store's own database
  // (key q/<seq>, value as stored) under the same keys, synced; those whose
  // seq this database already passed are skipped, so an import a crash
  // interrupted can run again. OK when each is kept or skipped: the caller
  // may then delete them from the store's database. Call before Start.
  Status Import(const std::vector<std::pair<std::string, std::string>>& records);
  // Starts the writer thread: OK, or kUnavailable when the system refuses
  // the thread (nothing is then written until the log is destroyed).
  [[nodiscard]] Status Start();

  // Trims `refused` (headers by the allowlist, cut values, the body prefix)
  // and queues it; drops it (counted) over the rate cap, when the queue is
  // full or while the database is closed after a failure. Never blocks on
  // the disk.
  void Add(RefusedDelivery refused);

  // Waits for the refusals queued before the call to be written (or
  // dropped): a backup then holds what was refused before it began.
  void Flush() EXCLUDES(mu_);

  // Calls `fn` for each kept refusal, oldest first, until it returns false;
  // first waits for the refusals queued before the call to be written (or
  // dropped). Unavailable while the database is closed after a failure.
  // From the delivery after `after_seq` (0: from the first).
  Status List(uint64_t after_seq, const std::function<bool(const RefusedDelivery&)>& fn);

  // The integrity check of the kept refusals, for Store::Check: reads each
  // (checksums verified), counts it in sum->records and sum->refused, and
  // reports (counted in sum->problems) each that does not decode, and a
  // database that is closed (it did not open, or failed since).
  void Check(const CheckProblemFn& on_problem, CheckSummary* sum);

  // Refusals kept and queued.
  uint64_t Held();

  // OK while the database is open; otherwise the failure that closed it
  // (it did not open, or a write failed), until a reopen succeeds.
  Status Closed() EXCLUDES(mu_);

  // The open database (nullptr while it is closed), for backups and checks;
  // the caller's reference keeps it open.
  std::shared_ptr<leveldb::DB> db();

  // For tests: blocks until more than `after` reopen attempts have finished
  // or the timeout (real time) passes; returns the attempts finished so far
  // and, in *open, whether the database is open now.
  uint64_t WaitForReopenAttempt(uint64_t after, int64_t timeout_micros, bool* open = nullptr);

 private:
  // One entry the writer keeps: its seq and bytes (key and value).
  struct Entry {
    uint64_t seq;
    uint64_t bytes;
  };

  void WriterLoop() EXCLUDES(mu_);
  // Opens the database and reads its entries' sizes (writer-side state).
  Result<std::shared_ptr<leveldb::DB>> OpenDb();
  // Writes `values` under seqs `seqs` and evicts the oldest past the caps;
  // `sync` only for Import. Updates the writer-side state on success.
  Status WriteEntries(leveldb::DB* db, const std::vector<uint64_t>& seqs,
                      const std::vector<std::string>& values, bool sync);
  // After a failed open or write: closes the database, drops what is
  // queued, logs the first failure of a run, schedules the next attempt.
  // Returns the closed handle, for the caller to release outside mu_.
  std::shared_ptr<leveldb::DB> Fail(const Status& st, uint64_t lost) REQUIRES(mu_);

  const std::string dir_;
  const Options options_;
  Clock* const clock_;
  std::atomic<uint64_t>* const dropped_;
  std::atomic<uint64_t>* const headers_dropped_;

  Mutex mu_;
  std::condition_variable cv_;  // queue, handled_, stop_, db_ and reopen changes
  std::shared_ptr<leveldb::DB> db_ GUARDED_BY(mu_);
  std::vector<RefusedDelivery> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  size_t in_flight_ GUARDED_BY(mu_) = 0;   // taken by the writer, not yet written
  uint64_t enqueued_ GUARDED_BY(mu_) = 0;  // refusals ever queued
  uint64_t handled_ GUARDED_BY(mu_) = 0;   // of them, written or dropped
  int64_t retry_due_ GUARDED_BY(mu_) = 0;
  int64_t retry_delay_ GUARDED_BY(mu_) = kFirstRetryDelay;
  bool failure_logged_ GUARDED_BY(mu_) = false;
  Status closed_by_ GUARDED_BY(mu_);  // the last failure while db_ is null
  uint64_t reopen_attempts_ GUARDED_BY(mu_) = 0;
  int64_t second_ GUARDED_BY(mu_) = -1;  // the rate window
  size_t this_second_ GUARDED_BY(mu_) = 0;

  // The writer's own state, touched only by the constructor, Import (both
  // before Start) and the writer thread: the kept entries oldest first
  // (seqs are contiguous), their bytes, and the next seq.
  std::deque<Entry> sizes_;
  uint64_t bytes_ = 0;
  uint64_t next_ = 1;
  std::atomic<uint64_t> kept_{0};  // sizes_.size(), for Held()

  std::thread writer_;
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORE_QUARANTINE_LOG_H_
