// eventfold unrouted --data DIR [--list] [--profile FILE] : accepted events
// that no entity of the profile routes, counted by type or listed.

#include <iostream>
#include <map>
#include <optional>

#include "core/json_writer.h"
#include "tools/cli_common.h"
#include "tools/ndjson_out.h"

namespace eventfold::cli {
namespace {

struct UnroutedArgs {
  std::string dir, profile_file;
  bool list = false;
};

std::string EventJson(const UnroutedEvent& e) {
  JsonWriter w;
  w.BeginObject()
      .Key("seq")
      .Uint(e.seq)
      .Key("event_id")
      .String(e.event_id)
      .Key("type")
      .String(e.type)
      .Key("occurred_at")
      .String(FormatTimestamp(e.occurred_at))
      .Key("received_at")
      .String(FormatTimestamp(e.received_at))
      .Key("reason")
      .String(e.reason)
      .EndObject();
  return w.str();
}

int Unrouted(const UnroutedArgs& a) {
  std::unique_ptr<Store> store = OpenStore(a.dir, /*create=*/false);
  if (!store) return kExitError;
  std::optional<Profile> profile;
  if (!a.profile_file.empty()) {
    Result<Profile> p = Profile::FromFile(a.profile_file);
    if (!p.ok()) {
      std::cerr << "eventfold: " << p.status().message() << "\n";
      return kExitError;
    }
    profile = std::move(*p);
  }
  std::map<std::string, uint64_t> types;
  uint64_t n = 0;
  NdjsonOut out;
  Status st =
      store->maintenance().ListUnrouted(profile ? &*profile : nullptr, [&](const UnroutedEvent& e) {
        ++types[e.type];
        ++n;
        if (a.list) out.Line(EventJson(e));
        return true;
      });
  out.Flush();
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
  }
  if (!a.list) {
    JsonWriter w;
    w.BeginObject()
        .Key("profile")
        .String(profile ? profile->name() : store->profile()->name())
        .Key("unrouted")
        .Uint(n)
        .Key("types")
        .BeginObject();
    for (const auto& [type, count] : types) w.Key(type).Uint(count);
    w.EndObject().EndObject();
    std::cout << w.str() << "\n";
  } else if (n == 0) {
    std::cerr << "eventfold: no unrouted events\n";
  }
  return kExitOk;
}

}  // namespace

void AddUnroutedCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "unrouted", "count (by type) or list the accepted events that no entity routes");
  auto a = std::make_shared<UnroutedArgs>();
  AddDataOption(cmd, &a->dir);
  cmd->add_flag("--list", a->list, "print each unrouted event as NDJSON instead of the counts");
  cmd->add_option("--profile", a->profile_file,
                  "count under this profile instead of the store's (nothing is changed)");
  cmd->callback([=] { *action = [=] { return Unrouted(*a); }; });
}

}  // namespace eventfold::cli
