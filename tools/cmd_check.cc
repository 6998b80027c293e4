// eventfold check --data DIR : the store's integrity check; on a fold
// worker's directory, of each partition store, with one merged summary.
//
// First the physical pass (CheckStoreFiles, eventfold/repair.h) over every
// LevelDB file, before anything opens the database: opening replays the log
// and may compact, which would rewrite damaged tables before they were seen.
// Then the logical pass (Store::Check). When the files are intact the store
// is opened in place (LevelDB turns its log into a table: the same records,
// already verified); when damage was found the logical pass runs on a scratch
// copy beside DIR, so DIR itself stays as found, for `eventfold repair`.
//
// Each problem goes to stderr as "eventfold: check: <key or file>: <what>";
// the summary JSON goes to stdout either way. A repair that started and
// did not finish (its journal in DIR/lost/ has no end) is a problem too:
// running repair again finishes it. Exit 0 when the store is intact, 1 on
// any problem (a store too damaged to open included), 2 when the check
// could not run.

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "core/json_writer.h"
#include "eventfold/repair.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

void PrintSummary(const FileCheckSummary& f, const CheckSummary& s, bool ok) {
  JsonWriter w;
  w.BeginObject()
      .Key("ok")
      .Bool(ok)
      .Key("problems")
      .Uint(f.damaged + f.unfinished_repairs.size() + s.problems)
      .Key("files")
      .BeginObject()
      .Key("tables")
      .Uint(f.tables)
      .Key("table_entries")
      .Uint(f.entries)
      .Key("logs")
      .Uint(f.logs)
      .Key("log_records")
      .Uint(f.log_records)
      .Key("torn_tails")
      .Uint(f.torn_tails)
      .Key("unreferenced")
      .Uint(f.unreferenced.size())
      .Key("damaged")
      .Uint(f.damaged)
      .Key("unfinished_repairs")
      .Uint(f.unfinished_repairs.size())
      .EndObject()
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

void PrintDamage(const std::string& label, const FileDamage& d) {
  std::cerr << "eventfold: check: " << label << d.file << ": bytes " << d.offset << ".."
            << (d.end ? std::to_string(d.end) : std::string("end"));
  if (!d.after_key.empty() || !d.before_key.empty()) {
    std::cerr << " (keys after " << (d.after_key.empty() ? "the first" : d.after_key);
    // LevelDB's repairer can read past a log's next intact record: what may
    // be lost there has no end but the log's (eventfold/repair.h).
    if (!d.file.ends_with(".log")) {
      std::cerr << " and before " << (d.before_key.empty() ? "the last" : d.before_key);
    }
    std::cerr << " may be lost)";
  }
  std::cerr << ": " << d.message << "\n";
}

// A scratch copy of `dir` to open for the logical pass, or "" with the
// reason on stderr.
std::string ScratchCopy(const std::string& dir) {
  Result<std::string> copy = CopyStoreAside(dir);
  if (!copy.ok()) {
    std::cerr << "eventfold: check: cannot copy the store: " << copy.status().ToString() << "\n";
    return "";
  }
  return *copy;
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

void Accumulate(const FileCheckSummary& f, FileCheckSummary* total) {
  total->tables += f.tables;
  total->data_blocks += f.data_blocks;
  total->entries += f.entries;
  total->logs += f.logs;
  total->log_records += f.log_records;
  total->torn_tails += f.torn_tails;
  total->unreferenced.insert(total->unreferenced.end(), f.unreferenced.begin(),
                             f.unreferenced.end());
  total->damaged += f.damaged;
  total->unfinished_repairs.insert(total->unfinished_repairs.end(), f.unfinished_repairs.begin(),
                                   f.unfinished_repairs.end());
}

// What mends the store at `dir`, after its problems (stderr). The logs,
// projections and snapshots are derived from the stored events, so a
// rebuild that derives them anew mends them; a plain `replay` copies the
// logs as they are. Damaged files, or damaged stored events, need repair.
void PrintMend(const std::string& dir, bool damaged_files) {
  if (!damaged_files) {
    std::cerr << "eventfold: check: a damaged or missing log record, projection or snapshot is "
                 "mended by `eventfold replay --rederive-logs --data "
              << dir << "` (a plain `replay` copies the logs as they are)\n";
  }
  std::cerr << "eventfold: check: damaged files or stored events are salvaged by `eventfold "
               "repair --data "
            << dir << "`, which lists the events to resend\n";
}

// Checks the store at `dir` (files, then records), problems to stderr each
// prefixed with `label`; adds its summaries to the totals. kExitOk,
// kExitRefused (a problem, or too damaged to open) or kExitError (the check
// could not run). `*mendable` says whether repair or replay can mend what
// it found: not a backup or restore that did not finish.
int CheckOne(const std::string& dir, const std::string& label, FileCheckSummary* files_total,
             CheckSummary* total, bool* mendable) {
  *mendable = true;
  Options options;
  options.create_if_missing = false;
  Result<FileCheckSummary> files =
      CheckStoreFiles(dir, options, [&](const FileDamage& d) { PrintDamage(label, d); });
  if (!files.ok()) {
    std::cerr << "eventfold: check could not run: " << label << files.status().ToString() << "\n";
    return kExitError;
  }
  Accumulate(*files, files_total);
  // A copy cut short: what it lacks, its source has. Opening it below is
  // refused with the library's own reason, a problem like a store too
  // damaged to open, and nothing to repair.
  *mendable = files->unfinished_copy.empty();
  for (const std::string& journal : files->unfinished_repairs) {
    std::cerr << "eventfold: check: " << label << "lost/" << journal
              << ": a repair started and did not finish; running `eventfold repair` again "
                 "finishes it and lists again what it had found\n";
  }
  if (files->torn_tails > 0) {
    // Not a problem: after a crash it is the append the crash cut short,
    // never acknowledged under kSync. But bytes cut from a log's end by
    // anything else read the same, and a cut on a 32 KiB block boundary
    // not even that; opening the store (below) drops the torn record.
    std::cerr << "eventfold: check: " << label << files->torn_tails
              << " write-ahead log(s) end inside a record: an append a crash cut short (never "
                 "acknowledged with kSync), or bytes lost from the log's end, which a check "
                 "cannot tell apart\n";
  }
  std::string open_dir = dir;
  if (files->damaged > 0) {
    open_dir = ScratchCopy(dir);
    if (open_dir.empty()) return kExitRefused;
  }
  struct RemoveCopy {
    std::string path;
    ~RemoveCopy() {
      if (!path.empty()) (void)RemoveStoreCopy(path);
    }
  } remove_copy{open_dir == dir ? "" : open_dir};

  Result<std::unique_ptr<Store>> store = Store::Open(open_dir, options);
  if (!store.ok()) {
    std::cerr << "eventfold: check: " << label << store.status().ToString() << "\n";
    if (!store.status().IsCorruption() && files->damaged == 0) return kExitError;
    ++total->problems;  // too damaged to open
    return kExitRefused;
  }
  Result<CheckSummary> summary = (*store)->maintenance().Check([&](const CheckProblem& p) {
    std::cerr << "eventfold: check: " << label << (p.key.empty() ? "" : p.key + ": ") << p.message
              << "\n";
  });
  if (!summary.ok()) {
    if (files->damaged == 0) {
      std::cerr << "eventfold: check could not run: " << label << summary.status().ToString()
                << "\n";
      return kExitError;
    }
    // Expected on a damaged copy: the logical pass stops at the damage.
    std::cerr << "eventfold: check: " << label
              << "the logical pass stopped: " << summary.status().ToString() << "\n";
    ++total->problems;
    return kExitRefused;
  }
  Accumulate(*summary, total);
  return summary->problems == 0 && files->damaged == 0 && files->unfinished_repairs.empty()
             ? kExitOk
             : kExitRefused;
}

// One store, or every partition store of a fold worker's directory with
// one merged summary (problems prefixed with the partition's directory).
int CheckCmd(const std::string& dir) {
  std::vector<std::string> incomplete;
  std::vector<std::string> partitions = PartitionStoreDirs(dir, /*behind_too=*/false, &incomplete);
  const bool worker_dir = !partitions.empty() || !incomplete.empty();
  if (!worker_dir) {
    if (!HasStore(dir)) {
      std::cerr << "eventfold: no store at " << dir << "\n";
      return kExitError;
    }
    partitions.push_back(dir);
  }
  FileCheckSummary files;
  CheckSummary total;
  int code = kExitOk;
  std::vector<std::pair<std::string, bool>> to_mend;  // a store with problems; files damaged?
  for (const std::string& d : partitions) {
    const std::string label =
        worker_dir ? std::filesystem::path(d).filename().string() + ": " : std::string();
    const uint64_t damaged_before = files.damaged;
    const size_t unfinished_before = files.unfinished_repairs.size();
    bool mendable = true;
    const int one = CheckOne(d, label, &files, &total, &mendable);
    if (one == kExitRefused && mendable) {
      // Only repair mends damaged files, or finishes a repair.
      to_mend.emplace_back(
          d, files.damaged > damaged_before || files.unfinished_repairs.size() > unfinished_before);
    }
    code = std::max(code, one);
  }
  for (const std::string& d : incomplete) {  // named on stderr already
    ++total.problems;
    code = std::max(code, kExitRefused);
    to_mend.emplace_back(d, /*damaged_files=*/true);
  }
  if (code == kExitError) return kExitError;
  const bool ok = code == kExitOk;
  PrintSummary(files, total, ok);
  for (const auto& [d, damaged_files] : to_mend) PrintMend(d, damaged_files);
  return ok ? kExitOk : kExitRefused;
}

}  // namespace

void AddCheckCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "check",
      "verify every file block and log record, then every record, cross reference, "
      "projection and the change feed");
  auto dir = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  cmd->callback([=] { *action = [=] { return CheckCmd(*dir); }; });
}

}  // namespace eventfold::cli
