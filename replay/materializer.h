// Materializer: keeps one entity's projection equal to the fold of its log.
//
// An event that sorts after every event already folded is applied to the
// stored projection directly (the common, in-order case: O(1)). An event that
// sorts earlier — late, reordered — re-folds the entity from its whole log,
// so the result is always the fold of SPEC §4 over the set of stored events.
// Pure computation over the log it is handed; thread-safe.

#ifndef EVENTFOLD_REPLAY_MATERIALIZER_H_
#define EVENTFOLD_REPLAY_MATERIALIZER_H_

#include <functional>
#include <vector>

#include "core/fold.h"
#include "eventfold/profile.h"
#include "eventfold/status.h"
#include "storage/record_codec.h"

namespace eventfold {

// Appends every event already in the entity's log to `out`.
using LogLoader = std::function<Status(std::vector<RankedEvent>* out)>;

// Folds a complete log into a projection state (sorting `events`).
storage::ProjectionState FoldLog(const EntityType& type, const EntityRef& ref,
                                 std::vector<RankedEvent>* events);

// Adds `event` to `state` (state->events == 0 for an entity without events),
// calling `load` only when a re-fold is needed.
Status Materialize(const EntityType& type, const EntityRef& ref,
                   const RankedEvent& event, const LogLoader& load,
                   storage::ProjectionState* state);

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_MATERIALIZER_H_
