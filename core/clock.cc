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

Clock* SystemClock() {
  static WallClock clock;  // stateless, so sharing it keeps stores independent
  return &clock;
}

}  // namespace eventfold
