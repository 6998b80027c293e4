// Small LevelDB idioms shared by the storage and replay code: a slice as a
// string_view, the options of a synced write, and those of a long scan.

#ifndef EVENTFOLD_STORAGE_LEVELDB_UTIL_H_
#define EVENTFOLD_STORAGE_LEVELDB_UTIL_H_

#include <leveldb/options.h>
#include <leveldb/slice.h>

#include <string_view>

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

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_LEVELDB_UTIL_H_
