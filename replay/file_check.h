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
#include <string>

#include "eventfold/repair.h"
#include "eventfold/status.h"

namespace eventfold {

// Checks the store directory `dir` through `env` (nullptr: the default).
// Calls `on_damage` per damaged place and carries on. Fails only when the
// directory cannot be listed.
Result<FileCheckSummary> CheckFiles(const std::string& dir, leveldb::Env* env,
                                    const FileDamageFn& on_damage);

// Rewrites the table `name` in `dir` with only the entries of its intact
// blocks (written aside, synced, renamed over it), for repair: LevelDB's
// repairer reads tables without verifying block checksums and would keep a
// damaged block that still parses. Returns the entries kept; fails when the
// table cannot be opened at all (damaged footer or index block).
Result<uint64_t> RewriteIntactEntries(const std::string& dir, const std::string& name,
                                      leveldb::Env* env);

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_FILE_CHECK_H_
