// IngestBatcher: stores deliveries for callers that must not wait, in groups.
//
// An event loop cannot block on a store write, and handing each delivery to
// a thread of its own that then sleeps through the group commit costs a
// wake-up and a context switch per delivery both ways; on a small machine
// that, not the disk, is what bounds an HTTP front end. Here a fixed number
// of threads each take every delivery queued so far (up to `max_batch`) and
// store them with one Store::IngestBatch: one write batch and one sync per
// group, and one wake-up of a batcher per group rather than per delivery.
// With two threads, one group is decoded and staged while the other's
// write syncs.
//
// Every delivery keeps its own outcome: IngestBatch decides each one as
// Ingest() would (duplicates within a group included), and a group's write
// either stores all of them or answers all kStorageError. A callback runs
// only after its delivery is durable (or refused and kept), on a batcher
// thread, and must not block.
//
// Thread-safety: Submit() from any thread. The destructor stores what is
// queued, runs its callbacks, then joins; no Submit() may race with it.

#ifndef EVENTFOLD_RECEIVER_INGEST_BATCHER_H_
#define EVENTFOLD_RECEIVER_INGEST_BATCHER_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <thread>
#include <vector>

#include "core/thread_annotations.h"
#include "eventfold/ingest.h"
#include "eventfold/ingest_sink.h"
#include "eventfold/status.h"
#include "eventfold/store.h"

namespace eventfold::receiver {

class IngestBatcher {
 public:
  // `store` must outlive the batcher. `threads` >= 1; a group holds at most
  // `max_batch` deliveries (>= 1).
  IngestBatcher(Store* store, size_t threads, size_t max_batch);
  ~IngestBatcher();

  IngestBatcher(const IngestBatcher&) = delete;
  IngestBatcher& operator=(const IngestBatcher&) = delete;

  // Queues `delivery`; `done` later gets its outcome, exactly once. When the
  // system refused every batcher thread, `done` gets kStorageError (503:
  // the sender retries) at once, before Submit returns.
  void Submit(Delivery delivery, IngestSink::IngestCallback done);

 private:
  struct Item {
    Delivery delivery;
    IngestSink::IngestCallback done;
  };

  void Run();

  Store* const store_;
  const size_t max_batch_;
  Mutex mu_;
  std::condition_variable cv_;  // work queued, or stopping
  std::deque<Item> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
  Status not_started_;  // set by the constructor only: why no batcher runs
};

}  // namespace eventfold::receiver

#endif  // EVENTFOLD_RECEIVER_INGEST_BATCHER_H_
