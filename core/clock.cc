#include "eventfold/clock.h"

#include <chrono>

namespace eventfold {
namespace {

class WallClock final : public Clock {
 public:
  int64_t NowMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

void Clock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                      int64_t deadline_micros) const {
  const int64_t left = deadline_micros - NowMicros();
  if (left > 0) cv.wait_for(lock, std::chrono::microseconds(left));
}

void Clock::SleepUntil(int64_t deadline_micros) const {
  std::mutex mu;
  std::condition_variable cv;  // nothing notifies it but the clock
  std::unique_lock lock(mu);
  while (NowMicros() < deadline_micros) WaitUntil(lock, cv, deadline_micros);
}

void ManualClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                            int64_t deadline_micros) const {
  {
    std::lock_guard guard(waiters_mu_);
    waiters_.insert(&cv);
  }
  // Registered before the time is read, so a move after this read notifies
  // `cv`. The notification does not hold `lock` (that would order the locks
  // both ways), so it can land just before this thread blocks: the short
  // real-time bound turns that rare miss into a brief delay, not a hang.
  if (NowMicros() < deadline_micros) cv.wait_for(lock, std::chrono::milliseconds(5));
  std::lock_guard guard(waiters_mu_);
  waiters_.erase(waiters_.find(&cv));
}

void ManualClock::WakeWaiters() const {
  std::lock_guard guard(waiters_mu_);
  for (std::condition_variable* cv : waiters_) cv->notify_all();
}

Clock* SystemClock() {
  static WallClock clock;  // stateless, so sharing it keeps stores independent
  return &clock;
}

}  // namespace eventfold
