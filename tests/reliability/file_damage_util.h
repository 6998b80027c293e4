// Helpers of the file damage tests (file_check_test.cc,
// file_check_crash_test.cc): stores with several tables, byte flips, the
// file check's reports.

#ifndef EVENTFOLD_TESTS_RELIABILITY_FILE_DAMAGE_UTIL_H_
#define EVENTFOLD_TESTS_RELIABILITY_FILE_DAMAGE_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "eventfold/options.h"
#include "eventfold/repair.h"

namespace eventfold::reliability {

// Small memtables, so the store has several tables besides its log.
inline Options SmallTables() {
  Options o;
  o.durability = Durability::kBuffered;
  o.write_buffer_bytes = 64 << 10;
  o.snapshot_interval = 4;
  return o;
}

inline std::vector<FileDamage> Damages(const std::string& dir,
                                       FileCheckSummary* summary = nullptr) {
  std::vector<FileDamage> out;
  Result<FileCheckSummary> r =
      CheckStoreFiles(dir, Options(), [&](const FileDamage& d) { out.push_back(d); });
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok() && summary) *summary = *r;
  return out;
}

inline std::string Describe(const std::vector<FileDamage>& ds) {
  std::string s;
  for (const FileDamage& d : ds) {
    s += d.file + " [" + std::to_string(d.offset) + ", " + std::to_string(d.end) + ") " +
         d.message + "\n";
  }
  return s;
}

inline std::vector<std::string> FilesEndingIn(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The largest table in `dir` that the store's MANIFEST lists: a table in
// `unreferenced` (the file check's list; e.g. a compaction's output when
// the store closed) is a left-over LevelDB deletes on open, damage and
// all. "" when there is none; its size in *size.
inline std::string LargestLiveTable(const std::string& dir,
                                    const std::vector<std::string>& unreferenced, uintmax_t* size) {
  std::string largest;
  *size = 0;
  for (const std::string& t : FilesEndingIn(dir, ".ldb")) {
    if (std::find(unreferenced.begin(), unreferenced.end(), t) != unreferenced.end()) continue;
    const uintmax_t bytes = std::filesystem::file_size(dir + "/" + t);
    if (bytes > *size) largest = t, *size = bytes;
  }
  return largest;
}

inline void XorBytes(const std::string& path, uint64_t offset, const std::string& mask) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << path;
  std::string bytes(mask.size(), '\0');
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(bytes[i] ^ mask[i]);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace eventfold::reliability

#endif  // EVENTFOLD_TESTS_RELIABILITY_FILE_DAMAGE_UTIL_H_
