// eventfold status --data DIR [--profile FILE] : what the store holds, and
// whether its projections are stale for a given profile.

#include <iostream>
#include <map>

#include "core/json_writer.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

int StatusCmd(const std::string& dir, const std::string& profile_file) {
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false, profile_file);
  if (!store) return kExitError;
  const StoreStats stats = store->Stats();
  // Projections by entity type and state.
  std::map<std::string, std::map<std::string, uint64_t>> states;
  uint64_t projections = 0;
  Status st = store->List("", [&](const Projection& p) {
    ++states[p.entity][p.state];
    ++projections;
    return true;
  });
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
  }
  // Accepted events in no entity's log (a scan of the stored events).
  uint64_t unrouted = 0;
  st = store->maintenance().ListUnrouted(nullptr, [&](const UnroutedEvent&) {
    ++unrouted;
    return true;
  });
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
  }
  JsonWriter w;
  w.BeginObject()
      .Key("profile")
      .BeginObject()
      .Key("name")
      .String(stats.profile_name)
      .Key("fingerprint")
      .String(stats.profile_fingerprint)
      .Key("stale")
      .Bool(stats.profile_stale);
  if (stats.profile_stale) w.Key("requested_fingerprint").String(stats.requested_fingerprint);
  w.EndObject()
      .Key("generation")
      .Uint(stats.generation)
      .Key("last_seq")
      .Uint(stats.last_seq)
      .Key("projections")
      .Uint(projections)
      .Key("entities")
      .BeginObject();
  for (const auto& [entity, by_state] : states) {
    w.Key(entity).BeginObject();
    for (const auto& [state, n] : by_state) w.Key(state).Uint(n);
    w.EndObject();
  }
  w.EndObject()
      .Key("unrouted")
      .Uint(unrouted)
      .Key("refused")
      .Uint(stats.refused)
      .Key("approximate_bytes")
      .Uint(stats.approximate_bytes)
      .EndObject();
  std::cout << w.str() << "\n";
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
  AddDataOption(cmd, dir.get());
  cmd->add_option("--profile", *profile, "exit 1 when the projections were built with another");
  cmd->callback([=] { *action = [=] { return StatusCmd(*dir, *profile); }; });
}

}  // namespace eventfold::cli
