// eventfold refused --data DIR : the quarantine of refused deliveries.

#include <iostream>

#include "core/json_writer.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

int Refused(const std::string& dir) {
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false);
  if (!store) return kExitError;
  Status st = store->quarantine().List([](const RefusedDelivery& r) {
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
  AddDataOption(cmd, dir.get());
  cmd->callback([=] { *action = [=] { return Refused(*dir); }; });
}

}  // namespace eventfold::cli
