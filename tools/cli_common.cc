#include "tools/cli_common.h"

#include <charconv>
#include <filesystem>
#include <iostream>
#include <map>

namespace eventfold::cli {

void AddDataOption(CLI::App* cmd, std::string* dir) {
  *dir = kDefaultDataDir;
  cmd->add_option("--data", *dir, "store directory")->capture_default_str();
}

std::unique_ptr<Store> OpenStore(const std::string& dir, bool create,
                                 const std::string& profile_file) {
  Options options;
  options.create_if_missing = create;
  if (!profile_file.empty()) {
    Result<Profile> p = Profile::FromFile(profile_file);
    if (!p.ok()) {
      std::cerr << "eventfold: " << p.status().message() << "\n";
      return nullptr;
    }
    options.profile = std::move(*p);
  }
  if (!create && !std::filesystem::exists(std::filesystem::path(dir) / "CURRENT")) {
    std::cerr << "eventfold: no store at " << dir << " (ingest creates one)\n";
    return nullptr;
  }
  Result<std::unique_ptr<Store>> store = Store::Open(dir, options);
  if (!store.ok()) {
    std::cerr << "eventfold: " << store.status().ToString() << "\n";
    return nullptr;
  }
  return std::move(*store);
}

std::vector<std::string> PartitionStoreDirs(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "CURRENT", ec)) return {};
  std::map<int, std::string> by_partition;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 2 || name[0] != 'p') continue;
    int k = -1;
    const auto [end, err] = std::from_chars(name.data() + 1, name.data() + name.size(), k);
    if (err != std::errc() || end != name.data() + name.size() || k < 0) continue;
    if (!fs::exists(e.path() / "CURRENT", ec)) continue;
    if (fs::exists(e.path().string() + ".stale", ec)) {
      std::cerr << "eventfold: skipping " << e.path().string()
                << ": stale (another worker took partition " << k << ")\n";
      continue;
    }
    by_partition.emplace(k, e.path().string());
  }
  std::vector<std::string> out;
  for (auto& [k, path] : by_partition) out.push_back(std::move(path));
  return out;
}

std::vector<std::unique_ptr<Store>> OpenStoresForRead(const std::string& dir) {
  std::vector<std::string> dirs = PartitionStoreDirs(dir);
  if (dirs.empty()) dirs.push_back(dir);
  std::vector<std::unique_ptr<Store>> stores;
  for (const std::string& d : dirs) {
    std::unique_ptr<Store> store = OpenStore(d, /*create=*/false);
    if (!store) return {};
    stores.push_back(std::move(store));
  }
  return stores;
}

}  // namespace eventfold::cli
