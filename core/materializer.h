// Materializer: keeps one entity's projection equal to the fold of its log.
//
// An event that sorts after every event already folded is applied to the
// projection directly (the common, in-order case: O(1)). An event that sorts
// earlier — late, reordered — re-folds the entity, but only from the nearest
// fold snapshot before the event's position: snapshots are taken every
// `snapshot_interval` events, so a late arrival costs at most about one
// interval of events, however long the entity's log is. Snapshots are a
// cache: without any, the result is the same (a fold from state none).
// Pure computation over the LogView it is handed; thread-safe.

#ifndef EVENTFOLD_CORE_MATERIALIZER_H_
#define EVENTFOLD_CORE_MATERIALIZER_H_

#include <optional>
#include <span>
#include <vector>

#include "core/fold.h"
#include "eventfold/profile.h"
#include "eventfold/status.h"

namespace eventfold {

// One entity's stored log and snapshots, as the materializer needs them.
class LogView {
 public:
  virtual ~LogView() = default;
  // The latest snapshot taken strictly before `key` in fold order, if any.
  virtual Result<std::optional<ProjectionState>> SnapshotBefore(const FoldKey& key) = 0;
  // Appends, in fold order, every logged event after `after` (all when null).
  virtual Status EventsAfter(const FoldKey* after, std::vector<RankedEvent>* out) = 0;
};

// What a materialization leaves to store besides the projection.
struct Materialized {
  std::vector<ProjectionState> snapshots;  // new snapshots to keep
  std::optional<FoldKey> stale_after;      // stored snapshots after this are stale
  uint64_t events_folded = 0;              // work done: 1 for a direct apply
};

// Sets `state` to the entity's state before any event: state none.
void StartFromNone(const EntityRef& ref, ProjectionState* state);

// Applies one event to `state` and advances its cursor. Fails (Corruption,
// `state` unchanged) when the event's rank is outside the type's transitions.
[[nodiscard]] Status ApplyToState(const EntityType& type, const RankedEvent& event,
                                  ProjectionState* state);

// Folds `sorted` (fold order) onto `state` (events == 0: from none), adding
// a snapshot to `snapshots` whenever the event count reaches a multiple of
// `interval` (0: never). Stops at the first event ApplyToState refuses and
// returns its status.
[[nodiscard]] Status FoldOnto(const EntityType& type, const EntityRef& ref,
                              std::span<const RankedEvent> sorted, uint64_t interval,
                              ProjectionState* state, std::vector<ProjectionState>* snapshots);

// Reads the data of an event that was decoded without it (its data_from)
// into event.data, and clears data_from; nothing for any other event.
// Fails as DecodeEvent does, which for a body it once accepted it does not.
[[nodiscard]] Status CompleteData(RankedEvent* event);

// Adds `event` to `state` (state->events == 0 for an entity without events).
// `state` may be cursor_only: it is then folded whole from the log before a
// snapshot is taken from it (and whole after any re-fold). An event without
// its data (data_from) applied in order leaves `state` cursor_only; for a
// snapshot or a re-fold its data is read first. `log` must give events with
// their data. `stale_after` is set only when the event was late.
Result<Materialized> Materialize(const EntityType& type, const EntityRef& ref,
                                 const RankedEvent& event, LogView& log, uint64_t snapshot_interval,
                                 ProjectionState* state);

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_MATERIALIZER_H_
