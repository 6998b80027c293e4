// Small LevelDB idioms shared by the storage and replay code: a slice as a
// string_view, the options of a synced write, those of a long scan, and an
// owned snapshot.

#ifndef EVENTFOLD_STORAGE_LEVELDB_UTIL_H_
#define EVENTFOLD_STORAGE_LEVELDB_UTIL_H_

#include <leveldb/db.h>
#include <leveldb/options.h>
#include <leveldb/slice.h>

#include <string_view>
#include <utility>

namespace eventfold::storage {

inline std::string_view View(const leveldb::Slice& s) { return {s.data(), s.size()}; }

inline leveldb::WriteOptions Synced() {
  leveldb::WriteOptions wo;
  wo.sync = true;
  return wo;
}

// A scan over many records: reading them must not evict the block cache's
// hot blocks. Reads `snapshot` when given, else the latest state.
inline leveldb::ReadOptions ScanOptions(const leveldb::Snapshot* snapshot = nullptr) {
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  ro.snapshot = snapshot;
  return ro;
}

// Owns one snapshot of `db` and releases it when destroyed, so an early
// return or an exception thrown by a caller's callback cannot leak it (a
// leaked snapshot of the guarded handle blocks its Reopen forever). Holds
// nothing when default-constructed or moved from; get() may be nullptr (a
// closed GuardedDb hands out none, and reads then fail on their own). Not
// thread-safe; the database must outlive the guard.
class SnapshotGuard {
 public:
  SnapshotGuard() = default;
  explicit SnapshotGuard(leveldb::DB* db) : db_(db), snapshot_(db->GetSnapshot()) {}
  ~SnapshotGuard() { Release(); }
  SnapshotGuard(SnapshotGuard&& o) noexcept
      : db_(std::exchange(o.db_, nullptr)), snapshot_(std::exchange(o.snapshot_, nullptr)) {}
  SnapshotGuard& operator=(SnapshotGuard&& o) noexcept {
    if (this != &o) {
      Release();
      db_ = std::exchange(o.db_, nullptr);
      snapshot_ = std::exchange(o.snapshot_, nullptr);
    }
    return *this;
  }
  SnapshotGuard(const SnapshotGuard&) = delete;
  SnapshotGuard& operator=(const SnapshotGuard&) = delete;

  const leveldb::Snapshot* get() const { return snapshot_; }

  // Releases the snapshot now (it is idempotent).
  void Release() {
    if (snapshot_ != nullptr) db_->ReleaseSnapshot(snapshot_);
    snapshot_ = nullptr;
  }

 private:
  leveldb::DB* db_ = nullptr;
  const leveldb::Snapshot* snapshot_ = nullptr;
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_LEVELDB_UTIL_H_
