// eventfold refused --data DIR : the quarantine of refused deliveries.

#include <iostream>

#include "tools/cli_common.h"
#include "tools/read_views.h"
#include "tools/remote_read.h"

namespace eventfold::cli {
namespace {

int Refused(const std::string& dir) {
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false);
  if (!store) return kExitError;
  Status st = store->quarantine().List([](const RefusedDelivery& r) {
    std::cout << RefusedLine(r);
    return true;
  });
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
  }
  return kExitOk;
}

}  // namespace

void AddRefusedCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "refused", "list refused deliveries (400/401/409/413), oldest first, as NDJSON");
  auto dir = std::make_shared<std::string>();
  auto server = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  AddServerOption(cmd, server.get());
  cmd->callback(
      [=] { *action = [=] { return server->empty() ? Refused(*dir) : RemoteRefused(*server); }; });
}

}  // namespace eventfold::cli
