// EnvOrDefault (storage/file_locks.h).

#include "storage/file_locks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <string>

#include "core/thread_annotations.h"

namespace eventfold::storage {
namespace {

// LevelDB's default Env, each lock file locked at most once in the process.
class OnceLockedEnv final : public leveldb::EnvWrapper {
 public:
  OnceLockedEnv() : leveldb::EnvWrapper(leveldb::Env::Default()) {}

  leveldb::Status LockFile(const std::string& name, leveldb::FileLock** lock) override {
    MutexLock l(&mu_);
    struct stat st;
    if (::stat(name.c_str(), &st) != 0) {
      if (errno != ENOENT) return target()->LockFile(name, lock);  // it says why
      // Made here, so that it has an inode to be known by. Closing this
      // descriptor drops no lock of ours: a file we hold exists, and every
      // lock of ours is taken under mu_.
      const int fd = ::open(name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) return target()->LockFile(name, lock);
      ::close(fd);
      if (::stat(name.c_str(), &st) != 0) return target()->LockFile(name, lock);
    }
    const FileId id{st.st_dev, st.st_ino};
    for (const auto& entry : held_) {
      if (entry.second == id) {
        return leveldb::Status::IOError("lock " + name, "already held by process");
      }
    }
    leveldb::Status s = target()->LockFile(name, lock);
    if (s.ok()) held_.emplace(*lock, id);
    return s;
  }

  leveldb::Status UnlockFile(leveldb::FileLock* lock) override {
    MutexLock l(&mu_);
    held_.erase(lock);
    return target()->UnlockFile(lock);
  }

 private:
  struct FileId {
    dev_t dev;
    ino_t ino;
    bool operator==(const FileId&) const = default;
  };
  Mutex mu_;
  std::map<leveldb::FileLock*, FileId> held_ GUARDED_BY(mu_);
};

}  // namespace

leveldb::Env* EnvOrDefault(leveldb::Env* env) {
  if (env != nullptr && env != leveldb::Env::Default()) return env;
  // Never destroyed, as LevelDB's default Env is not: a store may close
  // after static destructors have run.
  static OnceLockedEnv* const once_locked = new OnceLockedEnv;
  return once_locked;
}

}  // namespace eventfold::storage
