// The one place LevelDB's status becomes ours.

#ifndef EVENTFOLD_STORAGE_LEVELDB_STATUS_H_
#define EVENTFOLD_STORAGE_LEVELDB_STATUS_H_

#include <leveldb/status.h>

#include <string_view>

#include "eventfold/status.h"

namespace eventfold::storage {

// Maps a LevelDB status, prefixing `context`. A LOCK file another holds
// becomes kBusy; one that cannot be opened stays an I/O error.
Status FromLevelDb(const leveldb::Status& s, std::string_view context);

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_LEVELDB_STATUS_H_
