// A LevelDB directory without its CURRENT file (storage/missing_current.h).

#include "storage/missing_current.h"

#include <vector>

#include "core/leveldb_file_names.h"

namespace eventfold::storage {

Status RefuseDatabaseWithoutCurrent(leveldb::Env* env, const std::string& dir,
                                    const std::string& what, const std::string& store_dir) {
  std::vector<std::string> children;
  if (!env->GetChildren(dir, &children).ok()) return Status::OK();
  const std::string data = DataFileWithoutCurrent(children);
  if (data.empty()) return Status::OK();
  return Status::Corruption("opening " + what + " " + dir + ": it holds a database's files (" +
                            data + ") but no CURRENT file, so it is damaged; nothing was " +
                            "changed: `eventfold repair --data " + store_dir + "` salvages it");
}

}  // namespace eventfold::storage
