// Forks a child process for the crash tests, with a pipe from it to the
// parent (how far the child got, what it acknowledged).
//
// Stdio is flushed first, so the child does not print the parent's buffered
// output a second time. The child runs `child(write_fd)`, which must end the
// process itself (it is [[noreturn]] in every test); should it return, the
// child exits 127.

#ifndef EVENTFOLD_TESTS_COMMON_FORK_CHILD_H_
#define EVENTFOLD_TESTS_COMMON_FORK_CHILD_H_

#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace eventfold::test_util {

struct ForkedChild {
  pid_t pid = -1;       // -1: pipe or fork failed (a test failure was added)
  int from_child = -1;  // the pipe's read end, owned by the caller
};

template <typename ChildMain>
ForkedChild ForkWithPipe(ChildMain&& child) {
  ForkedChild forked;
  int fds[2];
  if (::pipe(fds) != 0) {
    ADD_FAILURE() << "pipe failed";
    return forked;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    ::close(fds[0]);
    ::close(fds[1]);
    return forked;
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1]);
    std::_Exit(127);
  }
  ::close(fds[1]);
  forked.pid = pid;
  forked.from_child = fds[0];
  return forked;
}

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_FORK_CHILD_H_
