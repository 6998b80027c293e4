// eventfold migrate --data DIR : upgrades a store in an older on-disk format
// to this build's (Options::upgrade_format). Open of an older store without
// it refuses and names this command. A store already in the current format
// is left as it is. Prints {"format":"current"} on success, and the keys
// rewritten so far on stderr meanwhile (--quiet: not). DIR may also be
// a fold worker's directory (docs/CLUSTER.md): then every partition store
// in it is upgraded, stale and standby copies included (the worker may open
// them again), with a line {"partition":k,"format":"current"} each.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>

#include "core/json_writer.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

// Progress on stderr while a store's keys are rewritten (ProgressLine: the
// first line off a terminal 5 s in), and a last line with the total when
// the upgrade rewrote any.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string dir) : dir_(std::move(dir)) {}

  void Update(uint64_t keys) {
    keys_ = keys;
    line_.Show(Seconds(), /*final=*/false, Text());
  }

  void Finish() {
    if (keys_ > 0) line_.Show(Seconds(), /*final=*/true, Text());
    line_.End();
  }

 private:
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  std::string Text() const {
    const double seconds = Seconds();
    char text[160];
    std::snprintf(text, sizeof(text), ": %llu keys rewritten, %.1f s, %.0f keys/s",
                  static_cast<unsigned long long>(keys_), seconds,
                  seconds > 0 ? static_cast<double>(keys_) / seconds : 0.0);
    return "migrate: " + dir_ + text;
  }

  const std::string dir_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  ProgressLine line_{/*first_at_once=*/false};
  uint64_t keys_ = 0;
};

// One store; false (the reason on stderr) when it does not open.
bool MigrateOne(const std::string& dir, bool partition, bool quiet) {
  Options options;
  options.create_if_missing = false;
  options.upgrade_format = true;
  ProgressPrinter progress(dir);
  if (!quiet) options.upgrade_progress = [&progress](uint64_t keys) { progress.Update(keys); };
  Result<std::unique_ptr<Store>> store = Store::Open(dir, options);
  if (!quiet) progress.Finish();
  if (!store.ok()) {
    std::cerr << "eventfold: " << dir << ": " << store.status().ToString() << "\n";
    return false;
  }
  JsonWriter w;
  w.BeginObject().Key("format").String("current").EndObject();
  std::cout << (partition ? WithPartition(dir, w.str()) : w.str()) << "\n";
  return true;
}

int Migrate(const std::string& dir, bool quiet) {
  const std::vector<std::string> partitions = PartitionStoreDirs(dir, /*behind_too=*/true);
  if (partitions.empty()) {
    if (!HasStore(dir)) {
      std::cerr << "eventfold: no store at " << dir << "\n";
      return kExitError;
    }
    return MigrateOne(dir, /*partition=*/false, quiet) ? kExitOk : kExitError;
  }
  for (const std::string& p : partitions) {
    if (!MigrateOne(p, /*partition=*/true, quiet)) return kExitError;
  }
  return kExitOk;
}

}  // namespace

void AddMigrateCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "migrate", "upgrade a store in an older on-disk format to this build's format");
  auto dir = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  AddDataOption(cmd, dir.get());
  cmd->add_flag("--quiet", *quiet, "no progress on stderr");
  cmd->callback([=] { *action = [=] { return Migrate(*dir, *quiet); }; });
}

}  // namespace eventfold::cli
