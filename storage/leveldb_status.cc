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
  if (s.IsIOError() && msg.find("/LOCK") != std::string::npos) {
    return Status::Busy(msg + " (is another process using this store?)");
  }
  return Status::IOError(msg);
}

}  // namespace eventfold::storage
