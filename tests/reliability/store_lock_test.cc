// One store directory, one open in the process, however it is spelled, and
// a refused second open leaves the first one's lock held against other
// processes (storage/file_locks.h).
//
// LevelDB's own check of a second lock in one process opened the LOCK file
// and closed it to refuse, which dropped the process's fcntl lock: after a
// refused second Store::Open, another process could lock the directory of
// the store still running. Its check compared names, so the directory
// spelled as DIR/. opened a second database on the same files. Forks a
// child to try the lock as another process, so its own binary.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <string>

#include "eventfold/repair.h"
#include "eventfold/store.h"
#include "tests/common/scratch_dir.h"

namespace eventfold::reliability {
namespace {

using test_util::ScratchDir;

// Whether another process is refused the fcntl lock LevelDB takes on
// `lock_file` (the whole file, for writing).
bool AnotherProcessIsRefused(const std::string& lock_file) {
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(lock_file.c_str(), O_RDWR);
    if (fd < 0) ::_exit(2);
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    const int rc = ::fcntl(fd, F_SETLK, &fl);
    ::_exit(rc == -1 && (errno == EAGAIN || errno == EACCES) ? 0 : 1);
  }
  int wstatus = 0;
  if (child < 0 || ::waitpid(child, &wstatus, 0) != child || !WIFEXITED(wstatus)) {
    ADD_FAILURE() << "the probing child did not run";
    return false;
  }
  EXPECT_NE(WEXITSTATUS(wstatus), 2) << "the child could not open " << lock_file;
  return WEXITSTATUS(wstatus) == 0;
}

TEST(StoreLock, ASecondOpenInTheProcessIsBusyAndTheFirstKeepsItsLock) {
  ScratchDir scratch("store-lock");
  const std::string dir = scratch.path() + "/store";
  std::filesystem::create_directories(scratch.path());
  std::filesystem::create_directory_symlink(dir, scratch.path() + "/link");
  Result<std::unique_ptr<Store>> first = Store::Open(dir, Options{});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(AnotherProcessIsRefused(dir + "/LOCK")) << "before any second open";

  for (const std::string& spelling : {dir, dir + "/.", scratch.path() + "/link"}) {
    SCOPED_TRACE(spelling);
    Result<std::unique_ptr<Store>> second = Store::Open(spelling, Options{});
    EXPECT_TRUE(second.status().IsBusy()) << second.status().ToString();
    EXPECT_TRUE(AnotherProcessIsRefused(dir + "/LOCK")) << "the first store's lock is gone";
  }

  // Nor does a refused repair (which would rewrite the running store's
  // files) let go of it.
  for (const std::string& spelling : {dir, dir + "/."}) {
    SCOPED_TRACE("repair of " + spelling);
    Result<RepairSummary> repaired = RepairStore(spelling, Options{}, [](const LostData&) {});
    EXPECT_TRUE(repaired.status().IsBusy()) << repaired.status().ToString();
    EXPECT_TRUE(AnotherProcessIsRefused(dir + "/LOCK")) << "after a refused repair";
  }

  first->reset();
  EXPECT_FALSE(AnotherProcessIsRefused(dir + "/LOCK")) << "the closed store still holds it";
  Result<std::unique_ptr<Store>> again = Store::Open(scratch.path() + "/link", Options{});
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

}  // namespace
}  // namespace eventfold::reliability
