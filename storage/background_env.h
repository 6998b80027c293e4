// BackgroundEnv: runs the background work LevelDB schedules (memtable
// flushes, compactions) on a thread of its own, asked for once by Start,
// instead of on the thread LevelDB's POSIX Env starts lazily at the first
// Schedule in the process.
//
// That lazy thread is made inside LevelDB with its locks held. When the
// system refuses it (std::thread throws at a task limit) there is nothing
// to report the refusal to: the exception leaves LevelDB with its locks
// still held, and the database hangs at its next use (seen under a thread
// limit: a rebuild waited for ever to release a snapshot). Here the thread
// is asked for up front, where a refusal is a Status (kUnavailable) and the
// open that asked fails cleanly. One per store, so a store holds no
// process-wide state; the store's databases (its own and the quarantine's)
// share it, and its work items run one at a time in the order scheduled,
// as on LevelDB's one thread.
//
// Thread-safe. Destroy it only after every database using it is closed
// (a database's destructor waits for the work it scheduled).

#ifndef EVENTFOLD_STORAGE_BACKGROUND_ENV_H_
#define EVENTFOLD_STORAGE_BACKGROUND_ENV_H_

#include <leveldb/env.h>

#include <condition_variable>
#include <deque>
#include <thread>
#include <utility>

#include "core/thread_annotations.h"
#include "eventfold/status.h"
#include "storage/dir_sync.h"

namespace eventfold::storage {

class BackgroundEnv : public DirSyncEnv {
 public:
  explicit BackgroundEnv(leveldb::Env* target) : DirSyncEnv(target) {}
  // Runs what is still queued, then joins the thread.
  ~BackgroundEnv() override;
  BackgroundEnv(const BackgroundEnv&) = delete;
  BackgroundEnv& operator=(const BackgroundEnv&) = delete;

  // Starts the thread: OK, or kUnavailable when the system refuses it.
  // Call once, before any database is opened on this Env; until it
  // succeeds, Schedule goes to the wrapped Env.
  [[nodiscard]] Status Start();

  void Schedule(void (*fn)(void*), void* arg) override;
  leveldb::Status SyncDir(const std::string& dir) override { return SyncDirOf(target(), dir); }

 private:
  void Loop();

  Mutex mu_;
  std::condition_variable cv_;  // work queued, or stopping
  std::deque<std::pair<void (*)(void*), void*>> queue_ GUARDED_BY(mu_);
  bool started_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_BACKGROUND_ENV_H_
