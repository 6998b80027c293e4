// DbCopy: writes every record of one LevelDB snapshot into a new LevelDB, and
// reads a database back to prove it holds exactly those records — the body
// of Store::Backup (store/backup.cc).
//
// The copy goes in key order, in bounded batches (LevelDB gets ascending keys
// only), unsynced but for the last write; the new database is then compacted
// into tables (synced by LevelDB) so the copy needs no log replay, and closed.
// Memory stays bounded by one batch. Each record's key and value feed a
// digest, compared when the copy is read back.

#ifndef EVENTFOLD_REPLAY_DB_COPY_H_
#define EVENTFOLD_REPLAY_DB_COPY_H_

#include <leveldb/db.h>
#include <leveldb/env.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "eventfold/status.h"

namespace eventfold {

struct DbDigest {
  uint64_t records = 0;
  uint64_t bytes = 0;  // keys and values
  uint64_t hash = 0;   // of every key and value, in order
  bool operator==(const DbDigest&) const = default;
};

// Copies `snapshot` of `src` (nullptr: now) into a new database at `out`,
// created there (fails if one exists), through `env` (nullptr: default).
// kUnavailable, the copy unfinished, once `abandon` (when given) turns true:
// it is checked after each batch written.
Result<DbDigest> CopyDatabase(leveldb::DB* src, const leveldb::Snapshot* snapshot,
                              const std::string& out, leveldb::Env* env,
                              const std::atomic<bool>* abandon = nullptr);

// Reads every record of the closed database at `dir`, checksums verified.
// kUnavailable once `abandon` (when given) turns true, checked every 4,096
// records.
Result<DbDigest> DigestDatabase(const std::string& dir, leveldb::Env* env,
                                const std::atomic<bool>* abandon = nullptr);

// The status of a copy or read stopped by its `abandon` flag.
Status Abandoned();

// Whether the closed database at `dir` holds a record under `key`.
Result<bool> DatabaseHoldsKey(const std::string& dir, leveldb::Env* env, const std::string& key);

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_DB_COPY_H_
