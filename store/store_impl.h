// StoreImpl: the LevelDB-backed Store. See include/eventfold/store.h for the
// contract and storage/key_codec.h for what it writes where.
//
// Concurrency: ingests hold `rebuild_mu_` shared and the LockTable stripes of
// every event_id and entity they touch; Rebuild holds `rebuild_mu_`
// exclusively. What each mutex guards is annotated (core/thread_annotations.h)
// and checked by clang's -Wthread-safety (the `thread-safety` preset). Lock
// order: rebuild_mu_, then the stripes (the quarantine's own mutex is a
// leaf, taken under any of them); gc_mu_ before
// rebuild_mu_ and trim_mu_; GuardedDb's write lock before recover_mu_ (its
// failure listener); recover_mu_, gc_thread_mu_, profile_mu_ and
// key_filters_mu_ are never held while another is taken. LevelDB merges
// concurrent synced writes into one log write and sync (group commit), so
// parallel ingests share their syncs.
//
// The store's files: store_impl.cc (open, metadata, reads, rebuild),
// ingest_txn.cc (the ingest transaction), quarantine.cc, unrouted.cc,
// subscription_state.cc (checkpoints, dead letters, feed retention),
// retention.cc (gc: entity compaction, tombstones, the background pass),
// recovery.cc (reopening after a failed write), key_filters.cc (the
// filters of stored event ids and projection keys).

#ifndef EVENTFOLD_STORE_STORE_IMPL_H_
#define EVENTFOLD_STORE_STORE_IMPL_H_

#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/decode.h"
#include "core/thread_annotations.h"
#include "eventfold/store.h"
#include "storage/background_env.h"
#include "storage/batch_pool.h"
#include "storage/dir_sync.h"
#include "storage/guarded_db.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "store/absent_filter.h"
#include "store/lock_table.h"
#include "store/quarantine_log.h"
#include "store/recent_events.h"

namespace eventfold::storage {

class CommitQueue;
class IngestTxn;

class StoreImpl final : public Store, public Maintenance, public ChangeFeed, public Quarantine {
 public:
  static Result<std::unique_ptr<Store>> Open(const std::string& path, const Options& options);
  ~StoreImpl() override;

  // Store.
  IngestResult Ingest(const Delivery& delivery) override;
  std::vector<IngestResult> IngestBatch(const std::vector<Delivery>& deliveries) override;
  Status Sync() override;
  Result<Projection> Get(std::string_view entity, std::string_view id) override;
  Status List(std::string_view entity, const std::function<bool(const Projection&)>& fn) override;
  Status ListAfter(std::string_view entity, const EntityRef& after,
                   const std::function<bool(const Projection&)>& fn) override;
  Result<EntityLog> Log(std::string_view entity, std::string_view id) override;
  StoreStats Stats() override;
  Maintenance& maintenance() override { return *this; }
  ChangeFeed& feed() override { return *this; }
  Quarantine& quarantine() override { return *this; }
  std::shared_ptr<const Profile> profile() const override;
  Counters counters() const override;

  // Maintenance.
  using Maintenance::Rebuild;
  Result<RebuildSummary> Rebuild(const RebuildOptions& options) override;
  Result<VerifySummary> Verify(const DifferenceFn& on_difference) override;
  Result<VerifySummary> Verify(const Profile* profile, const DifferenceFn& on_difference) override;
  Result<CheckSummary> Check(const CheckProblemFn& on_problem) override;
  Result<FeedTrimSummary> TrimFeed(uint64_t grace_changes) override;
  Result<GcSummary> Gc(const GcOptions& options) override;
  Status Compact() override;
  Status ListUnrouted(const Profile* profile,
                      const std::function<bool(const UnroutedEvent&)>& fn) override;
  Result<ProjectionCounts> CountProjections() override;
  using Maintenance::Backup;
  Result<BackupSummary> Backup(const std::string& out,
                               const BackupOptions& options) override;  // store/backup.cc
  uint64_t ApproximateBytes() override;

  // ChangeFeed.
  Status Read(uint64_t after_seq, size_t max,
              const std::function<bool(const Change&)>& fn) override;
  uint64_t LastSeq() override;
  uint64_t WaitForChanges(uint64_t after_seq, int64_t timeout_micros) override;
  Result<uint64_t> GetCheckpoint(std::string_view subscription) override;
  Status SetCheckpoint(std::string_view subscription, uint64_t seq) override;
  bool ClaimSubscription(std::string_view subscription) override;
  void ReleaseSubscription(std::string_view subscription) override;
  Status ListSubscriptions(const std::function<bool(const std::string&, uint64_t)>& fn) override;
  Status Park(const ParkedChange& parked) override;
  Status ListParked(std::string_view subscription,
                    const std::function<bool(const ParkedChange&)>& fn) override;
  Status Unpark(std::string_view subscription, uint64_t seq) override;

  // Quarantine.
  Status Add(RefusedDelivery refused) override;
  Status List(const std::function<bool(const RefusedDelivery&)>& fn) override;
  Status ListAfter(uint64_t after_seq,
                   const std::function<bool(const RefusedDelivery&)>& fn) override;

  // The quarantine's database and writer, for tests.
  QuarantineLog& quarantine_log() { return *quarantine_; }

  // Background gc (Options::gc_interval_micros), for tests: blocks until
  // more than `after` passes have finished or the timeout (real time)
  // passes; returns the passes finished so far. `last`, when given,
  // receives the latest pass's result.
  uint64_t WaitForGcPass(uint64_t after, int64_t timeout_micros, Result<GcSummary>* last = nullptr);
  // Recovery after a failed write, for tests: blocks until more than
  // `after` recovery attempts have finished or the timeout (real time)
  // passes; returns the attempts finished so far. `recovered`, when given,
  // receives how many of them reopened the database for writing.
  uint64_t WaitForRecoveryAttempt(uint64_t after, int64_t timeout_micros,
                                  uint64_t* recovered = nullptr);

 private:
  // Backup()'s copy into `out` (empty, its parents made: `created`) and its
  // verification, through `env` (the store's, holding the lock on `out`),
  // until `abandon` (when given) turns true; on failure the caller removes
  // what it wrote.
  Result<BackupSummary> CopyTo(const std::string& out, leveldb::Env* env,
                               const std::vector<std::string>& created,
                               const std::atomic<bool>* abandon);
  friend class IngestTxn;

  StoreImpl(const Options& options, Profile profile);

  // List and ListAfter: from the start when `after` is null.
  Status ListFrom(std::string_view entity, const EntityRef* after,
                  const std::function<bool(const Projection&)>& fn);

  Status Init(const std::string& path);
  Status LoadOrCreateMeta() REQUIRES(rebuild_mu_);
  Status RecoverSequence();
  Status RecoverFeed();
  Status AbandonInterruptedRebuild() REQUIRES(rebuild_mu_);
  // Counts the live log generation's index of unrouted events into
  // unrouted_stored_; writes the index first when the store has none for
  // it (a store from before the index: one scan of the stored events).
  Status LoadUnroutedIndex() REQUIRES(rebuild_mu_);
  // Rebuild without filters: a new generation, then the switch.
  Result<RebuildSummary> RebuildAll(const RebuildOptions& options) EXCLUDES(rebuild_mu_);
  // Rebuild with filters: re-folds the matching entities in place.
  Result<RebuildSummary> RefoldInPlace(const RebuildOptions& options) EXCLUDES(rebuild_mu_);
  // Projects the events stored with from_seq <= seq < to_seq (to_seq 0: all
  // from from_seq on) into the generations `gens` a rebuild builds: when
  // their logs are of another generation than their projections (the live
  // logs, kept), ingest already logged those events and only the
  // projections are caught up.
  Status CatchUp(uint64_t from_seq, uint64_t to_seq, const Generations& gens,
                 const Profile& profile, RebuildSummary* summary);
  // Catches up in rounds without holding `rebuild_mu_` (each round's end is
  // read under a momentary exclusive lock) until at most
  // kPausedCatchUpEvents events remain or kMaxCatchUpRounds have run;
  // advances *from_seq past what it projected.
  Status CatchUpInRounds(uint64_t* from_seq, const Generations& gens, const Profile& profile,
                         RebuildSummary* summary);
  // What the rebuild's switch may re-decode while ingest is stopped: at a
  // few µs an event, 256 events keep the pause to about a millisecond.
  static constexpr uint64_t kPausedCatchUpEvents = 256;
  static constexpr int kMaxCatchUpRounds = 16;
  // After a rebuild's switch, the old generations' families that are no
  // longer live are deleted on a thread of their own: the rebuild returns
  // at the switch. The next rebuild, a Check and the store's close wait for
  // that drop; one that fails (or a crash) leaves the families for the
  // next Open to delete (AbandonInterruptedRebuild) and Check to report.
  void StartDrop(const Generations& old, const Generations& live) EXCLUDES(drop_mu_);
  void AwaitDrop() EXCLUDES(drop_mu_);

  // Ingest and IngestBatch: one transaction over n deliveries.
  std::vector<IngestResult> IngestAll(const Delivery* const* deliveries, size_t n);
  // Size, decode and header checks; true when the delivery may be stored.
  bool Precheck(const Delivery& d, DecodedEvent* out, IngestResult* result) const
      REQUIRES_SHARED(rebuild_mu_);
  // The duplicate fast path: true (and `result` set) when `d` is byte for
  // byte the body of an event stored under the current routing epoch, found
  // by its key and guessed event_id among the recent events, or through the
  // guessed event_id's dedup entry and compared by SHA-256, without decoding
  // it. False: decide the slow way, with what it learned in `learned`.
  struct FastPathFacts;  // store_impl.cc
  // `key` is the body's RecentEvents::KeyOf, its lines already asked for.
  bool KnownDuplicate(const Delivery& d, const RecentEvents::Key& key, FastPathFacts* learned,
                      IngestResult* result) REQUIRES_SHARED(rebuild_mu_);
  void QuarantineRefusals(const Delivery* const* deliveries,
                          const std::vector<IngestResult>& results);
  // After a failed write the database refuses writes (GuardedDb) until it
  // is reopened. RecoveryLoop, a background thread, retries on the store's
  // Clock, kFirstRecoveryDelay after the failure and then with a doubling
  // backoff up to kMaxRecoveryDelay: TryRecover probes the disk and, when a
  // small synced write works, reopens the database in place and re-derives
  // the store's state from it, as Open does. Reads go on meanwhile.
  void RecoveryLoop() EXCLUDES(recover_mu_);
  bool TryRecover() EXCLUDES(recover_mu_, rebuild_mu_);
  void StopRecovery() EXCLUDES(recover_mu_);
  // GuardedDb's failure listener: schedules the first attempt.
  void NoteWriteFailure() EXCLUDES(recover_mu_);
  // An ingest meeting a failed database while an attempt is due or running
  // waits for that attempt's outcome instead of answering 503 before it.
  void AwaitDueRecovery() EXCLUDES(recover_mu_);
  Status ProbeDisk();

  // Gc's steps (retention.cc); the caller holds `rebuilding_`.
  struct CompactionCandidate;
  Status CompactTerminal(int64_t now, const GcOptions& options, GcSummary* sum)
      REQUIRES_SHARED(rebuild_mu_);
  Status CompactGroup(std::vector<CompactionCandidate>* group, int64_t now,
                      const GcOptions& options, GcSummary* sum) REQUIRES_SHARED(rebuild_mu_);
  Status ExpireTombstones(int64_t now, GcSummary* sum) REQUIRES_SHARED(rebuild_mu_);
  // kInvalidArgument when `profile` lacks the type of a compacted entity,
  // whose dropped events could not be routed under it.
  Status CompactedTypesKnown(const Profile& profile);
  // m/retired_seq: the highest seq whose a/ record compaction dropped (0: none).
  Result<uint64_t> RetiredSeq();
  void GcLoop(int64_t first_due) EXCLUDES(gc_thread_mu_);
  void StopGc() EXCLUDES(gc_thread_mu_);

  // The filters of stored keys (key_filters.cc, store/absent_filter.h).
  // The caller holds `rebuild_mu_` shared, which keeps them alive (not
  // annotated: IngestTxn calls them under its caller's lock, which the
  // analysis cannot see).
  // MayHoldDedup: false when no dedup entry for `event_id` is stored or being
  // written, so the caller need not read one. True: read it.
  bool MayHoldDedup(std::string_view event_id) const;
  // MayHoldProjection: the same for the projection key `key` of generation
  // `gen`.
  bool MayHoldProjection(uint32_t gen, std::string_view key) const;
  // Record, before the write that stores it, a dedup entry for `event_id`
  // or the projection key `key` of generation `gen`; the caller also holds
  // the stripe of the id or the entity.
  void NoteDedupWritten(std::string_view event_id);
  void NoteProjectionWritten(uint32_t gen, std::string_view key);
  // Asks for a larger filter once the live one holds its capacity, and for
  // a projection filter of generation `projection_gen` (the live one).
  void MaybeRequestKeyFilters(uint32_t projection_gen);
  // The thread that builds the filters on request: both at the first
  // ingest after Open, either again later. Each build scans its family;
  // what ingest writes meanwhile it hears of through the Note calls.
  struct KeyFilter {
    std::atomic<AbsentFilter*> live{nullptr};      // nullptr: none yet
    std::atomic<AbsentFilter*> building{nullptr};  // hears of every key written
    std::unique_ptr<AbsentFilter> owned;           // the live one
  };
  // Starts the builder thread (none when the filters are off); kUnavailable
  // when the system refuses it.
  [[nodiscard]] Status StartKeyFilters();
  // The bytes of every filter, live or being built (StoreStats).
  uint64_t KeyFilterBytes() const REQUIRES_SHARED(rebuild_mu_);
  void KeyFiltersLoop() EXCLUDES(key_filters_mu_);
  // Builds one filter and makes it live, unless stopped or the scan failed.
  void BuildKeyFilter(KeyFilter* slot, bool projections) EXCLUDES(key_filters_mu_);
  void StopKeyFilters() EXCLUDES(key_filters_mu_);
  // Forgets every filter, and every build running now: for a reopen, after
  // which the database may hold keys no filter saw (key_filters.cc). The
  // next ingest asks for new ones.
  void DropKeyFilters() REQUIRES(rebuild_mu_);

 public:
  // Tests: waits until no filter build is pending or running, and returns
  // the live filters' capacities (0: none yet) and the projection filter's
  // generation.
  struct KeyFilterSizes {
    size_t dedup = 0, projections = 0;
    uint32_t projection_gen = 0;
  };
  KeyFilterSizes AwaitKeyFiltersForTesting() EXCLUDES(key_filters_mu_);

 private:
  // Replaces the profile; the caller holds `rebuild_mu_` exclusively (or is
  // Open, before anyone else can see the store).
  void SetProfile(Profile profile) REQUIRES(rebuild_mu_);

  Options options_;
  std::string path_;
  // The live profile. The store reads it under `rebuild_mu_` (shared or
  // exclusive); SetProfile swaps it under `rebuild_mu_` exclusively and
  // `profile_mu_`, so that profile() can hand out a snapshot without
  // waiting for a running rebuild.
  std::shared_ptr<const Profile> profile_ GUARDED_BY(rebuild_mu_);
  // RouteMembers(*profile_), for the ingest's decode; set with it.
  std::vector<std::string> route_members_ GUARDED_BY(rebuild_mu_);
  mutable Mutex profile_mu_;
  Clock* clock_;
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  // The Env of the store's databases (they must close first): the
  // options' Env, new logs' names synced, background work on a thread of
  // the store's own.
  std::unique_ptr<LogNameSyncEnv> log_name_env_;
  std::unique_ptr<BackgroundEnv> env_;
  std::unique_ptr<GuardedDb> db_;
  std::unique_ptr<CommitQueue> commit_queue_;
  BatchPool batch_pool_;  // the write batches of IngestTxns
  // Rebuilds take it with WriterLock; an ingest waits for a waiting rebuild
  // first (SharedMutex::WaitForWaitingWriters), so a steady ingest load
  // cannot starve the switch.
  SharedMutex rebuild_mu_;
  LockTable locks_;
  // Cleared wherever a dedup entry may stop answering as it did: a
  // compaction, a switch of generation, a recovery's reopen.
  RecentEvents recent_;
  std::atomic<uint64_t> next_seq_{1};
  // The highest arrival seq a successful write stored (Stats().last_seq).
  // Not next_seq_ - 1: a write that fails has taken its seqs, and the
  // reopen that follows gives them out again.
  std::atomic<uint64_t> last_stored_seq_{0};
  // The filters of stored event ids and of the live generation's
  // projection keys. Their pointers are swapped only under `rebuild_mu_`
  // held exclusively, so one read under it shared stays valid while the
  // lock is held (atomics: IngestTxn reads them too).
  KeyFilter dedup_filter_;
  KeyFilter projection_filter_;
  // Counts DropKeyFilters: a build publishes its filter only if no drop
  // came after its scan began.
  uint64_t key_filters_epoch_ GUARDED_BY(rebuild_mu_) = 0;
  Mutex key_filters_mu_;
  std::condition_variable key_filters_cv_;
  unsigned key_filters_wanted_ GUARDED_BY(key_filters_mu_) = 0;  // which to build
  bool key_filters_busy_ GUARDED_BY(key_filters_mu_) = false;
  std::atomic<bool> key_filters_stop_{false};
  std::atomic<bool> key_filters_failed_{false};  // a scan failed: build no more
  std::thread key_filters_thread_;
  // The live generations (storage/key_codec.h), and the routing epoch that
  // dedup entries' identities were computed under; they change only under
  // `rebuild_mu_` held exclusively.
  Generations gens_ GUARDED_BY(rebuild_mu_);
  uint32_t routing_epoch_ GUARDED_BY(rebuild_mu_) = 1;
  std::atomic<bool> rebuilding_{false};
  Mutex drop_mu_;
  std::thread drop_thread_ GUARDED_BY(drop_mu_);
  // Entries of the live unrouted index (g/<log gen>/u/): counted
  // at Open, added to by each ingest's commit under `rebuild_mu_` shared,
  // set by a rebuild's switch under it exclusively.
  std::atomic<uint64_t> unrouted_stored_{0};

  // Recovery (RecoveryLoop), guarded by recover_mu_: when the next attempt
  // is due (microseconds on the store's Clock; 0: no failure pending), the
  // delay after a failed attempt, whether one runs, and what ran.
  static constexpr int64_t kFirstRecoveryDelay = 1000 * 1000;
  static constexpr int64_t kMaxRecoveryDelay = 30 * 1000 * 1000;
  Mutex recover_mu_;
  std::condition_variable recover_cv_;
  int64_t recover_due_ GUARDED_BY(recover_mu_) = 0;
  int64_t recover_delay_ GUARDED_BY(recover_mu_) = kFirstRecoveryDelay;
  bool recovering_ GUARDED_BY(recover_mu_) = false;
  bool recover_stop_ GUARDED_BY(recover_mu_) = false;
  uint64_t recover_attempts_ GUARDED_BY(recover_mu_) = 0;
  uint64_t recover_successes_ GUARDED_BY(recover_mu_) = 0;
  std::thread recover_thread_;

  // Refused deliveries: a database of their own, written in the background
  // (quarantine_log.h). Created in Init, before any other thread runs.
  std::unique_ptr<QuarantineLog> quarantine_;
  // Moves refusals older builds kept in db_ (q/<seq>) into quarantine_.
  void MoveLegacyQuarantine();

  // Serializes TrimFeed with checkpoint writes: a subscription that
  // registers while a trim runs is either seen by the trim or sees its
  // result (subscription_state.cc).
  Mutex trim_mu_;

  // The subscriptions running on this store (ClaimSubscription).
  Mutex claims_mu_;
  std::set<std::string, std::less<>> claimed_subscriptions_ GUARDED_BY(claims_mu_);

  // Gc: one pass at a time. The background pass's thread, its stop flag,
  // and what it did (guarded by gc_thread_mu_).
  Mutex gc_mu_ ACQUIRED_BEFORE(rebuild_mu_, trim_mu_);
  Mutex gc_thread_mu_;
  std::condition_variable gc_cv_;
  bool gc_stop_ GUARDED_BY(gc_thread_mu_) = false;
  uint64_t gc_passes_ GUARDED_BY(gc_thread_mu_) = 0;
  std::optional<Result<GcSummary>> gc_last_ GUARDED_BY(gc_thread_mu_);
  std::thread gc_thread_;

  struct AtomicCounters {
    std::atomic<uint64_t> accepted{0}, duplicate{0}, conflict{0}, invalid{0}, too_large{0},
        storage_error{0}, unrouted{0}, late{0}, refolded{0}, quarantine_dropped{0},
        quarantine_headers_dropped{0};
  };
  mutable AtomicCounters counters_;
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORE_STORE_IMPL_H_
