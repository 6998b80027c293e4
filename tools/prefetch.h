// Prefetch<T> runs a producer on a thread of its own, one item ahead of the
// consumer: while the caller works on one item (for `eventfold ingest`, a
// batch's write and sync), the next is being made (the next batch's lines
// read and parsed). When the system refuses the thread, Next() makes each
// item on the caller's thread instead: the same items in the same order,
// made one at a time as they are asked for.
//
// Thread-safety: Next() is called from one thread. The producer runs on the
// Prefetch's own thread and touches nothing the consumer does. At most
// `depth` finished items wait, so memory stays bounded whatever the producer's
// speed. The destructor asks the producer to stop after its current item and
// joins it.

#ifndef EVENTFOLD_TOOLS_PREFETCH_H_
#define EVENTFOLD_TOOLS_PREFETCH_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "core/start_thread.h"
#include "core/thread_annotations.h"

namespace eventfold::cli {

template <typename T>
class Prefetch {
 public:
  // `produce` returns the next item, or nullopt at the end (called on the
  // Prefetch's thread until it returns nullopt or the Prefetch is destroyed;
  // on the caller's, inside Next(), when `own_thread` is false or the system
  // refuses the thread: then threaded() is false).
  explicit Prefetch(std::function<std::optional<T>()> produce, size_t depth = 1,
                    bool own_thread = true)
      : produce_(std::move(produce)), depth_(depth == 0 ? 1 : depth) {
    if (own_thread) threaded_ = StartThread(&thread_, "the read-ahead", [this] { Run(); }).ok();
  }

  Prefetch(const Prefetch&) = delete;
  Prefetch& operator=(const Prefetch&) = delete;

  ~Prefetch() {
    {
      MutexLock l(&mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Whether items are made ahead on a thread of the Prefetch's own.
  bool threaded() const { return threaded_; }

  // The next item in the producer's order, waiting for it to be made;
  // nullopt once the producer has returned nullopt.
  std::optional<T> Next() {
    if (!threaded_) return NextInline();
    MutexLock l(&mu_);
    while (ready_.empty() && !done_) cv_.wait(l.native());
    if (ready_.empty()) return std::nullopt;
    std::optional<T> item = std::move(ready_.front());
    ready_.pop_front();
    cv_.notify_all();
    return item;
  }

 private:
  std::optional<T> NextInline() {
    if (inline_done_) return std::nullopt;
    std::optional<T> item = produce_();
    inline_done_ = !item;
    return item;
  }

  void Run() {
    for (;;) {
      std::optional<T> item = produce_();
      MutexLock l(&mu_);
      if (!item) {
        done_ = true;
        cv_.notify_all();
        return;
      }
      ready_.push_back(std::move(*item));
      cv_.notify_all();
      while (ready_.size() >= depth_ && !stop_) cv_.wait(l.native());
      if (stop_) return;
    }
  }

  std::function<std::optional<T>()> produce_;  // only on thread_, or inline
  const size_t depth_;
  bool threaded_ = false;     // the constructor's; read by the consumer only
  bool inline_done_ = false;  // without a thread: produce_ returned nullopt
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<T> ready_ GUARDED_BY(mu_);
  bool done_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // started in the constructor, once the members above exist
};

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_PREFETCH_H_
