// eventfold refused --data DIR : the quarantine of refused deliveries.
// eventfold refused --cluster URLS [--stream S] : a cluster's refused stream
//   (what its receivers refused), the same NDJSON lines.

#include <iostream>

#include "core/json_writer.h"
#include "eventfold/cluster.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

struct RefusedArgs {
  std::string dir;
  std::string urls;  // non-empty: the cluster's refused stream instead
  std::string stream = "eventfold";
  int64_t timeout_ms = 5000;
};

bool Print(const RefusedDelivery& r) {
  JsonWriter w;
  w.BeginObject()
      .Key("seq")
      .Uint(r.seq)
      .Key("received_at")
      .String(FormatTimestamp(r.received_at))
      .Key("status")
      .Int(r.status)
      .Key("outcome")
      .String(OutcomeName(r.outcome))
      .Key("reason")
      .String(r.reason)
      .Key("headers")
      .BeginObject();
  for (const auto& [name, value] : r.headers) w.Key(name).String(value);
  w.EndObject()
      .Key("body_bytes")
      .Uint(r.body_bytes)
      .Key("body_prefix")
      .String(r.body_prefix)
      .EndObject();
  std::cout << w.str() << "\n";
  return true;
}

int Refused(const RefusedArgs& a) {
  Status st;
  if (!a.urls.empty()) {
    Result<std::vector<std::string>> urls = ParseClusterUrls(a.urls);
    if (!urls.ok()) {
      std::cerr << "eventfold: " << urls.status().message() << "\n";
      return kExitError;
    }
    ClusterOptions cluster;
    cluster.urls = std::move(*urls);
    cluster.stream = a.stream;
    cluster.timeout_ms = a.timeout_ms;
    st = ListClusterRefused(cluster, Print);
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
  cmd->add_option("--cluster", a->urls,
                  "comma-separated nats:// URLs: list the cluster's refused stream instead");
  cmd->add_option("--stream", a->stream, "the cluster's intake stream name")->capture_default_str();
  cmd->add_option("--timeout-ms", a->timeout_ms, "cluster connect and request deadline")
      ->capture_default_str();
  cmd->callback([=] { *action = [=] { return Refused(*a); }; });
}

}  // namespace eventfold::cli
