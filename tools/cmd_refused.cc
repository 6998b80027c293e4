// eventfold refused --data DIR : the quarantine of refused deliveries.
// eventfold refused --cluster URLS [--stream S] : a cluster's refused stream
//   (what its receivers refused), the same NDJSON lines.

#include <iostream>

#include "eventfold/cluster.h"
#include "tools/cli_common.h"
#include "tools/cluster_flags.h"
#include "tools/read_views.h"
#include "tools/remote_read.h"

namespace eventfold::cli {
namespace {

struct RefusedArgs {
  std::string dir;
  std::string server;  // non-empty: the running receiver's read API instead
  std::string urls;    // non-empty: the cluster's refused stream instead
  std::string stream = "eventfold";
  int64_t timeout_ms = 5000;
};

bool Print(const RefusedDelivery& r) {
  std::cout << RefusedLine(r);
  return true;
}

int Refused(const RefusedArgs& a) {
  Status st;
  if (!a.urls.empty()) {
    std::optional<ClusterOptions> cluster = ClusterFromFlags(a.urls, a.stream);
    if (!cluster) return kExitError;
    cluster->timeout_ms = a.timeout_ms;
    st = ListClusterRefused(*cluster, Print);
  } else {
    std::unique_ptr<Store> store = OpenStore(a.dir, /*create=*/false);
    if (!store) return kExitError;
    st = store->quarantine().List(Print);
  }
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
  auto a = std::make_shared<RefusedArgs>();
  AddDataOption(cmd, &a->dir);
  AddServerOption(cmd, &a->server);
  // One source: the one not read would be ignored without a word.
  auto* cluster =
      cmd->add_option("--cluster", a->urls,
                      "comma-separated nats:// URLs: list the cluster's refused stream instead")
          ->excludes("--data")
          ->excludes("--server");
  cmd->add_option("--stream", a->stream, "the cluster's intake stream name")
      ->needs(cluster)
      ->check(StreamNameCheck())
      ->capture_default_str();
  cmd->add_option("--timeout-ms", a->timeout_ms, "cluster connect and request deadline")
      ->needs(cluster)
      ->capture_default_str();
  cmd->callback([=] {
    *action = [=] { return a->server.empty() ? Refused(*a) : RemoteRefused(a->server); };
  });
}

}  // namespace eventfold::cli
