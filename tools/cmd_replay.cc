// eventfold replay --data DIR [--verify] [--profile FILE]

#include <iostream>

#include "core/json_writer.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

int Verify(Store* store) {
  Result<VerifySummary> sum = store->Verify(
      [](const std::optional<Projection>& live, const std::optional<Projection>& rebuilt) {
        const Projection& any = live ? *live : *rebuilt;
        JsonWriter w;
        w.BeginObject().Key("entity").String(any.entity).Key("id").String(any.id);
        w.Key("live");
        live ? w.Raw(ProjectionToJson(*live)) : w.Null();
        w.Key("rebuilt");
        rebuilt ? w.Raw(ProjectionToJson(*rebuilt)) : w.Null();
        w.EndObject();
        std::cout << w.str() << "\n";
        std::cerr << "eventfold: " << any.entity << "/" << any.id
                  << " differs from its rebuild\n";
      });
  if (!sum.ok()) {
    std::cerr << "eventfold: " << sum.status().ToString() << "\n";
    return kExitError;
  }
  JsonWriter w;
  w.BeginObject()
      .Key("verified").Bool(sum->differences == 0)
      .Key("entities").Uint(sum->entities)
      .Key("differences").Uint(sum->differences)
      .Key("seconds").Double(sum->seconds)
      .EndObject();
  std::cout << w.str() << "\n";
  return sum->differences == 0 ? kExitOk : kExitRefused;
}

int Replay(const std::string& dir, bool verify, const std::string& profile_file) {
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false);
  if (!store) return kExitError;
  if (verify) {
    if (!profile_file.empty()) {
      std::cerr << "eventfold: --verify compares with the store's own profile; "
                   "drop --profile\n";
      return kExitError;
    }
    return Verify(store.get());
  }
  std::optional<Profile> profile;
  if (!profile_file.empty()) {
    Result<Profile> p = Profile::FromFile(profile_file);
    if (!p.ok()) {
      std::cerr << "eventfold: " << p.status().message() << "\n";
      return kExitError;
    }
    profile = std::move(*p);
  }
  Result<RebuildSummary> sum = store->Rebuild(profile ? &*profile : nullptr);
  if (!sum.ok()) {
    std::cerr << "eventfold: " << sum.status().ToString() << "\n";
    return kExitError;
  }
  JsonWriter w;
  w.BeginObject()
      .Key("entities").Uint(sum->entities)
      .Key("events").Uint(sum->events)
      .Key("applied").Uint(sum->applied)
      .Key("rejected").Uint(sum->rejected)
      .Key("unrouted").Uint(sum->unrouted)
      .Key("seconds").Double(sum->seconds)
      .Key("events_per_second")
      .Double(sum->seconds > 0 ? static_cast<double>(sum->events) / sum->seconds : 0)
      .EndObject();
  std::cout << w.str() << "\n";
  return kExitOk;
}

}  // namespace

void AddReplayCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("replay", "rebuild every projection from the stored events");
  auto dir = std::make_shared<std::string>();
  auto verify = std::make_shared<bool>(false);
  auto profile = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  cmd->add_flag("--verify", *verify, "rebuild aside and compare; exit 1 on any difference");
  cmd->add_option("--profile", *profile, "rebuild under this profile and switch to it");
  cmd->callback([=] { *action = [=] { return Replay(*dir, *verify, *profile); }; });
}

}  // namespace eventfold::cli
