// ChangeFeed: a store's change feed (eventfold/feed.h) and the durable state
// of its subscriptions (eventfold/subscription.h): checkpoints and dead
// letters. Reached through Store::feed(); valid while its Store lives.
//
// Reads follow the store's one read style: a scan calls `fn` with each item
// in order until `fn` returns false.
//
// Failures, for every method that returns a Status or Result: kCorruption
// when a stored record does not decode (a scan has then called `fn` for
// everything before it), kIOError when the store's files cannot be read or
// written (nothing is then changed), kInvalidArgument for a subscription
// name that is empty, over 128 bytes or holds a NUL.
//
// Thread-safety: every method may be called from any thread. Writes are
// synced before they return.

#ifndef EVENTFOLD_CHANGE_FEED_H_
#define EVENTFOLD_CHANGE_FEED_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/feed.h"
#include "eventfold/status.h"

namespace eventfold {

// A scan callback that appends every item to `out` and never stops early:
// `feed.Read(after, max, AppendTo(&changes))`.
template <typename T>
std::function<bool(const T&)> AppendTo(std::vector<T>* out) {
  return [out](const T& item) {
    out->push_back(item);
    return true;
  };
}

class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;

  // Calls `fn` for up to `max` changes with seq > after_seq, in seq order,
  // until it returns false. Changes below the retention point are gone
  // (Maintenance::TrimFeed); the feed has no gaps above it.
  virtual Status Read(uint64_t after_seq, size_t max,
                      const std::function<bool(const Change&)>& fn) = 0;

  // The newest change's seq (0: none yet).
  virtual uint64_t LastSeq() = 0;

  // Blocks until a change with seq > after_seq exists or `timeout_micros`
  // of real time pass (a bound on the caller's wait, not a time the store
  // decides by: not the Clock); returns LastSeq().
  virtual uint64_t WaitForChanges(uint64_t after_seq, int64_t timeout_micros) = 0;

  // A subscription's checkpoint: the highest seq below which every change is
  // handled or parked; 0 for a new subscription.
  virtual Result<uint64_t> GetCheckpoint(std::string_view subscription) = 0;
  virtual Status SetCheckpoint(std::string_view subscription, uint64_t seq) = 0;

  // Marks `subscription` as running on this store: true when claimed,
  // false while an earlier claim of it holds. Subscription::Start claims
  // (kBusy when it cannot) and the subscription's destructor releases, so
  // one store never runs two instances of a subscription, each saving a
  // checkpoint the other has not earned. The claims live in this store
  // object: nothing is shared between stores or kept on disk.
  [[nodiscard]] virtual bool ClaimSubscription(std::string_view subscription) = 0;
  // Ends a claim of ClaimSubscription; a name not claimed is ignored.
  virtual void ReleaseSubscription(std::string_view subscription) = 0;

  // Every subscription with a checkpoint, by name.
  virtual Status ListSubscriptions(
      const std::function<bool(const std::string& name, uint64_t checkpoint)>& fn) = 0;

  // Parks a change in its subscription's dead letters (replacing an earlier
  // park of the same seq).
  virtual Status Park(const ParkedChange& parked) = 0;
  // The subscription's dead letters in seq order, until `fn` returns false.
  virtual Status ListParked(std::string_view subscription,
                            const std::function<bool(const ParkedChange&)>& fn) = 0;
  // Removes one dead letter; kNotFound when it was not there.
  virtual Status Unpark(std::string_view subscription, uint64_t seq) = 0;
};

}  // namespace eventfold

#endif  // EVENTFOLD_CHANGE_FEED_H_
