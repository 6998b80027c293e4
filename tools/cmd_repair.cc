// eventfold repair --data DIR : salvages a damaged store (RepairStore,
// eventfold/repair.h) and prints what was lost as a list to act on.
//
// stdout: one line per loss (a repair killed before its end is taken over,
// its losses printed again), then the JSON summary, whose "journal" names
// the file in DIR/lost/ that keeps the same list —
//   resend event <event_id> (<type>, occurred <time>): <detail>
//   resend events received <from> .. <to>: <detail>
//   feed changes <first>..<last> are placeholders: <detail>
//   dropped record: <detail>
// Given a fold worker's partition store whose repair lost events, it also
// removes the worker's DIR.seq (ForgetIntakeSequence).
// Exit 0 when the repaired store checks clean, 1 when problems are left,
// 2 when the repair could not run (e.g. the store is in use).

#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "core/json_writer.h"
#include "core/rfc3339.h"
#include "eventfold/repair.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

std::string Time(int64_t micros, const char* unbounded) {
  return micros == 0 ? std::string(unbounded) : FormatRfc3339(micros);
}

// Each line is flushed as the repair finds its loss, before the repair
// drops what it found: a repair killed later has still said it.
void PrintLost(const LostData& l) {
  switch (l.kind) {
    case LostData::Kind::kEvent:
      std::cout << "resend event " << l.event_id << " (" << l.type << ", occurred "
                << Time(l.occurred_at, "?") << "): " << l.detail << "\n";
      break;
    case LostData::Kind::kWindow:
      std::cout << "resend events received " << Time(l.received_from, "(from the start)") << " .. "
                << Time(l.received_to, "(now)") << ": " << l.detail << "\n";
      break;
    case LostData::Kind::kChanges:
      std::cout << "feed changes " << l.first_seq << ".." << l.last_seq
                << " are placeholders: " << l.detail << "\n";
      break;
    case LostData::Kind::kRecords:
      std::cout << "dropped record: " << l.detail << "\n";
      break;
  }
  std::cout.flush();
}

// A fold worker's partition store (DIR/p<k>, docs/CLUSTER.md) that lost
// events resumes after DIR/p<k>.seq, past what it lost. Removing the file
// makes the worker fold the partition again from the start of the intake
// stream, which holds the lost events (unless they are older than its
// retention); the store's dedup takes only those. Says so on stderr.
void ForgetIntakeSequence(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path store = fs::path(dir).lexically_normal();
  if (store.filename().empty()) store = store.parent_path();  // "DIR/p3/"
  const std::optional<int> partition = PartitionNumber(store.filename().string());
  if (!partition) return;
  const int k = *partition;
  const std::string seq = store.string() + ".seq";
  std::error_code ec;
  if (!fs::exists(seq, ec)) return;
  if (!fs::remove(seq, ec) || ec) {
    std::cerr << "eventfold: repair: events were lost, and removing " << seq
              << " failed: " << ec.message() << "; remove it before the fold worker takes "
              << "partition " << k << " again, so that it folds them from the intake stream\n";
    return;
  }
  std::cerr << "eventfold: repair: removed " << seq << ": the fold worker folds partition " << k
            << " again from the start of the intake stream, which holds what was lost\n";
}

int RepairCmd(const std::string& dir) {
  Result<RepairSummary> r = RepairStore(dir, Options(), PrintLost);
  if (!r.ok()) {
    std::cerr << "eventfold: repair: " << r.status().ToString() << "\n";
    return kExitError;
  }
  if (r->lost_events + r->lost_windows > 0) ForgetIntakeSequence(dir);
  JsonWriter w;
  w.BeginObject()
      .Key("ok")
      .Bool(r->problems_left == 0)
      .Key("damaged")
      .Uint(r->damaged)
      .Key("dropped")
      .Uint(r->dropped)
      .Key("lost_events")
      .Uint(r->lost_events)
      .Key("lost_windows")
      .Uint(r->lost_windows)
      .Key("dedup_restored")
      .Uint(r->dedup_restored)
      .Key("feed_filled")
      .Uint(r->feed_filled)
      .Key("events")
      .Uint(r->events)
      .Key("problems_left")
      .Uint(r->problems_left)
      .Key("seconds")
      .Double(r->seconds)
      .Key("journal")
      .String(r->journal)
      .Key("resumed")
      .Uint(r->resumed)
      .EndObject();
  std::cout << w.str() << "\n";
  return r->problems_left == 0 ? kExitOk : kExitRefused;
}

}  // namespace

void AddRepairCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "repair", "salvage a damaged store, rebuild what is derived, list what was lost");
  auto dir = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  cmd->callback([=] { *action = [=] { return RepairCmd(*dir); }; });
}

}  // namespace eventfold::cli
