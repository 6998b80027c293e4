// LongScan: the records under one key prefix, in key order, for a scan that
// writes to the same database as it goes (a rebuild's copy, a generation's
// drop).
//
// A LevelDB iterator holds the memtable that was current when it was made
// until the iterator is destroyed. A scan that writes fills that very
// memtable, so one iterator kept for the whole scan pins a full write
// buffer beside the two LevelDB keeps: at 1M events that was a third of a
// rebuild's peak memory. LongScan makes a fresh iterator every
// kRefreshEvery records (on the same snapshot, if any) and drops it at the
// end, so memory does not grow with the length of the scan.
//
// Without a snapshot the scan reads the latest state: a key the scan itself
// deleted before a refresh is not seen again, and records written under the
// prefix while scanning may or may not be. Not thread-safe; the database and
// the snapshot must outlive it.

#ifndef EVENTFOLD_STORAGE_LONG_SCAN_H_
#define EVENTFOLD_STORAGE_LONG_SCAN_H_

#include <leveldb/db.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "eventfold/status.h"

namespace eventfold::storage {

class LongScan {
 public:
  static constexpr uint64_t kRefreshEvery = 16384;

  // `context` prefixes the text of a read error.
  LongScan(leveldb::DB* db, const leveldb::Snapshot* snapshot, std::string prefix,
           std::string context);

  // Moves to the first record (on the first call) or the next one: true
  // while there is one under the prefix. At the end (or on a read error)
  // the iterator is released, and status() tells which it was.
  bool Next();

  // The current record; valid until the next call of Next.
  std::string_view key() const;
  std::string_view value() const;

  // The first read error, or OK.
  Status status() const;

 private:
  void Refresh();

  leveldb::DB* const db_;
  const leveldb::Snapshot* const snapshot_;
  const std::string prefix_;
  const std::string context_;
  std::unique_ptr<leveldb::Iterator> it_;
  Status status_;  // once it_ is gone
  uint64_t since_refresh_ = 0;
  bool started_ = false;
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_LONG_SCAN_H_
