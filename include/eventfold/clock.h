// Clock: the store's only source of time.
//
// Every timestamp eventfold takes (arrival time, signature tolerance, TTLs) comes
// from the Clock in Options, so tests can drive time deterministically.
//
// Thread-safety: implementations must be safe to call from many threads.

#ifndef EVENTFOLD_CLOCK_H_
#define EVENTFOLD_CLOCK_H_

#include <atomic>
#include <cstdint>

namespace eventfold {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since the Unix epoch, UTC.
  virtual int64_t NowMicros() const = 0;
};

// The wall clock. Stateless; the returned object lives for the whole process.
Clock* SystemClock();

// A clock that only moves when told to; for tests and simulations.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t now_micros = 0) : now_(now_micros) {}
  int64_t NowMicros() const override { return now_.load(); }
  void Set(int64_t now_micros) { now_.store(now_micros); }
  void Advance(int64_t delta_micros) { now_.fetch_add(delta_micros); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace eventfold

#endif  // EVENTFOLD_CLOCK_H_
