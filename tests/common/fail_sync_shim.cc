// A disk whose log syncs start failing, for a command run as a child
// process: preloaded (LD_PRELOAD), it makes fsync and fdatasync fail with
// EIO for the write-ahead log of one store (a file named *.log directly in
// EVENTFOLD_FAIL_SYNC_DIR) once that log holds more than
// EVENTFOLD_FAIL_SYNC_ABOVE bytes: every sync that would make those bytes
// durable fails, whatever the order the command's threads sync in. Every
// other sync, and every sync when the variables are unset, goes to the C
// library. The fault Env does this for tests in-process; a command opens
// its store with the default Env, so its faults come from here.

#include <dlfcn.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace {

// True when this sync of `fd` is one to fail.
bool FailThisSync(int fd) {
  const char* dir = std::getenv("EVENTFOLD_FAIL_SYNC_DIR");
  const char* above = std::getenv("EVENTFOLD_FAIL_SYNC_ABOVE");
  if (dir == nullptr || above == nullptr) return false;
  char path[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(link.c_str(), path, sizeof path - 1);
  if (n <= 0) return false;
  const std::string file(path, static_cast<size_t>(n));
  const std::string prefix = std::string(dir) + "/";
  if (file.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string name = file.substr(prefix.size());
  if (name.find('/') != std::string::npos || name.size() < 4 ||
      name.compare(name.size() - 4, 4, ".log") != 0) {
    return false;
  }
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_size > std::atoll(above);
}

template <typename Fn>
Fn Real(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// `real(fd)`, unless this sync is one to fail.
int SyncOrFail(int fd, int (*real)(int)) {
  if (FailThisSync(fd)) {
    errno = EIO;
    return -1;
  }
  return real(fd);
}

}  // namespace

extern "C" int fsync(int fd) {
  static const auto real = Real<int (*)(int)>("fsync");
  return SyncOrFail(fd, real);
}

extern "C" int fdatasync(int fd) {
  static const auto real = Real<int (*)(int)>("fdatasync");
  return SyncOrFail(fd, real);
}
