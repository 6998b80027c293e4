// BackgroundEnv (storage/background_env.h).

#include "storage/background_env.h"

#include "core/start_thread.h"

namespace eventfold::storage {

Status BackgroundEnv::Start() {
  Status st =
      eventfold::StartThread(&thread_, "the store's LevelDB compaction", [this] { Loop(); });
  if (!st.ok()) return st;
  MutexLock lock(&mu_);
  started_ = true;
  return Status::OK();
}

BackgroundEnv::~BackgroundEnv() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundEnv::Schedule(void (*fn)(void*), void* arg) {
  {
    MutexLock lock(&mu_);
    if (started_) {
      queue_.emplace_back(fn, arg);
      cv_.notify_one();
      return;
    }
  }
  target()->Schedule(fn, arg);
}

void BackgroundEnv::Loop() {
  MutexLock lock(&mu_);
  for (;;) {
    while (queue_.empty() && !stopping_) cv_.wait(lock.native());
    if (queue_.empty()) return;  // stopping, and nothing left to run
    const auto [fn, arg] = queue_.front();
    queue_.pop_front();
    // LevelDB's work takes the database's own lock; never hold ours there.
    lock.Unlock();
    fn(arg);
    lock.Lock();
  }
}

}  // namespace eventfold::storage
