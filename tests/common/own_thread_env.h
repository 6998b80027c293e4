// OwnThreadEnv: the default LevelDB Env with a background thread of its own,
// for stores opened in a forked child.
//
// LevelDB's default Env starts its one background (compaction) thread lazily
// and remembers that it did; a child forked after the parent used it would
// inherit "started" without the thread, and any write that waits for a
// compaction would hang. A forked child therefore runs its store on this
// Env: file I/O through the default one, its own thread.

#ifndef EVENTFOLD_TESTS_COMMON_OWN_THREAD_ENV_H_
#define EVENTFOLD_TESTS_COMMON_OWN_THREAD_ENV_H_

#include <leveldb/env.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace eventfold::test_util {

class OwnThreadEnv final : public leveldb::EnvWrapper {
 public:
  OwnThreadEnv() : EnvWrapper(leveldb::Env::Default()) {}
  ~OwnThreadEnv() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void Schedule(void (*fn)(void*), void* arg) override {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    queue_.emplace_back(fn, arg);
    cv_.notify_one();
  }
  void StartThread(void (*fn)(void*), void* arg) override { std::thread(fn, arg).detach(); }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto [fn, arg] = queue_.front();
      queue_.pop_front();
      lock.unlock();
      fn(arg);
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<void (*)(void*), void*>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_OWN_THREAD_ENV_H_
