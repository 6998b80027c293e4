// Clock: the store's only source of time.
//
// Every timestamp eventfold takes (arrival time, signature tolerance, TTLs) comes
// from the Clock in Options, and every wait for a time that decides what
// the store does (the background gc's next pass, the recovery backoff, a
// subscription's retries, a rebuild's progress ticks) waits on it too, so
// tests drive time deterministically and never sleep for it. Timeouts that
// only bound how long a caller waits for another thread (e.g.
// ChangeFeed::WaitForChanges, Subscription::WaitForCheckpoint) and the HTTP
// server's network deadlines are real time, and say so.
//
// Thread-safety: implementations must be safe to call from many threads.

#ifndef EVENTFOLD_CLOCK_H_
#define EVENTFOLD_CLOCK_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>

namespace eventfold {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since the Unix epoch, UTC.
  virtual int64_t NowMicros() const = 0;

  // Waits on `cv` with `lock` held (as std::condition_variable::wait does)
  // until this clock reaches `deadline_micros` or `cv` is notified; it may
  // also return early, so callers re-check their condition and NowMicros()
  // in a loop. The default waits for the real time left.
  virtual void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         int64_t deadline_micros) const;

  // Returns once this clock has reached `deadline_micros` (a ManualClock:
  // once it has been moved that far); nothing else ends the wait. For
  // pacing retries, where there is no condition to wake up for.
  void SleepUntil(int64_t deadline_micros) const;
};

// The wall clock. Stateless; the returned object lives for the whole process.
Clock* SystemClock();

// A clock that only moves when told to; for tests and simulations. Set and
// Advance wake every thread in WaitUntil, which then re-checks the time.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t now_micros = 0) : now_(now_micros) {}
  int64_t NowMicros() const override { return now_.load(); }
  void Set(int64_t now_micros) {
    now_.store(now_micros);
    WakeWaiters();
  }
  void Advance(int64_t delta_micros) {
    now_.fetch_add(delta_micros);
    WakeWaiters();
  }
  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 int64_t deadline_micros) const override;

 private:
  void WakeWaiters() const;

  std::atomic<int64_t> now_;
  mutable std::mutex waiters_mu_;  // taken after a waiter's own lock, never before
  mutable std::multiset<std::condition_variable*> waiters_;
};

}  // namespace eventfold

#endif  // EVENTFOLD_CLOCK_H_
