// CopyStoreAside and RemoveStoreCopy (eventfold/repair.h).

#include <filesystem>
#include <string>
#include <system_error>

#include "eventfold/repair.h"
#include "storage/scratch_space.h"

namespace eventfold {

Result<std::string> CopyStoreAside(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string copy = fs::path(dir).lexically_normal().string() + ".check-copy";
  leveldb::Env* env = leveldb::Env::Default();
  Status st = storage::ClaimScratch(env, copy);
  if (!st.ok()) return st;
  std::error_code ec;
  fs::copy(dir, copy, fs::copy_options::recursive, ec);
  if (ec) {
    (void)storage::ReleaseScratch(env, copy);
    return Status::IOError("copying the store to " + copy + ": " + ec.message());
  }
  return copy;
}

Status RemoveStoreCopy(const std::string& copy) {
  return storage::ReleaseScratch(leveldb::Env::Default(), copy);
}

}  // namespace eventfold
