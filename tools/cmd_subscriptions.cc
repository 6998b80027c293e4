// eventfold subscriptions --data DIR : every subscription's checkpoint, lag
// and dead letters, one JSON object a line.

#include <iostream>

#include "tools/cli_common.h"
#include "tools/read_views.h"
#include "tools/remote_read.h"

namespace eventfold::cli {
namespace {

int Subscriptions(const std::string& dir) {
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false);
  if (!store) return kExitError;
  Result<std::string> text = SubscriptionsView(*store, SystemClock());
  if (!text.ok()) {
    std::cerr << "eventfold: " << text.status().ToString() << "\n";
    return kExitError;
  }
  std::cout << *text;
  if (text->empty()) {
    std::cerr << "eventfold: no subscriptions in this store (a subscriber's first checkpoint "
                 "creates one)\n";
  }
  return kExitOk;
}

}  // namespace

void AddSubscriptionsCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "subscriptions", "every subscription's checkpoint, lag and dead letters, as NDJSON");
  auto dir = std::make_shared<std::string>();
  auto server = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  AddServerOption(cmd, server.get());
  cmd->callback([=] {
    *action = [=] { return server->empty() ? Subscriptions(*dir) : RemoteSubscriptions(*server); };
  });
}

}  // namespace eventfold::cli
