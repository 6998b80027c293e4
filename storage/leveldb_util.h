// Small LevelDB idioms shared by the storage and replay code: a slice as a
// string_view, the options of a synced write, those of a long scan, an
// owned snapshot, and the compaction that follows a large deletion.

#ifndef EVENTFOLD_STORAGE_LEVELDB_UTIL_H_
#define EVENTFOLD_STORAGE_LEVELDB_UTIL_H_

#include <leveldb/db.h>
#include <leveldb/options.h>
#include <leveldb/slice.h>

#include <string>
#include <string_view>
#include <utility>

#include "storage/key_codec.h"

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

// Compacts the range of the keys under `prefix`, after a large deletion
// there. LevelDB keeps a deletion until a compaction reaches it, and a seek
// that lands in front of deleted keys steps over each one: every Open seeks
// into g/ and past the end of f/, and after a re-routing rebuild of a
// million events (its old generation dropped) that was 1.0-1.3 s a seek,
// after a migration of as many (its old keys rewritten) 0.6 s, for as long
// as LevelDB left the range alone. Compacting drops the deletions with the
// values they delete, unless a reader's snapshot still needs them (then a
// later compaction does). Blocks until done; a failure is LevelDB's
// background error, which the next write reports.
inline void CompactPrefix(leveldb::DB* db, std::string_view prefix) {
  const std::string begin(prefix), end = PrefixEnd(prefix);
  const leveldb::Slice b(begin), e(end);
  db->CompactRange(&b, end.empty() ? nullptr : &e);  // empty: no end bound
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
