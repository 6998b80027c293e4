// A LevelDB directory without its CURRENT file (storage/missing_current.h).

#include "storage/missing_current.h"

#include <vector>

#include "core/leveldb_file_names.h"

namespace eventfold::storage {

Status RefuseDatabaseWithoutCurrent(leveldb::Env* env, const std::string& dir,
                                    const std::string& what, const std::string& store_dir) {
  if (env->FileExists(dir + "/CURRENT")) return Status::OK();
  std::vector<std::string> children;
  if (!env->GetChildren(dir, &children).ok()) return Status::OK();
  for (const std::string& name : children) {
    if (IsLevelDbDataFileName(name)) {
      return Status::Corruption("opening " + what + " " + dir + ": it holds a database's files (" +
                                name + ") but no CURRENT file, so it is damaged; nothing was " +
                                "changed: `eventfold repair --data " + store_dir + "` salvages it");
    }
  }
  return Status::OK();
}

}  // namespace eventfold::storage
