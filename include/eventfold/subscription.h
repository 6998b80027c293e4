// Subscription: a durable queue worker over a store's change feed.
//
// A subscription delivers every change of the feed (eventfold/feed.h) to a
// handler, at least once, and keeps a named checkpoint in the store: the
// highest seq below which every change is finished — handled OK, or parked
// as a dead letter. The checkpoint only ever covers a contiguous prefix of
// finished changes, so a crash re-delivers changes and never skips one.
//
// This is the queue of the "answer fast, work later" pattern: the receiver
// acknowledges a webhook as soon as it is stored, and the business work
// runs here, where a failure is retried internally instead of turning into
// a sender retry loop (see docs/QUEUE_WORKER.md).
//
//   - Order: changes of one entity are delivered one at a time, in seq
//     order; a later change is not delivered while an earlier one of the
//     same entity is being retried or is parked. Other entities flow on.
//   - Retries: a failed delivery (non-OK Status from the handler) is retried
//     with exponential backoff and jitter, timed on the injected Clock.
//     After max_attempts the change is parked in the subscription's dead
//     letters (ChangeFeed::ListParked) with every attempt's time and error text.
//   - Blocked entities: once a change is parked, every later change of its
//     entity is parked behind it too (with no attempts), so the checkpoint
//     moves on while the entity waits for an operator.
//   - Redrive: Redrive() (or `eventfold dlq retry`) marks an entity's dead
//     letters; the subscription re-delivers them in seq order, removing each
//     that succeeds and parking again, with the new attempts appended, one
//     that fails. A redrive that fails stops there: the entity stays blocked.
//     Drop() (`eventfold dlq drop`) deletes dead letters instead.
//
// A new subscription starts at the oldest change still in the feed (see
// Maintenance::TrimFeed) and registers its checkpoint at once, so retention keeps
// what it has not handled.
//
// Thread-safety: a Subscription's methods may be called from any thread.
// The handler runs on `threads` worker threads at once (never twice at once
// for the same entity), so it must be thread-safe. With threads == 0 nothing
// runs in the background: the caller drives delivery with RunUntilIdle(),
// deterministically, which is how tests and simulations use a ManualClock.
// At most one Subscription per (store, name) runs at a time in a process.

#ifndef EVENTFOLD_SUBSCRIPTION_H_
#define EVENTFOLD_SUBSCRIPTION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "eventfold/clock.h"
#include "eventfold/feed.h"
#include "eventfold/status.h"
#include "eventfold/store.h"

namespace eventfold {

// An attempt's error text is cut to this many bytes (at a UTF-8 boundary).
inline constexpr size_t kAttemptErrorBytes = 1024;

struct SubscriptionOptions {
  // The subscription's durable name: 1-128 bytes, no NUL.
  std::string name;

  // Worker threads running the handler. 0: none; RunUntilIdle() delivers on
  // the caller's thread.
  int threads = 4;

  // Deliveries of one change before it is parked (the first included).
  int max_attempts = 8;

  // The delay before attempt k+1 is
  //   min(max_backoff, initial_backoff * multiplier^(k-1)) * (1 ± jitter),
  // counted from the end of attempt k on `clock`. With the defaults: about
  // 1 s, 2 s, 4 s ... 64 s, so a change is parked about 2 minutes after its
  // first failure.
  int64_t initial_backoff_micros = 1'000'000;
  double backoff_multiplier = 2;
  int64_t max_backoff_micros = 600'000'000;
  double jitter = 0.2;  // in [0, 1): the delay varies by up to ±20%
  uint64_t seed = 1;    // of the jitter

  // Source of time for backoff and attempt times; nullptr: SystemClock().
  // Not owned; must outlive the subscription.
  Clock* clock = nullptr;

  // Changes read from the feed but not finished, at most. A change being
  // retried holds back the checkpoint, so this also bounds how far the
  // subscription reads ahead of its oldest unfinished change.
  size_t max_in_flight = 1024;

  // How often (on `clock`) a running subscription re-reads its dead letters
  // to notice redrives and drops made outside it (e.g. by ChangeFeed::Park).
  int64_t dead_letter_poll_micros = 1'000'000;
};

// Handles one change. OK: done. Any other status is a failure, retried;
// its message (or, when empty, ToString()) is recorded as the error text.
// A handler must be idempotent: a change can be delivered again after a
// crash or a Stop() that came before the checkpoint was saved.
using ChangeHandler = std::function<Status(const Change&)>;

// What a running subscription has done since Start.
struct SubscriptionStats {
  uint64_t checkpoint = 0;  // saved in the store
  uint64_t read_seq = 0;    // the newest change read from the feed
  uint64_t handled = 0;     // successful deliveries (redrives included)
  uint64_t failed = 0;      // failed attempts
  uint64_t parked = 0;      // changes parked (behind a dead letter included)
  uint64_t redriven = 0;    // dead letters handled after a redrive
  size_t in_flight = 0;     // changes read and not finished (and redrives)
  Status last_error;        // the last storage error, OK if none
};

class Subscription {
 public:
  // Loads the subscription's checkpoint and dead letters from `store` and
  // starts delivering (threads > 0) or waits for RunUntilIdle() (threads
  // == 0). `store` must outlive the subscription. kInvalidArgument for bad
  // options, kBusy when a subscription of that name already runs on that
  // Store object (ChangeFeed::ClaimSubscription; another process cannot
  // have the store open), kCorruption when the feed was trimmed past the
  // subscription's checkpoint, kUnavailable when the system refuses one of
  // its threads, or the store's error reading the feed.
  static Result<std::unique_ptr<Subscription>> Start(Store* store, SubscriptionOptions options,
                                                     ChangeHandler handler);

  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  // Stop()s.
  virtual ~Subscription() = default;

  // Stops delivering: lets running handlers finish, starts no new attempt,
  // saves the checkpoint. Changes not finished are delivered again by the
  // next Start. Idempotent.
  virtual void Stop() = 0;

  // threads == 0 only: delivers on the calling thread everything that is due
  // at the clock's current time — new changes, retries whose backoff has
  // passed, redrives — until nothing more is, then saves the checkpoint.
  // Returns a storage error met during the call (the last one; delivery
  // goes on after one: what failed is tried again), else OK;
  // kInvalidArgument when the subscription runs its own threads, and
  // kUnavailable after Stop().
  virtual Status RunUntilIdle() = 0;

  // The clock time when the earliest waiting retry is due; nullopt when
  // none waits. With a ManualClock: advance to it, then RunUntilIdle().
  virtual std::optional<int64_t> NextRetryMicros() = 0;

  // Waits until the saved checkpoint reaches `seq` (real time, at most
  // `timeout_micros`); true when it did. For threads > 0.
  [[nodiscard]] virtual bool WaitForCheckpoint(uint64_t seq, int64_t timeout_micros) = 0;

  // Marks dead letters for redrive — all of them (seq 0), or those of the
  // entity of dead letter `seq` — and has the subscription pick them up
  // now. Returns how many were marked; kNotFound for an unknown `seq`, or
  // the store's error (those marked before it stay marked).
  virtual Result<size_t> Redrive(uint64_t seq = 0) = 0;

  // Deletes dead letters — all (seq 0) or the one of `seq` — and unblocks
  // their entities once none is left. Returns how many were deleted;
  // kNotFound for an unknown `seq`, or the store's error (dead letters
  // deleted before it stay deleted).
  virtual Result<size_t> Drop(uint64_t seq = 0) = 0;

  virtual SubscriptionStats Stats() = 0;

  const std::string& name() const { return name_; }

 protected:
  explicit Subscription(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// The same as Subscription::Redrive and ::Drop, for a subscription that is
// not running in this process (the `eventfold dlq` command): the next Start
// picks the marks up. While a subscription runs in this process, use its
// methods instead, which also serialize with its own dead-letter writes.
// Each returns how many it marked or deleted; kNotFound for an unknown
// `seq`, or the store's error, with those it marked or deleted before it
// left so (a second call finishes the job).
Result<size_t> MarkForRedrive(Store* store, std::string_view subscription, uint64_t seq = 0);
Result<size_t> DropParked(Store* store, std::string_view subscription, uint64_t seq = 0);

}  // namespace eventfold

#endif  // EVENTFOLD_SUBSCRIPTION_H_
