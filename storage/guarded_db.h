// GuardedDb: a leveldb::DB that stops writing after its first failed write,
// and can reopen the database in place.
//
// LevelDB 1.23 keeps a failed *sync* as a sticky error, but not a failed log
// *append*: the next writes succeed while the log holds a torn record, and the
// next open drops every record after it — acknowledged ones included. So after
// any failed write this wrapper refuses all further writes (the store answers
// 503 and the sender retries) until the database is reopened, which replays
// the log up to the last intact record: nothing acknowledged is lost, and what
// was refused is retried. Reads keep working. Forwards everything else.
//
// Reopen() closes and reopens the database in place (the store retries it in
// the background on its Clock once a write failed: StoreImpl::RecoveryLoop).
// It waits until no call, iterator or snapshot uses the database — every one
// is counted — and new ones wait meanwhile. When the disk fails the reopen,
// the database is opened again for reading only (reusing its log and
// manifest, through an Env that refuses every change: storage/
// read_only_env.h), so reads keep working while writes stay refused until
// a later Reopen succeeds.
//
// Thread-safe, as leveldb::DB is. Writes are serialized here (the store's
// commit queue issues them one at a time anyway), so none can slip in behind
// a failed one.

#ifndef EVENTFOLD_STORAGE_GUARDED_DB_H_
#define EVENTFOLD_STORAGE_GUARDED_DB_H_

#include <leveldb/db.h>
#include <leveldb/options.h>
#include <leveldb/write_batch.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/thread_annotations.h"
#include "eventfold/clock.h"

namespace eventfold::storage {

class GuardedDb final : public leveldb::DB {
 public:
  // Guards `inner`; without `options` and `path` it cannot be reopened.
  explicit GuardedDb(leveldb::DB* inner) : inner_(inner) {}
  // Guards `inner`, opened at `path` with `options` (whose pointees must
  // outlive this object), so that Reopen() can open it again.
  GuardedDb(leveldb::DB* inner, const leveldb::Options& options, std::string path);
  ~GuardedDb() override;

  // True once a write has failed; every write is refused until a Reopen.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // True after a Reopen that closed the database but could open it neither
  // for writing nor for reading: every call fails until a later Reopen
  // succeeds.
  bool closed() const { return inner_.load() == nullptr; }
  // True while the database is the one opened for reads after a failed
  // reopen. Its open replayed the whole log, writes whose sync failed
  // included: what it reads may not be durable.
  bool read_only() const { return read_only_.load(std::memory_order_acquire); }

  // Stops writes as a failed write does (failed() until a Reopen) and tells
  // the listener: for a caller that finds the database it reopened unfit to
  // write to.
  void StopWrites() EXCLUDES(write_mu_);

  // Called after each write that fails (with the write path's lock held, so
  // it must not write); set before the database is shared.
  void SetFailureListener(std::function<void()> listener) { on_failure_ = std::move(listener); }

  // Closes the database and opens it again, once nothing uses it: waits
  // until `clock` has moved `wait_micros` for running calls, iterators and
  // snapshots to end (new ones wait meanwhile), else gives up with an
  // IOError leaving all as it was. The wait is on the caller's Clock, so a
  // reader descheduled on a busy machine cannot make a test's reopen give
  // up. Clears failed() on success. When the open fails the database is
  // opened for reads only (failed() stays set); closed() when that fails
  // too.
  leveldb::Status Reopen(const Clock& clock, int64_t wait_micros);

  leveldb::Status Put(const leveldb::WriteOptions& options, const leveldb::Slice& key,
                      const leveldb::Slice& value) override;
  leveldb::Status Delete(const leveldb::WriteOptions& options, const leveldb::Slice& key) override;
  leveldb::Status Write(const leveldb::WriteOptions& options,
                        leveldb::WriteBatch* updates) override;
  // A best-effort write for diagnostics (the quarantine): unsynced, and it
  // never waits behind another write (a synced commit may hold the write
  // path for a disk sync). Returns false, writing nothing, when another
  // write is running or writes are stopped (failed()); else true with the
  // write's status in `*status`. A failure stops writes like any other: a
  // failed append may leave a torn record in LevelDB's log, and any write
  // after it would be lost on the next open.
  bool TryWrite(leveldb::WriteBatch* updates, leveldb::Status* status);
  leveldb::Status Get(const leveldb::ReadOptions& options, const leveldb::Slice& key,
                      std::string* value) override;
  leveldb::Iterator* NewIterator(const leveldb::ReadOptions& options) override;
  // nullptr while closed(); ReleaseSnapshot accepts it.
  const leveldb::Snapshot* GetSnapshot() override;
  void ReleaseSnapshot(const leveldb::Snapshot* snapshot) override;
  bool GetProperty(const leveldb::Slice& property, std::string* value) override;
  void GetApproximateSizes(const leveldb::Range* range, int n, uint64_t* sizes) override;
  void CompactRange(const leveldb::Slice* begin, const leveldb::Slice* end) override;

 private:
  struct ReopenWith {
    leveldb::Options options;
    std::string path;
  };

  // Counts one use of the database (a call, an iterator, a snapshot) and
  // returns it; nullptr, counting nothing, while closed().
  leveldb::DB* Enter();
  void Leave();
  static void LeaveCleanup(void* self, void*);
  // Marks writes failed and tells the listener.
  void Fail() REQUIRES(write_mu_);

  std::atomic<leveldb::DB*> inner_;  // owned
  const std::optional<ReopenWith> reopen_;
  // The Env of a database opened for reads only after a failed reopen;
  // outlives it (the destructor closes the database first).
  std::unique_ptr<leveldb::Env> read_only_env_;

  // One write at a time, so the failure flag is exact; Reopen holds it
  // while it takes gate_mu_. The failure listener takes its own locks
  // (the store's recover_mu_) after it.
  Mutex write_mu_ ACQUIRED_BEFORE(gate_mu_);
  std::atomic<bool> failed_{false};
  std::atomic<bool> read_only_{false};
  std::function<void()> on_failure_;

  std::atomic<int64_t> active_{0};      // uses of inner_ in progress
  std::atomic<bool> reopening_{false};  // new uses wait while set
  Mutex gate_mu_;
  std::condition_variable gate_cv_;
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_GUARDED_DB_H_
