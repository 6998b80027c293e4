// SyncDir: makes a directory's entries durable, so that a file created,
// renamed or removed in it is still there (or still gone) after a power cut,
// not only its bytes.
//
// leveldb::Env has no call for this (LevelDB's POSIX Env syncs a directory
// only for its own MANIFEST), so eventfold syncs the directories it depends
// on itself: the store directory once LevelDB has opened it, the name of
// each new write-ahead log (LogNameSyncEnv), and every name a backup,
// restore or repair writes. For an Env that derives from DirSyncEnv it calls
// SyncDir (tests record the calls and model what a power cut keeps); for
// any other Env it makes the POSIX call, open(O_DIRECTORY) and fsync, on
// the same path, which covers LevelDB's default Env and Envs that wrap it,
// and is nothing for a directory the file system does not have (an
// in-memory Env's).
//
// Thread-safety: SyncDir is safe to call from many threads.

#ifndef EVENTFOLD_STORAGE_DIR_SYNC_H_
#define EVENTFOLD_STORAGE_DIR_SYNC_H_

#include <leveldb/env.h>

#include <string>

#include "eventfold/status.h"

namespace eventfold::storage {

// An Env that knows what a directory sync is for the files it keeps.
class DirSyncEnv : public leveldb::EnvWrapper {
 public:
  using leveldb::EnvWrapper::EnvWrapper;
  // Makes the entries of `dir` durable: OK, or the error that prevented it,
  // which fails the operation that asked.
  virtual leveldb::Status SyncDir(const std::string& dir) = 0;
};

// The Env a store's own LevelDB runs on: `target`, except that the name of
// each write-ahead log LevelDB makes (at the open, and at each memtable
// switch) is synced as soon as the file exists, before any write reaches
// it. LevelDB itself records a new log in its MANIFEST (whose sync syncs
// the directory) only once the memtable before it is flushed; until then
// an acknowledged, synced write would sit in a file whose name a power cut
// could take. One directory sync per memtable switch. A failed sync fails
// the log's creation, which LevelDB takes as a write error.
class LogNameSyncEnv : public DirSyncEnv {
 public:
  explicit LogNameSyncEnv(leveldb::Env* target) : DirSyncEnv(target) {}
  leveldb::Status NewWritableFile(const std::string& name, leveldb::WritableFile** file) override;
  leveldb::Status SyncDir(const std::string& dir) override;
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
