// eventfold status --data DIR [--profile FILE] : what the store holds, and
// whether its projections are stale for a given profile.

#include <iostream>

#include "tools/cli_common.h"
#include "tools/read_views.h"
#include "tools/remote_read.h"

namespace eventfold::cli {
namespace {

int StatusCmd(const std::string& dir, const std::string& profile_file) {
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false, profile_file);
  if (!store) return kExitError;
  Result<std::string> text = StatusView(*store);
  if (!text.ok()) {
    std::cerr << "eventfold: " << text.status().ToString() << "\n";
    return kExitError;
  }
  std::cout << *text;
  const StoreStats stats = store->Stats();
  if (stats.profile_stale) {
    std::cerr << "eventfold: projections were built with profile \"" << stats.profile_name
              << "\", not " << profile_file << "; run eventfold replay --data " << dir
              << " --profile " << profile_file << "\n";
    return kExitRefused;
  }
  return kExitOk;
}

}  // namespace

void AddStatusCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("status", "summarize the store; with --profile, check staleness");
  auto dir = std::make_shared<std::string>();
  auto profile = std::make_shared<std::string>();
  auto server = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  AddServerOption(cmd, server.get());
  cmd->add_option("--profile", *profile, "exit 1 when the projections were built with another")
      ->excludes("--server");
  cmd->callback([=] {
    *action = [=] { return server->empty() ? StatusCmd(*dir, *profile) : RemoteStatus(*server); };
  });
}

}  // namespace eventfold::cli
