// CommitQueue: group commit that numbers the change feed without gaps.
//
// Concurrent transactions queue their write batches; the one at the front
// (the leader) takes every queued batch (up to a size bound), gives their
// change records consecutive feed sequence numbers, appends the f/<seq>
// records, and writes the whole group as one LevelDB batch with one sync,
// while the others wait. Feed numbers are assigned in commit order and are
// only consumed by a successful write, so the feed has no gaps and a reader
// that sees seq N has seen every seq below it. This is LevelDB's own writer
// queue, one level up, where the feed numbers are known.
//
// Thread-safe. The queue's `mu_` is never held while a writer is woken.

#ifndef EVENTFOLD_STORAGE_COMMIT_QUEUE_H_
#define EVENTFOLD_STORAGE_COMMIT_QUEUE_H_

#include <leveldb/db.h>
#include <leveldb/write_batch.h>
#include <semaphore.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "core/thread_annotations.h"
#include "eventfold/feed.h"
#include "eventfold/status.h"

namespace eventfold::storage {

class CommitQueue {
 public:
  // `db` must outlive the queue. The next feed seq starts at `next_seq`.
  CommitQueue(leveldb::DB* db, uint64_t next_seq) : db_(db), next_seq_(next_seq) {}

  // Writes `batch` plus one f/ record per element of `changes` (whose seq
  // fields are set on success), synced when `sync` (a synced group syncs
  // every write in it). Returns the write's status. `batch` is spent: the
  // group may be gathered into it.
  Status Commit(leveldb::WriteBatch* batch, std::vector<Change>* changes, bool sync);

  // The highest feed seq written so far (0: none).
  uint64_t last_seq() const;

  // Goes on from feed seq `next_seq`, as re-read from the store after its
  // database was reopened. Only while no Commit runs.
  void Reset(uint64_t next_seq);

  // Blocks until a feed seq above `after` is written or `timeout_micros`
  // passes; returns last_seq().
  uint64_t WaitBeyond(uint64_t after, int64_t timeout_micros) const;

 private:
  // A queued commit. Each waits on a semaphore of its own, posted once: to
  // lead, or because its group was written. Not a mutex and condition
  // variable: the waker would signal while holding the mutex (so that the
  // waiter cannot return and destroy it first), and the woken thread would
  // then block again on that mutex, a second sleep and wake-up for every
  // commit. glibc's sem_post touches the semaphore only by its atomic add
  // and the futex wake on its address, so the waiter may return and destroy
  // it as soon as the count is up (POSIX allows sem_destroy then; a wake-up
  // landing on reused memory is a spurious one, which futex waiters allow).
  struct Writer {
    enum class State { kWaiting, kLeading, kDone };
    Writer(leveldb::WriteBatch* b, std::vector<Change>* c, bool s) : batch(b), changes(c), sync(s) {
      sem_init(&woken, /*pshared=*/0, /*value=*/0);
    }
    ~Writer() { sem_destroy(&woken); }
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    leveldb::WriteBatch* batch;
    std::vector<Change>* changes;
    bool sync;
    Status status;  // set before kDone, read after it
    std::atomic<State> state{State::kWaiting};
    sem_t woken;  // posted once, after `state` left kWaiting
  };

  // Sets `w`'s state and posts it; `w` may be gone once this returns.
  static void Wake(Writer* w, Writer::State to);

  leveldb::DB* db_;
  // Guards the queue and the next feed seq; never held while writing or
  // while a writer is woken.
  mutable Mutex mu_;
  mutable std::condition_variable feed_cv_;      // signalled when the feed grows
  std::deque<Writer*> writers_ GUARDED_BY(mu_);  // the front one leads
  uint64_t next_seq_ GUARDED_BY(mu_);
};

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_COMMIT_QUEUE_H_
