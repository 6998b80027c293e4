#include "tools/cli_common.h"

#include <filesystem>
#include <iostream>

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

}  // namespace eventfold::cli
