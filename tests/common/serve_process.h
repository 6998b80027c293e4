// `eventfold serve` as a child process for end-to-end tests: spawned with
// stdout to /dev/null and stderr to a log file, started when its "listening
// on" line appears (bounded wait), killed in the destructor if still up.

#ifndef EVENTFOLD_TESTS_COMMON_SERVE_PROCESS_H_
#define EVENTFOLD_TESTS_COMMON_SERVE_PROCESS_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/run_cli.h"

namespace eventfold::test_util {

// `cli serve --data DIR --listen 127.0.0.1:0 EXTRA...`.
class ServerProcess {
 public:
  ServerProcess(std::string cli, std::string data_dir, const std::string& scratch)
      : cli_(std::move(cli)),
        data_dir_(std::move(data_dir)),
        stderr_path_(scratch + "/serve-stderr.log") {}
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // Spawns the server and waits (bounded) for its "listening on" line.
  ::testing::AssertionResult Start(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {cli_, "serve", "--data", data_dir_, "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&pid_, cli_.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      return ::testing::AssertionFailure() << "posix_spawn: " << strerror(rc);
    }
    const std::string marker = "listening on 127.0.0.1:";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string log = ReadFile(stderr_path_);
      const size_t at = log.find(marker);
      if (at != std::string::npos) {
        port_ = std::atoi(log.c_str() + at + marker.size());
        if (port_ > 0) return ::testing::AssertionSuccess();
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return ::testing::AssertionFailure() << "serve exited early: " << log;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // bounded startup poll
    }
    return ::testing::AssertionFailure()
           << "no \"listening on\" within 10 s: " << ReadFile(stderr_path_);
  }

  void Signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }

  // Waits (bounded) for the process to exit; its exit code, -1 otherwise.
  int Wait(std::chrono::seconds limit = std::chrono::seconds(15)) {
    if (pid_ <= 0) return -1;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // bounded exit poll
    }
    return -1;
  }

  int Stop() {
    Signal(SIGTERM);
    return Wait();
  }

  int port() const { return port_; }
  // The admin listener's port from its "admin API on HOST:PORT" line; 0
  // when there is none.
  int admin_port() const {
    const std::string log = ReadFile(stderr_path_);
    const std::string marker = "admin API on 127.0.0.1:";
    const size_t at = log.find(marker);
    return at == std::string::npos ? 0 : std::atoi(log.c_str() + at + marker.size());
  }
  std::string log() const { return ReadFile(stderr_path_); }
  std::string url(const std::string& path = "/hooks") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  std::string cli_, data_dir_, stderr_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_SERVE_PROCESS_H_
