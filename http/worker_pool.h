// WorkerPool: a fixed number of threads running submitted tasks from a
// bounded queue, so blocking work (the receiver's store ingest) stays off the
// event loop's threads and the work waiting for them is bounded.
//
// Thread-safety: TrySubmit() from any thread; Shutdown() (also run by the
// destructor) from one thread, after which TrySubmit() refuses.

#ifndef EVENTFOLD_HTTP_WORKER_POOL_H_
#define EVENTFOLD_HTTP_WORKER_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "core/thread_annotations.h"
#include "eventfold/status.h"

namespace eventfold::http {

class WorkerPool {
 public:
  // At most `queue_capacity` tasks wait for a thread; none runs before
  // Start().
  explicit WorkerPool(size_t queue_capacity);
  ~WorkerPool();

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts `threads` threads: OK, or kUnavailable when the system refuses
  // one (Shutdown() then joins those that started). Call once.
  [[nodiscard]] Status Start(size_t threads);

  // Queues `task`; false (task dropped) when the queue is full or the pool
  // is shutting down.
  [[nodiscard]] bool TrySubmit(std::function<void()> task);

  // Runs the tasks already queued, then joins the threads. Idempotent.
  void Shutdown();

 private:
  void Work();

  const size_t capacity_;
  Mutex mu_;
  std::condition_variable cv_;  // a task queued, or stopping
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // Shutdown()'s thread only
};

}  // namespace eventfold::http

#endif  // EVENTFOLD_HTTP_WORKER_POOL_H_
