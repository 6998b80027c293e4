// FeedLongPolls: change-feed long-polls parked off the HTTP server's
// workers. A client following the feed (`feed --follow --server`) asks for
// the changes after the seq it has seen and waits up to wait_ms for one.
// Held on a worker, each such wait took one of the admin listener's few
// workers for its whole length, so a handful of followers left every other
// read a 503. Parked here, a wait costs one small entry; one thread waits
// for the feed to move and answers every poll it lets through.
//
// The thread waits on ChangeFeed::WaitForChanges beyond the last seq it saw,
// so any commit wakes it; it answers a poll (through the poll's `finish`,
// which reads the page and hands over the answer) once the feed holds a
// seq past the poll's `after`, once the poll's deadline has passed, or once
// the server is stopping. Each wait lasts at most `slice`, so a new poll's
// deadline or a stop is seen within one slice.
//
// Deadlines are on steady time, as ChangeFeed::WaitForChanges's are.
//
// Thread-safety: Park and Unpark may be called from any thread. The
// destructor answers whatever is still parked (as if stopping) and joins
// the thread; `feed` must outlive this object.

#ifndef EVENTFOLD_TOOLS_FEED_LONG_POLLS_H_
#define EVENTFOLD_TOOLS_FEED_LONG_POLLS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <thread>

#include "core/thread_annotations.h"
#include "eventfold/change_feed.h"
#include "eventfold/status.h"

namespace eventfold::cli {

class FeedLongPolls {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  // Called once, on the waiting thread, when the poll may be answered.
  using Finish = std::function<void()>;

  struct Poll {
    uint64_t after = 0;   // answered once the feed holds a seq > after
    SteadyTime deadline;  // or once this passes
    Finish finish;
  };

  // `stopping` (may be null): once true, every parked poll is answered at
  // the next slice. Nothing waits before Start().
  FeedLongPolls(ChangeFeed* feed, const std::atomic<bool>* stopping,
                std::chrono::milliseconds slice);
  ~FeedLongPolls();

  // Starts the waiting thread: OK, or kUnavailable when the system refuses
  // it (then no poll may be parked). Call once, before Park.
  [[nodiscard]] Status Start();

  FeedLongPolls(const FeedLongPolls&) = delete;
  FeedLongPolls& operator=(const FeedLongPolls&) = delete;

 private:
  struct Entry {
    Poll poll;
    bool taken = false;  // the thread is answering it; Unpark gets nothing
  };

 public:
  using Ticket = std::list<Entry>::iterator;

  // Parks `poll`; the ticket takes it back with Unpark.
  Ticket Park(Poll poll) EXCLUDES(mu_);

  // Takes the poll back, unanswered, when it is still parked (true); false
  // when the thread has already taken it to answer.
  bool Unpark(Ticket ticket) EXCLUDES(mu_);

 private:
  void Loop();
  bool Stopping() const { return stopping_ != nullptr && stopping_->load(); }

  ChangeFeed* const feed_;
  const std::atomic<bool>* const stopping_;
  const std::chrono::milliseconds slice_;

  Mutex mu_;
  std::condition_variable cv_;  // with mu_: a poll parked, or quit_
  // An entry stays here, marked taken, while the thread answers it, so a
  // ticket is valid until Unpark or the answer removes it.
  std::list<Entry> polls_ GUARDED_BY(mu_);
  bool quit_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_FEED_LONG_POLLS_H_
