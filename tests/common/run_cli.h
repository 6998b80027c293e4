// Runs the `eventfold` binary as a child process for end-to-end tests:
// stdin from a file, stdout and stderr captured, the exit code reported.

#ifndef EVENTFOLD_TESTS_COMMON_RUN_CLI_H_
#define EVENTFOLD_TESTS_COMMON_RUN_CLI_H_

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace eventfold::test_util {

struct CliResult {
  bool started = false;  // false: the spawn failed, and err says why
  int exit_code = -1;    // -1: killed by a signal
  std::string out;
  std::string err;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// The lines of `text`, without their newlines.
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Starts `binary args...` with stdin from `stdin_path` and stdout and stderr
// written to the two files (created or truncated); its pid, or -1 with
// *error (when given) set to posix_spawn's error.
inline pid_t SpawnCli(const std::string& binary, const std::vector<std::string>& args,
                      const std::string& stdin_path, const std::string& out_path,
                      const std::string& err_path, int* error = nullptr) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, stdin_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (error != nullptr) *error = rc;
  return rc == 0 ? pid : -1;
}

// How long one command may run in RunCli before it is killed: a command
// that hangs (say a `serve` a test expected to refuse its flags) fails its
// test with a clear message instead of outliving it.
inline constexpr int kCliTimeoutSeconds = 600;

// Runs `binary args...` with stdin from `stdin_path`; stdout and stderr go
// through `scratch_prefix`.out/.err, removed afterwards. Under coreutils'
// `timeout`: killed after kCliTimeoutSeconds (exit code 124, and err says
// so).
inline CliResult RunCli(const std::string& binary, const std::vector<std::string>& args,
                        const std::string& scratch_prefix,
                        const std::string& stdin_path = "/dev/null") {
  const std::string out_path = scratch_prefix + ".out", err_path = scratch_prefix + ".err";
  CliResult r;
  int rc = 0;
  std::vector<std::string> bounded = {"-k", "10", std::to_string(kCliTimeoutSeconds), binary};
  bounded.insert(bounded.end(), args.begin(), args.end());
  const pid_t pid = SpawnCli("/usr/bin/timeout", bounded, stdin_path, out_path, err_path, &rc);
  if (pid < 0) {
    r.err = "posix_spawn " + binary + ": error " + std::to_string(rc);
    return r;
  }
  r.started = true;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(out_path);
  r.err = ReadFile(err_path);
  if (r.exit_code == 124) {
    r.err += "(killed: still running after " + std::to_string(kCliTimeoutSeconds) + " s)\n";
  }
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return r;
}

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_RUN_CLI_H_
