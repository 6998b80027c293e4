// eventfold subscriptions --data DIR : every subscription's checkpoint, lag
// and dead letters, one JSON object a line. Given a fold worker's directory
// (docs/CLUSTER.md), those of every current partition store, each line
// naming its partition.

#include <iostream>

#include "tools/cli_common.h"
#include "tools/read_views.h"
#include "tools/remote_read.h"

namespace eventfold::cli {
namespace {

// The view of `store`; with a `partition_dir`, each line names it.
Result<std::string> View(Store& store, const std::string& partition_dir) {
  Result<std::string> text = SubscriptionsView(store, SystemClock());
  if (!text.ok() || partition_dir.empty()) return text;
  std::string out;
  size_t begin = 0;
  for (size_t end; (end = text->find('\n', begin)) != std::string::npos; begin = end + 1) {
    out += WithPartition(partition_dir, text->substr(begin, end - begin));
    out += '\n';
  }
  return out;
}

int Subscriptions(const std::string& dir) {
  std::vector<std::string> dirs = PartitionStoreDirs(dir);
  const bool worker_dir = !dirs.empty();
  if (!worker_dir) dirs.push_back(dir);
  std::string all;
  for (const std::string& d : dirs) {
    std::unique_ptr<Store> store = OpenStore(d, /*create=*/false);
    if (!store) return kExitError;
    Result<std::string> text = View(*store, worker_dir ? d : std::string());
    if (!text.ok()) {
      std::cerr << "eventfold: " << text.status().ToString() << "\n";
      return kExitError;
    }
    all += *text;
  }
  std::cout << all;
  if (all.empty()) {
    std::cerr << "eventfold: " << kNoSubscriptionsNote << "\n";
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
