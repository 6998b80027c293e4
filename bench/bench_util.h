// Small helpers shared by the Google Benchmark programs: process memory
// readings from /proc (Linux), a peak-RSS sampler, scratch directories.
//
// Memory: VmHWM (the kernel's peak resident set) counts file-backed pages
// too, and LevelDB's default Env reads table files through mmap, so a scan
// of a large store raises VmRSS/VmHWM by the pages it touched even though
// they are page cache, not the process's own memory. RssSampler therefore
// also tracks the anonymous part (heap, stacks) separately.

#ifndef EVENTFOLD_BENCH_BENCH_UTIL_H_
#define EVENTFOLD_BENCH_BENCH_UTIL_H_

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>

namespace eventfold::bench {

// A "VmXXX:   1234 kB" line of /proc/self/status, in bytes; 0 if absent.
inline uint64_t ProcStatusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') {
      return std::strtoull(line.c_str() + n + 1, nullptr, 10) * 1024;
    }
  }
  return 0;
}

// Resident bytes now: total and anonymous (resident minus file/shmem pages),
// from /proc/self/statm (cheap enough to poll every few milliseconds).
struct Rss {
  uint64_t total = 0;
  uint64_t anon = 0;
};

inline Rss ReadRss() {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  Rss r;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    unsigned long long size = 0, resident = 0, shared = 0;
    if (std::fscanf(f, "%llu %llu %llu", &size, &resident, &shared) == 3) {
      r.total = resident * page;
      r.anon = (resident - std::min(resident, shared)) * page;
    }
    std::fclose(f);
  }
  return r;
}

// Resets the kernel's peak-RSS mark (VmHWM) to the current RSS (Linux >= 4.0);
// false when not permitted.
inline bool ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

// Polls ReadRss() on a thread while alive; Peak() is the highest seen.
class RssSampler {
 public:
  explicit RssSampler(std::chrono::milliseconds every = std::chrono::milliseconds(2))
      : thread_([this, every] {
          while (!stop_.load(std::memory_order_relaxed)) {
            Sample();
            std::this_thread::sleep_for(every);
          }
        }) {}
  ~RssSampler() { Stop(); }
  // Stops sampling (after one last sample); idempotent.
  void Stop() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
      Sample();
    }
  }
  Rss Peak() const { return {peak_total_.load(), peak_anon_.load()}; }

 private:
  void Sample() {
    const Rss r = ReadRss();
    peak_total_ = std::max(peak_total_.load(), r.total);
    peak_anon_ = std::max(peak_anon_.load(), r.anon);
  }
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> peak_total_{0};
  std::atomic<uint64_t> peak_anon_{0};
  std::thread thread_;
};

// Bytes of every regular file under `dir`.
inline uint64_t DirectoryBytes(const std::filesystem::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

// A scratch directory under the system temp dir, named after the program
// and the pid; removed with everything in it when destroyed.
class ScratchRoot {
 public:
  explicit ScratchRoot(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchRoot() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchRoot(const ScratchRoot&) = delete;
  ScratchRoot& operator=(const ScratchRoot&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace eventfold::bench

#endif  // EVENTFOLD_BENCH_BENCH_UTIL_H_
