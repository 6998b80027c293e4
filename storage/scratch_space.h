// Scratch space beside a store: the directories eventfold makes next to
// DIR for a while and removes (DIR.rebuild for a rebuild's sort runs,
// DIR.verify and DIR.check for the stores a verify and a check build aside,
// DIR.check-copy for the copy `eventfold check` opens).
//
// Those are names an operator may well have used for something of their
// own (a backup at DIR.verify), and a scratch directory is emptied at its
// start and removed at its end. So eventfold writes a mark file
// (kScratchMark) into each one it creates, and empties or removes a
// directory at such a path only when it is its own: marked, empty, or
// (before the mark existed) holding nothing but a rebuild's run files. Any
// other is refused with a status naming it, and nothing in it is touched.
//
// Thread-safety: the functions are safe to call from many threads on
// different paths; one path is one caller's at a time.

#ifndef EVENTFOLD_STORAGE_SCRATCH_SPACE_H_
#define EVENTFOLD_STORAGE_SCRATCH_SPACE_H_

#include <leveldb/env.h>

#include <string>

#include "eventfold/status.h"

namespace eventfold::storage {

// The file that marks a directory as eventfold's scratch space.
inline constexpr char kScratchMark[] = "EVENTFOLD-SCRATCH";

enum class ScratchState {
  kAbsent,   // nothing at the path
  kOurs,     // marked, empty, or only a rebuild's run files (run-<n>.tmp)
  kForeign,  // anything else: never emptied or removed
};

// What is at `path`.
ScratchState InspectScratch(leveldb::Env* env, const std::string& path);

// Makes `path` an empty, marked scratch directory: creates it, or empties
// one of ours. kInvalidArgument naming the path, with nothing touched,
// when something else is there; an I/O error otherwise.
Status ClaimScratch(leveldb::Env* env, const std::string& path);

// Removes the scratch directory at `path` and everything in it (its
// subdirectories too). OK when nothing is there; kInvalidArgument naming
// the path, with nothing touched, when it is not ours.
Status ReleaseScratch(leveldb::Env* env, const std::string& path);

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_SCRATCH_SPACE_H_
