#include "http/worker_pool.h"

#include <utility>

#include "core/start_thread.h"

namespace eventfold::http {

WorkerPool::WorkerPool(size_t queue_capacity) : capacity_(queue_capacity) {}

Status WorkerPool::Start(size_t threads) {
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    std::thread thread;
    Status st = StartThread(&thread, "the HTTP server's worker", [this] { Work(); });
    if (!st.ok()) return st;
    threads_.push_back(std::move(thread));
  }
  return Status::OK();
}

WorkerPool::~WorkerPool() { Shutdown(); }

bool WorkerPool::TrySubmit(std::function<void()> task) {
  {
    MutexLock lock(&mu_);
    if (stopping_ || tasks_.size() >= capacity_) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void WorkerPool::Work() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && tasks_.empty()) cv_.wait(lock.native());
      // Queued tasks still run after Shutdown(): each owes a client an answer.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace eventfold::http
