// Offline care of a store directory that no Store has open: the physical
// file check `eventfold check` runs before anything opens the database,
// repair after damage, and restore from a backup (Maintenance::Backup).
//
// The file check and repair fail with kBusy while a Store holds the
// directory, and a restore refuses a directory that is not empty. Each
// holds LevelDB's lock on the directory from its first step to its last
// (its own opens of the store included), so a Store opening it meanwhile,
// in this process or another, fails with kBusy.
// Thread-safety: any number may run at once on different directories.

#ifndef EVENTFOLD_REPAIR_H_
#define EVENTFOLD_REPAIR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eventfold/options.h"
#include "eventfold/status.h"

namespace eventfold {

// One damaged place in one of LevelDB's files.
struct FileDamage {
  std::string file;     // name inside the store directory
  uint64_t offset = 0;  // the damaged bytes lie in [offset, end)
  uint64_t end = 0;     // 0: up to the end of the file
  // The user keys around the damage, printable (\xNN); empty when unknown.
  // Keys strictly between them, in that file, may be lost. For a
  // write-ahead log, the event keys (a/) of the intact records on either
  // side of it in that log, and keys after `before` may be lost too:
  // LevelDB's repairer reads a log without checksums, and a damaged length
  // can take it past records that verify.
  std::string after_key;
  std::string before_key;
  std::string after_raw;  // the same two keys as stored (raw bytes)
  std::string before_raw;
  std::string message;  // what is wrong
};

// What the file check read.
struct FileCheckSummary {
  uint64_t tables = 0;       // table files
  uint64_t data_blocks = 0;  // filter blocks verified by hand
  uint64_t entries = 0;      // table entries read intact
  uint64_t logs = 0;         // log files, the MANIFEST included
  uint64_t log_records = 0;  // intact physical log records
  uint64_t torn_tails = 0;   // logs ending in a torn, never acknowledged append
  // Tables and logs the MANIFEST no longer lists, not read: left-overs
  // (e.g. of a compaction a close interrupted) LevelDB deletes on open.
  std::vector<std::string> unreferenced;
  uint64_t damaged = 0;  // damage reports; 0: every file is intact
  // Journals (in dir/lost/) of repairs that stopped before their end: the
  // next RepairStore finishes the work and reports their losses again.
  std::vector<std::string> unfinished_repairs;
  // Not empty when `dir` is a backup or a restore that was stopped before
  // it finished: what it was copying ("a backup of S"). Such a directory is
  // no store (Store::Open refuses it) and nothing in it needs saving: remove
  // it and run the copy again.
  std::string unfinished_copy;
};

using FileDamageFn = std::function<void(const FileDamage&)>;

// Verifies every byte LevelDB stored in `dir` against its checksums without
// opening the database (replay/file_check.h): every table's data, index,
// meta index and filter blocks and footer, every log file and the MANIFEST
// record by record, CURRENT. Calls `on_damage` per damaged place and goes
// on past it. Also lists the journals of repairs that did not finish
// (FileCheckSummary::unfinished_repairs). A backup or a restore that did not
// finish is reported as such (FileCheckSummary::unfinished_copy) and its
// files are not read: they were never whole. Fails with kBusy while a Store
// holds `dir`, kIOError when the directory or a repair's journal cannot be
// read. Uses options.env; reads only.
Result<FileCheckSummary> CheckStoreFiles(const std::string& dir, const Options& options,
                                         const FileDamageFn& on_damage);

// A check opens a damaged store's copy, never the store: an open runs
// LevelDB's recovery, which changes the files. CopyStoreAside copies `dir`
// (subdirectories too) to DIR.check-copy, eventfold's scratch space beside
// it, and returns that path; RemoveStoreCopy removes it. Both fail with
// kInvalidArgument, touching nothing, when a directory of that name exists
// that eventfold did not make (say, a backup kept there); CopyStoreAside
// fails with kIOError, leaving no copy, when the copy cannot be made.
Result<std::string> CopyStoreAside(const std::string& dir);
Status RemoveStoreCopy(const std::string& copy);

// What a repair could not save, as something the operator can act on.
struct LostData {
  enum class Kind {
    kEvent,    // one event, known by id (its dedup entry survived): ask the
               // sender to resend it; a resend is accepted as new
    kWindow,   // events received in [received_from, received_to] may be lost
               // (ids unknown): ask the sender to resend that window
    kChanges,  // change feed records [first_seq, last_seq] were lost and are
               // placeholders now (entity ""): subscribers past them resync
    kRecords,  // other stored records dropped as unreadable (detail says which)
  };
  Kind kind = Kind::kRecords;
  std::string event_id;  // kEvent
  std::string type;      // kEvent
  int64_t occurred_at = 0;
  int64_t received_from = 0;  // kWindow, microseconds since the epoch; 0: unbounded
  int64_t received_to = 0;
  uint64_t first_seq = 0;  // kChanges
  uint64_t last_seq = 0;
  std::string detail;  // where it was found and why
};

// What a repair did.
struct RepairSummary {
  uint64_t damaged = 0;         // damaged places the file check found first
  uint64_t dropped = 0;         // unreadable records deleted
  uint64_t lost_events = 0;     // LostData kEvent reported
  uint64_t lost_windows = 0;    // LostData kWindow reported
  uint64_t dedup_restored = 0;  // dedup entries written again from their events
  uint64_t feed_filled = 0;     // placeholder changes written into feed gaps
  uint64_t events = 0;          // events the repaired store holds
  uint64_t problems_left = 0;   // what the final check still found (0: clean)
  double seconds = 0;
  // This repair's journal: dir/lost/repair-<start time>.ndjson, every
  // damaged place and every loss it found, kept in the store directory.
  std::string journal;
  uint64_t resumed = 0;  // unfinished repairs this one took over
};

using LostDataFn = std::function<void(const LostData&)>;

// Salvages the damaged store at `dir`: the file check first (to know where
// the damage is), then LevelDB's repairer (it keeps every readable record and
// writes a new MANIFEST; unreadable tables go to dir/lost/), then the stored
// records are reconciled — unreadable ones deleted, a dedup entry whose event
// is gone reported (kEvent) and deleted so a resend is accepted, an event
// without its dedup entry given one again, feed gaps filled with placeholders
// (kChanges) — and everything derived (logs, projections, fold snapshots) is
// rebuilt. Calls `on_lost` for each thing lost. Ends with the file check and
// Maintenance::Check: problems_left counts what they still found. A store in an
// older format is upgraded to this build's on the way (as by
// Options::upgrade_format). Fails with kInvalidArgument for an empty path,
// kNotFound when `dir` holds no file of LevelDB's, kCorruption when it is a
// backup or a restore that did not finish (eventfold/backup.h: there is
// nothing to salvage, its source holds it all), kBusy while a Store holds
// `dir`, or with the error that stopped it.
//
// Repairing a backup removes its manifest first (eventfold/backup.h): what
// the repair keeps is restored as a backup without one.
//
// Each repair keeps a journal in dir/lost/ (RepairSummary::journal): the
// damage the file check found, on disk before anything is changed, and
// each loss, on disk before the write that drops what it names. A repair
// that stopped (killed, or failed) leaves its journal unfinished; the next
// repair takes over its damage and calls `on_lost` again for every loss
// it had listed, so the list of what to resend survives either, and a power
// cut: the journal's name (and lost/'s) is synced with its first lines, and
// every name the repair wrote in `dir` and lost/ is synced before the
// journal's last line.
Result<RepairSummary> RepairStore(const std::string& dir, const Options& options,
                                  const LostDataFn& on_lost);

}  // namespace eventfold

#endif  // EVENTFOLD_REPAIR_H_
