// Whole-or-nothing small files beside the partition stores
// (cluster/marker_file.h).

#include "cluster/marker_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace eventfold::cluster {
namespace {

Status Errno(const std::string& what, int err) {
  return Status::IOError(what + ": " + std::strerror(err));
}

// The directory part of `path` ("." for a bare name).
std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status WriteAll(int fd, std::string_view text, const std::string& name) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("writing " + name, errno);
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

}  // namespace

Status ReplaceFile(const std::string& path, std::string_view text, bool sync) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("creating " + tmp, errno);
  Status st = WriteAll(fd, text, tmp);
  if (st.ok() && sync && ::fdatasync(fd) != 0) st = Errno("syncing " + tmp, errno);
  if (::close(fd) != 0 && st.ok()) st = Errno("closing " + tmp, errno);
  if (!st.ok()) return st;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Errno("renaming " + tmp + " to " + path, errno);
  }
  if (!sync) return Status::OK();
  const std::string dir = DirOf(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Errno("opening the directory " + dir, errno);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  // EINVAL: a file system without directory syncs (nothing to make durable).
  if (rc != 0 && err != EINVAL) return Errno("syncing the directory " + dir, err);
  return Status::OK();
}

}  // namespace eventfold::cluster
