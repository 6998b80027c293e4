// The command line's two waits for a store, on a Clock: opening a store that
// another process holds for a moment (`feed --follow` between its reads),
// and `feed --follow` itself, which holds the store only while it reads.
//
// The `eventfold` process passes SystemClock(): a person waits in real
// time. The waits still go through the Clock (include/eventfold/clock.h) so
// that tests drive them with a ManualClock instead of sleeping.
//
// Thread-safety: each call is independent; the callbacks run on the
// calling thread.

#ifndef EVENTFOLD_TOOLS_STORE_WAITS_H_
#define EVENTFOLD_TOOLS_STORE_WAITS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "eventfold/clock.h"
#include "eventfold/store.h"

namespace eventfold::cli {

struct BusyRetry {
  Clock* clock = SystemClock();
  // How long a store held by another process is waited for (3 s): a
  // follower lets go within one read; a running `serve` never does.
  int64_t max_wait_micros = 3 * 1000 * 1000;
  // Between attempts (50 ms).
  int64_t retry_micros = 50 * 1000;
  // Called after each kBusy answer, before the wait; may be empty (tests).
  std::function<void()> on_busy;
};

// Store::Open(dir, options), tried again every retry_micros while it
// answers kBusy, until max_wait_micros have passed on the clock. Returns the
// store, or the last error (kBusy when the store stayed held).
Result<std::unique_ptr<Store>> OpenWhenFree(const std::string& dir, const Options& options,
                                            const BusyRetry& retry = {});

// Hands the changes after `*after` to `fn` in seq order, a page at a time,
// advancing `*after` past each; the read error, if any (`fn` has then seen
// the changes before it).
Status ReadNewChanges(Store* store, uint64_t* after, const std::function<void(const Change&)>& fn);

struct FollowOptions {
  Clock* clock = SystemClock();
  // How long the store stays closed between reads (200 ms): what a change
  // may wait before it is printed, and the room ingest gets.
  int64_t poll_micros = 200 * 1000;
  // Called with each new change, in seq order.
  std::function<void(const Change&)> on_change;
  // Called when a read finds the store held by another process, once per
  // spell of such reads; may be empty.
  std::function<void()> on_busy;
  // Asked after each read, with the store closed: true ends the follow.
  std::function<bool()> stop;
};

// Follows the change feed of the store at `dir` from after seq `after`:
// opens the store (never creating it), hands each new change to on_change,
// closes it, waits poll_micros on the clock, and again, until stop(). A
// store held by another process is skipped for that round. OK once
// stopped; the error when the store cannot be opened (other than kBusy) or
// its feed read.
Status FollowFeed(const std::string& dir, uint64_t after, const FollowOptions& options);

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_STORE_WAITS_H_
