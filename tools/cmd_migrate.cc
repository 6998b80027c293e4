// eventfold migrate --data DIR : upgrades a store in an older on-disk format
// to this build's (Options::upgrade_format). Open of an older store without
// it refuses and names this command. A store already in the current format
// is left as it is. Prints {"format":"current"} on success.

#include <filesystem>
#include <iostream>

#include "core/json_writer.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

int Migrate(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT")) {
    std::cerr << "eventfold: no store at " << dir << "\n";
    return kExitError;
  }
  Options options;
  options.create_if_missing = false;
  options.upgrade_format = true;
  Result<std::unique_ptr<Store>> store = Store::Open(dir, options);
  if (!store.ok()) {
    std::cerr << "eventfold: " << store.status().ToString() << "\n";
    return kExitError;
  }
  JsonWriter w;
  w.BeginObject().Key("format").String("current").EndObject();
  std::cout << w.str() << "\n";
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
