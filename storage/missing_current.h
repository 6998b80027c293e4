// RefuseDatabaseWithoutCurrent: a LevelDB directory that lost its CURRENT
// file is damaged, not new.
//
// CURRENT names a database's live MANIFEST. Without it LevelDB takes the
// directory for a new database when the open may create one: it writes a
// fresh MANIFEST and deletes every table and log as files no MANIFEST
// names. So every open that may create (a store's, its quarantine's) asks
// here first, and a directory holding LevelDB's data files but no CURRENT
// is refused with the repair that salvages it. A creation cut short before
// CURRENT leaves no data file, and is created again.
//
// Thread-safety: as the Env; it only reads the directory.

#ifndef EVENTFOLD_STORAGE_MISSING_CURRENT_H_
#define EVENTFOLD_STORAGE_MISSING_CURRENT_H_

#include <leveldb/env.h>

#include <string>

#include "eventfold/status.h"

namespace eventfold::storage {

// OK when `dir` has a CURRENT file, holds none of LevelDB's data files, or
// cannot be listed (the open that follows says why). Otherwise
// kCorruption: "opening <what> <dir>: it holds a database's files (<name>)
// but no CURRENT file, ..." naming `eventfold repair --data <store_dir>`.
// Changes nothing.
[[nodiscard]] Status RefuseDatabaseWithoutCurrent(leveldb::Env* env, const std::string& dir,
                                                  const std::string& what,
                                                  const std::string& store_dir);

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_MISSING_CURRENT_H_
