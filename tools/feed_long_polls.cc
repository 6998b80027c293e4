#include "tools/feed_long_polls.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/start_thread.h"

namespace eventfold::cli {

FeedLongPolls::FeedLongPolls(ChangeFeed* feed, const std::atomic<bool>* stopping,
                             std::chrono::milliseconds slice)
    : feed_(feed), stopping_(stopping), slice_(slice) {}

Status FeedLongPolls::Start() {
  return StartThread(&thread_, "the admin API's long-polls", [this] { Loop(); });
}

FeedLongPolls::~FeedLongPolls() {
  {
    MutexLock lock(&mu_);
    quit_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

FeedLongPolls::Ticket FeedLongPolls::Park(Poll poll) {
  Ticket ticket;
  {
    MutexLock lock(&mu_);
    ticket = polls_.insert(polls_.end(), Entry{std::move(poll)});
  }
  cv_.notify_all();
  return ticket;
}

bool FeedLongPolls::Unpark(Ticket ticket) {
  MutexLock lock(&mu_);
  if (ticket->taken) return false;
  polls_.erase(ticket);
  return true;
}

void FeedLongPolls::Loop() {
  MutexLock lock(&mu_);
  while (true) {
    while (!quit_ && polls_.empty()) cv_.wait(lock.native());
    if (polls_.empty()) return;  // quitting, and nothing is owed
    // `last` is read under mu_, so a poll parked after this pass re-reads
    // the feed after it (the caller of Park checks once more): either the
    // caller sees its change, or the change is beyond `last` and wakes the
    // wait below.
    const uint64_t last = feed_->LastSeq();
    const SteadyTime now = std::chrono::steady_clock::now();
    const bool ending = quit_ || Stopping();
    SteadyTime wake = now + slice_;
    std::vector<Ticket> ready;
    for (Ticket t = polls_.begin(); t != polls_.end(); ++t) {
      if (t->taken) continue;
      if (ending || t->poll.after < last || t->poll.deadline <= now) {
        t->taken = true;
        ready.push_back(t);
      } else {
        wake = std::min(wake, t->poll.deadline);
      }
    }
    lock.Unlock();
    if (ready.empty()) {
      const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(wake - now).count();
      feed_->WaitForChanges(last, std::max<int64_t>(micros, 0));
    } else {
      // A taken entry is touched by this thread alone until erased.
      for (Ticket t : ready) t->poll.finish();
    }
    lock.Lock();
    for (Ticket t : ready) polls_.erase(t);
  }
}

}  // namespace eventfold::cli
