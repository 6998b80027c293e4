#include "storage/leveldb_status.h"

#include <string>

namespace eventfold::storage {

Status FromLevelDb(const leveldb::Status& s, std::string_view context) {
  if (s.ok()) return Status::OK();
  std::string msg(context);
  msg += ": ";
  msg += s.ToString();
  if (s.IsNotFound()) return Status::NotFound(msg);
  if (s.IsCorruption()) return Status::Corruption(msg);
  if (s.IsInvalidArgument()) return Status::InvalidArgument(msg);
  // LevelDB's LockFile says "lock DIR/LOCK: ..." when the lock is held (by
  // this process or another); it names the file alone when it could not
  // even open it (no directory, no permission), which is no reason to wait.
  if (s.IsIOError() && s.ToString().rfind("IO error: lock ", 0) == 0 &&
      msg.find("/LOCK") != std::string::npos) {
    return Status::Busy(msg + " (is another process using this store?)");
  }
  return Status::IOError(msg);
}

}  // namespace eventfold::storage
