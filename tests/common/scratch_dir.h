// Scratch directories for tests that need a real file system.
//
// ScratchDir names a fresh path under the system temp dir, unique per
// process and call, and removes it (with its ".verify" sibling, where
// Store::Verify rebuilds aside) on destruction. It does not create the
// directory: Store::Open does. TempDir is the same, created at once, for
// tests that put files there themselves.

#ifndef EVENTFOLD_TESTS_COMMON_SCRATCH_DIR_H_
#define EVENTFOLD_TESTS_COMMON_SCRATCH_DIR_H_

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace eventfold::test_util {

class ScratchDir {
 public:
  explicit ScratchDir(std::string_view tag = "test") {
    static std::atomic<uint64_t> counter{0};
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = (std::filesystem::temp_directory_path() /
             ("eventfold-" + std::string(tag) + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(counter.fetch_add(1)) + "-" + std::to_string(now)))
                .string();
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::remove_all(path_ + ".verify", ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class TempDir : public ScratchDir {
 public:
  explicit TempDir(std::string_view tag = "test") : ScratchDir(tag) {
    std::filesystem::create_directories(path());
  }
};

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_SCRATCH_DIR_H_
