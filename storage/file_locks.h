// EnvOrDefault: the Env a store opens LevelDB through when the caller gave
// none (or LevelDB's default): LevelDB's default Env, with its check that
// one process locks a file once made safe.
//
// A LevelDB lock file is locked with fcntl(F_SETLK), and POSIX drops every
// fcntl lock a process holds on a file when the process closes *any*
// descriptor of that file. LevelDB's POSIX Env refuses a second lock of one
// file in one process, but only after it has opened the file, and it closes
// that descriptor to refuse: the first holder's lock is silently gone, and
// another process (an operator's `repair`, a second receiver) can then open
// the store beneath it. Its check also compares names, so one directory
// spelled two ways (through a symlink, relative and absolute) is two
// directories to it, and two databases run on one directory.
//
// The Env returned keeps the process's lock files by device and inode and
// refuses a second lock of one (IOError "lock NAME: already held by
// process", which FromLevelDb reads as kBusy) before anything opens the
// file. Its table is process-wide because fcntl locks are.
//
// An Env of the caller's own (Options::env) is used as it is: if it wraps
// LevelDB's default Env, LevelDB's own check is all it gets.
//
// Thread-safety: safe to call from many threads.

#ifndef EVENTFOLD_STORAGE_FILE_LOCKS_H_
#define EVENTFOLD_STORAGE_FILE_LOCKS_H_

#include <leveldb/env.h>

namespace eventfold::storage {

// `env`, unless it is nullptr or LevelDB's default Env: then the default
// Env with the lock check described above (one object for the process).
leveldb::Env* EnvOrDefault(leveldb::Env* env);

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_FILE_LOCKS_H_
