// SyncDir: makes a directory's entries durable, so that a file created,
// renamed or removed in it is still there (or still gone) after a power cut,
// not only its bytes.
//
// leveldb::Env has no call for this: LevelDB's POSIX Env syncs a directory
// only for its own MANIFEST, inside the file's Sync. The files eventfold
// writes beside LevelDB's (the repair journal, a backup's or a restore's
// directory in its parent, a table rewritten in place) would otherwise rely
// on the file system committing their names with something else. So:
//  - an Env that derives from DirSyncEnv is asked (tests record the calls and
//    model what a power cut keeps);
//  - any other Env gets the POSIX call, open(O_DIRECTORY) and fsync, on the
//    same path: the default Env, and an Env wrapping it, are covered; a
//    directory the file system does not have (an in-memory Env's) has no
//    entries there to sync, which is not an error.
//
// Thread-safety: SyncDir is safe to call from many threads.

#ifndef EVENTFOLD_STORAGE_DIR_SYNC_H_
#define EVENTFOLD_STORAGE_DIR_SYNC_H_

#include <leveldb/env.h>

#include <string>

#include "eventfold/status.h"

namespace eventfold::storage {

// An Env that knows how to sync a directory of its own.
class DirSyncEnv : public leveldb::EnvWrapper {
 public:
  using leveldb::EnvWrapper::EnvWrapper;
  // Makes the entries of `dir` durable: OK, or the error that prevented it.
  virtual leveldb::Status SyncDir(const std::string& dir) = 0;
};

// Makes the entries of `dir` durable through `env` (nullptr: the default
// Env), as described above. On failure returns kIOError naming `dir`.
[[nodiscard]] Status SyncDir(leveldb::Env* env, const std::string& dir);

// The same in LevelDB's terms, for an Env that wraps another and forwards.
leveldb::Status SyncDirOf(leveldb::Env* env, const std::string& dir);

// The directory that holds `path` ("." for a bare name).
std::string ParentDir(const std::string& path);

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_DIR_SYNC_H_
