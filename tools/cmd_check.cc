// eventfold check --data DIR : the store's integrity check (Store::Check).
//
// Each problem goes to stderr as "eventfold: check: <key>: <what>"; the
// summary JSON goes to stdout either way. Exit 0 when the store is intact,
// 1 on any problem (a store too damaged to open included), 2 when the check
// could not run.

#include <filesystem>
#include <iostream>

#include "core/json_writer.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

void PrintSummary(const CheckSummary& s, bool ok) {
  JsonWriter w;
  w.BeginObject()
      .Key("ok")
      .Bool(ok)
      .Key("problems")
      .Uint(s.problems)
      .Key("records")
      .Uint(s.records)
      .Key("events")
      .Uint(s.events)
      .Key("dedup")
      .Uint(s.dedup)
      .Key("conflicts")
      .Uint(s.conflicts)
      .Key("refused")
      .Uint(s.refused)
      .Key("log_entries")
      .Uint(s.log_entries)
      .Key("projections")
      .Uint(s.projections)
      .Key("snapshots")
      .Uint(s.snapshots)
      .Key("tombstones")
      .Uint(s.tombstones)
      .Key("compacted")
      .Uint(s.compacted)
      .Key("verified")
      .Uint(s.verified)
      .Key("feed")
      .BeginObject()
      .Key("changes")
      .Uint(s.changes)
      .Key("first")
      .Uint(s.first_change)
      .Key("last")
      .Uint(s.last_change)
      .EndObject()
      .Key("seconds")
      .Double(s.seconds)
      .EndObject();
  std::cout << w.str() << "\n";
}

int CheckCmd(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT")) {
    std::cerr << "eventfold: no store at " << dir << "\n";
    return kExitError;
  }
  Options options;
  options.create_if_missing = false;
  Result<std::unique_ptr<Store>> store = Store::Open(dir, options);
  if (!store.ok()) {
    std::cerr << "eventfold: check: " << store.status().ToString() << "\n";
    if (!store.status().IsCorruption()) return kExitError;
    CheckSummary s;
    s.problems = 1;  // too damaged to open
    PrintSummary(s, false);
    return kExitRefused;
  }
  Result<CheckSummary> summary = (*store)->maintenance().Check([](const CheckProblem& p) {
    std::cerr << "eventfold: check: " << (p.key.empty() ? "" : p.key + ": ") << p.message << "\n";
  });
  if (!summary.ok()) {
    std::cerr << "eventfold: check could not run: " << summary.status().ToString() << "\n";
    return kExitError;
  }
  const bool ok = summary->problems == 0;
  PrintSummary(*summary, ok);
  return ok ? kExitOk : kExitRefused;
}

}  // namespace

void AddCheckCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "check", "verify every record, cross reference, projection and the change feed");
  auto dir = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  cmd->callback([=] { *action = [=] { return CheckCmd(*dir); }; });
}

}  // namespace eventfold::cli
