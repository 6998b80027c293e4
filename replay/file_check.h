// FileCheck: the physical pass of `eventfold check` — every byte LevelDB
// stored, verified against its own checksums, without opening the database.
//
// LevelDB's DB::Open replays the write-ahead log and may compact, and its
// compactions (without paranoid checks) carry a damaged block forward or drop
// it silently; so the files are read here directly first:
// - every table (*.ldb, *.sst): footer (magic and zero padding), index block
//   (Table::Open with paranoid checks), meta index and filter blocks (their
//   CRC-32C, read by hand: LevelDB ignores a damaged filter), then every data
//   block through the Table iterator with verify_checksums; a damaged data
//   block is reported with the keys around it and the scan goes on past it;
// - every log file (*.log) and the MANIFEST: the 32 KiB block format of
//   LevelDB's doc/log_format.md, record by record (CRC-32C of type and
//   payload, lengths, fragment order, zero block trailers);
// - CURRENT names an existing MANIFEST.
// A log that ends inside a record whose bytes are a torn write (the process
// died mid-append, before the write was acknowledged) is not damage.
//
// Reads only. Thread-compatible: one call at a time per directory is enough.

#ifndef EVENTFOLD_REPLAY_FILE_CHECK_H_
#define EVENTFOLD_REPLAY_FILE_CHECK_H_

#include <leveldb/env.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "eventfold/repair.h"
#include "eventfold/status.h"

namespace eventfold {

// Tables a repair rewrote (RewriteIntactEntries) before LevelDB's repairer
// wrote the MANIFEST that lists their new sizes: name -> size rewritten.
using RewrittenTables = std::map<std::string, uint64_t>;

// Checks the store directory `dir` through `env` (nullptr: the default).
// Calls `on_damage` per damaged place and carries on. Fails only when the
// directory cannot be listed. A table in `rewritten` whose size is the one
// given there is checked as the table it is, not reported for differing
// from the MANIFEST: a repair stopped after rewriting it, and what the
// rewrite left out is in that repair's journal.
Result<FileCheckSummary> CheckFiles(const std::string& dir, leveldb::Env* env,
                                    const FileDamageFn& on_damage,
                                    const RewrittenTables& rewritten = {});

// Rewrites the table `name` in `dir` with only the entries of its intact
// blocks (written aside, synced, renamed over it), for repair: LevelDB's
// repairer reads tables without verifying block checksums and would keep a
// damaged block that still parses. `before_replace` (when given) is called
// with the new table's size once it is synced, before it replaces the old
// one; its error stops the rewrite, which leaves the old table as it was.
// Returns the entries kept; kCorruption when the table cannot be opened at
// all (damaged footer or index block), another error when the new table
// could not be written (the old one is left as it was).
Result<uint64_t> RewriteIntactEntries(
    const std::string& dir, const std::string& name, leveldb::Env* env,
    const std::function<Status(uint64_t size)>& before_replace = nullptr);

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_FILE_CHECK_H_
