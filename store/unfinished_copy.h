// The mark of a backup or a restore that has not finished: a file the copy
// writes into its target directory, durable, before anything else, and
// removes last, once the copy is whole, verified and durable. A copy stopped
// in between (the process killed, the machine stopped) leaves it behind.
// Without it, LevelDB's files there could open as a store that lacks all
// that was not copied yet, and pass for a backup, or for the restored store,
// until someone looked for the missing events.
//
// Where it is found, Store::Open, repair and a restore from that directory
// refuse it (kCorruption, naming the way out), a backup or restore into it
// names it, `check` counts it as a problem, and DestroyStore removes it with
// the rest.
//
// Thread-compatible: one backup or restore owns its target.

#ifndef EVENTFOLD_STORE_UNFINISHED_COPY_H_
#define EVENTFOLD_STORE_UNFINISHED_COPY_H_

#include <leveldb/env.h>

#include <string>

#include "eventfold/backup.h"  // kUnfinishedCopyFile
#include "eventfold/status.h"

namespace eventfold {

// Writes the mark into `dir` (which exists) saying `what` is being copied
// ("a backup of S", "a restore of B"), synced with its name, before any
// file of the copy is made. On failure nothing may be copied.
[[nodiscard]] Status MarkUnfinishedCopy(leveldb::Env* env, const std::string& dir,
                                        const std::string& what);

// Removes the mark from `dir` and makes the removal durable: the copy counts
// from here on. Run after the copy's last file and name are durable.
[[nodiscard]] Status ClearUnfinishedCopy(leveldb::Env* env, const std::string& dir);

// Whether `dir` holds the mark.
bool HoldsUnfinishedCopy(leveldb::Env* env, const std::string& dir);

// What the copy `dir` holds the mark of was ("a backup of S"; "a backup or
// a restore" when the mark cannot be read), or "" when it holds none.
std::string UnfinishedCopyOf(leveldb::Env* env, const std::string& dir);

// OK when `dir` holds no mark; else kCorruption naming what the copy was
// and the way out: remove `dir` and run the copy again (its source is
// untouched; nothing in `dir` is worth keeping).
[[nodiscard]] Status RefuseUnfinishedCopy(leveldb::Env* env, const std::string& dir);

}  // namespace eventfold

#endif  // EVENTFOLD_STORE_UNFINISHED_COPY_H_
