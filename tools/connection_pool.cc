#include "tools/connection_pool.h"

#include <atomic>
#include <utility>

namespace eventfold::cli {
namespace {

thread_local bool running_overflow = false;

}  // namespace

ConnectionPool::ConnectionPool(size_t workers) : free_(workers) {
  workers_.reserve(workers);
  for (size_t i = 0; i < workers; ++i) workers_.emplace_back([this] { Work(); });
}

ConnectionPool::~ConnectionPool() { shutdown(); }

bool ConnectionPool::RunningOverflow() { return running_overflow; }

void ConnectionPool::enqueue(std::function<void()> task) {
  std::lock_guard lock(mu_);
  ReapOverflow();
  if (free_ > 0) {
    --free_;
    tasks_.push_back(std::move(task));
    cv_.notify_one();
    return;
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  overflow_.push_back({std::thread([task = std::move(task), done] {
                         running_overflow = true;
                         task();
                         done->store(true, std::memory_order_release);
                       }),
                       done});
}

void ConnectionPool::shutdown() {
  std::list<Overflow> overflow;
  {
    std::lock_guard lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
    overflow.swap(overflow_);
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  for (Overflow& o : overflow) o.thread.join();
}

void ConnectionPool::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return shutdown_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // shut down, nothing left to serve
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
    std::lock_guard lock(mu_);
    ++free_;
  }
}

void ConnectionPool::ReapOverflow() {
  for (auto it = overflow_.begin(); it != overflow_.end();) {
    if (it->done->load(std::memory_order_acquire)) {
      it->thread.join();
      it = overflow_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace eventfold::cli
