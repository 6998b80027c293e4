#include "tools/store_waits.h"

#include <vector>

namespace eventfold::cli {

Result<std::unique_ptr<Store>> OpenWhenFree(const std::string& dir, const Options& options,
                                            const BusyRetry& retry) {
  const int64_t deadline = retry.clock->NowMicros() + retry.max_wait_micros;
  Result<std::unique_ptr<Store>> store = Store::Open(dir, options);
  // After each wait one more attempt, even past the deadline: a store let
  // go during the last wait is taken.
  while (store.status().IsBusy() && retry.clock->NowMicros() < deadline) {
    // The wake-up time is taken before on_busy: a test that moves the
    // clock from there moves it past this wait.
    const int64_t next = retry.clock->NowMicros() + retry.retry_micros;
    if (retry.on_busy) retry.on_busy();
    retry.clock->SleepUntil(next);
    store = Store::Open(dir, options);
  }
  return store;
}

Status ReadNewChanges(Store* store, uint64_t* after, const std::function<void(const Change&)>& fn) {
  constexpr size_t kPage = 1000;
  while (true) {
    std::vector<Change> page;
    Status st = store->feed().Read(*after, kPage, AppendTo<Change>(&page));
    if (!st.ok()) return st;
    for (const Change& c : page) {
      fn(c);
      *after = c.seq;
    }
    if (page.size() < kPage) return Status::OK();
  }
}

Status FollowFeed(const std::string& dir, uint64_t after, const FollowOptions& options) {
  Options store_options;
  store_options.create_if_missing = false;
  store_options.clock = options.clock;
  bool busy = false;
  while (true) {
    {  // the store is closed at the end of this block, before the wait
      Result<std::unique_ptr<Store>> store = Store::Open(dir, store_options);
      if (store.ok()) {
        busy = false;
        Status st = ReadNewChanges(store->get(), &after, options.on_change);
        if (!st.ok()) return st;
      } else if (!store.status().IsBusy()) {
        return store.status();
      } else if (!busy) {  // a writer has it now; the next round tries again
        busy = true;
        if (options.on_busy) options.on_busy();
      }
    }
    const int64_t next = options.clock->NowMicros() + options.poll_micros;  // before stop(), as
    if (options.stop && options.stop()) return Status::OK();                // in OpenWhenFree
    options.clock->SleepUntil(next);
  }
}

}  // namespace eventfold::cli
