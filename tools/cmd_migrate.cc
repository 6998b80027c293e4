// eventfold migrate --data DIR : upgrades a store in an older on-disk format
// to this build's (Options::upgrade_format). Open of an older store without
// it refuses and names this command. A store already in the current format
// is left as it is. Prints {"format":"current"} on success. DIR may also be
// a fold worker's directory (docs/CLUSTER.md): then every partition store
// in it is upgraded, stale and standby copies included (the worker may open
// them again), with a line {"partition":k,"format":"current"} each.

#include <filesystem>
#include <iostream>

#include "core/json_writer.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

// One store; false (the reason on stderr) when it does not open.
bool MigrateOne(const std::string& dir, bool partition) {
  Options options;
  options.create_if_missing = false;
  options.upgrade_format = true;
  Result<std::unique_ptr<Store>> store = Store::Open(dir, options);
  if (!store.ok()) {
    std::cerr << "eventfold: " << dir << ": " << store.status().ToString() << "\n";
    return false;
  }
  JsonWriter w;
  w.BeginObject().Key("format").String("current").EndObject();
  std::cout << (partition ? WithPartition(dir, w.str()) : w.str()) << "\n";
  return true;
}

int Migrate(const std::string& dir) {
  const std::vector<std::string> partitions = PartitionStoreDirs(dir, /*behind_too=*/true);
  if (partitions.empty()) {
    if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT")) {
      std::cerr << "eventfold: no store at " << dir << "\n";
      return kExitError;
    }
    return MigrateOne(dir, /*partition=*/false) ? kExitOk : kExitError;
  }
  for (const std::string& p : partitions) {
    if (!MigrateOne(p, /*partition=*/true)) return kExitError;
  }
  return kExitOk;
}

}  // namespace

void AddMigrateCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "migrate", "upgrade a store in an older on-disk format to this build's format");
  auto dir = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  cmd->callback([=] { *action = [=] { return Migrate(*dir); }; });
}

}  // namespace eventfold::cli
