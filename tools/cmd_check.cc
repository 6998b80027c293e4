// eventfold check --data DIR : the store's integrity check (Store::Check);
// on a fold worker's directory, of each partition store, one summary.
//
// Each problem goes to stderr as "eventfold: check: <key>: <what>"; the
// summary JSON goes to stdout either way. Exit 0 when the store is intact,
// 1 on any problem (a store too damaged to open included), 2 when the check
// could not run.

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

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

// Adds `s` to `total`. Each partition store has its own change feed: the
// merged feed range spans the partitions' ranges.
void Accumulate(const CheckSummary& s, CheckSummary* total) {
  total->records += s.records;
  total->events += s.events;
  total->dedup += s.dedup;
  total->tombstones += s.tombstones;
  total->compacted += s.compacted;
  total->conflicts += s.conflicts;
  total->refused += s.refused;
  total->log_entries += s.log_entries;
  total->projections += s.projections;
  total->snapshots += s.snapshots;
  if (s.changes > 0) {
    total->first_change =
        total->changes == 0 ? s.first_change : std::min(total->first_change, s.first_change);
    total->last_change = std::max(total->last_change, s.last_change);
  }
  total->changes += s.changes;
  total->verified += s.verified;
  total->problems += s.problems;
  total->seconds += s.seconds;
}

// Checks the store at `dir`, problems to stderr each prefixed with `label`;
// adds its summary to `total`. kExitOk, kExitRefused (a problem, or too
// damaged to open) or kExitError (the check could not run).
int CheckOne(const std::string& dir, const std::string& label, CheckSummary* total) {
  Options options;
  options.create_if_missing = false;
  Result<std::unique_ptr<Store>> store = Store::Open(dir, options);
  if (!store.ok()) {
    std::cerr << "eventfold: check: " << label << store.status().ToString() << "\n";
    if (!store.status().IsCorruption()) return kExitError;
    ++total->problems;  // too damaged to open
    return kExitRefused;
  }
  Result<CheckSummary> summary = (*store)->maintenance().Check([&](const CheckProblem& p) {
    std::cerr << "eventfold: check: " << label << (p.key.empty() ? "" : p.key + ": ") << p.message
              << "\n";
  });
  if (!summary.ok()) {
    std::cerr << "eventfold: check could not run: " << label << summary.status().ToString() << "\n";
    return kExitError;
  }
  Accumulate(*summary, total);
  return summary->problems == 0 ? kExitOk : kExitRefused;
}

// One store, or every partition store of a fold worker's directory with
// one merged summary (problems prefixed with the partition's directory).
int CheckCmd(const std::string& dir) {
  std::vector<std::string> partitions = PartitionStoreDirs(dir);
  const bool worker_dir = !partitions.empty();
  if (!worker_dir) {
    if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT")) {
      std::cerr << "eventfold: no store at " << dir << "\n";
      return kExitError;
    }
    partitions.push_back(dir);
  }
  CheckSummary total;
  int code = kExitOk;
  for (const std::string& d : partitions) {
    const std::string label =
        worker_dir ? std::filesystem::path(d).filename().string() + ": " : std::string();
    code = std::max(code, CheckOne(d, label, &total));
  }
  if (code == kExitError) return kExitError;
  const bool ok = total.problems == 0;
  PrintSummary(total, ok);
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
