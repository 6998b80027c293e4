// SyncDir (storage/dir_sync.h).

#include "storage/dir_sync.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "storage/leveldb_status.h"

namespace eventfold::storage {

namespace {

leveldb::Status PosixSyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    // Not a directory of the file system: an Env that keeps its files
    // elsewhere (in memory) has no entries here to make durable.
    if (errno == ENOENT || errno == ENOTDIR) return leveldb::Status::OK();
    return leveldb::Status::IOError("opening it", std::strerror(errno));
  }
  int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // EINVAL: a file system that has no directory sync (it keeps entries
  // another way); nothing more can be asked of it.
  if (rc != 0 && err != EINVAL) return leveldb::Status::IOError("fsync", std::strerror(err));
  return leveldb::Status::OK();
}

}  // namespace

leveldb::Status SyncDirOf(leveldb::Env* env, const std::string& dir) {
  if (auto* own = dynamic_cast<DirSyncEnv*>(env)) return own->SyncDir(dir);
  return PosixSyncDir(dir);
}

Status SyncDir(leveldb::Env* env, const std::string& dir) {
  return FromLevelDb(SyncDirOf(env, dir), "syncing the directory " + dir);
}

leveldb::Status LogNameSyncEnv::NewWritableFile(const std::string& name,
                                                leveldb::WritableFile** file) {
  leveldb::Status s = target()->NewWritableFile(name, file);
  if (!s.ok() || !name.ends_with(".log")) return s;
  s = SyncDirOf(target(), ParentDir(name));
  if (!s.ok()) {
    delete *file;
    *file = nullptr;
  }
  return s;
}

leveldb::Status LogNameSyncEnv::SyncDir(const std::string& dir) { return SyncDirOf(target(), dir); }

std::string ParentDir(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

}  // namespace eventfold::storage
