#include "core/materializer.h"

#include <algorithm>

namespace eventfold {

void StartFromNone(const EntityRef& ref, ProjectionState* state) {
  *state = ProjectionState{};
  state->projection.entity = ref.entity;
  state->projection.id = ref.id;
}

void ApplyToState(const EntityType& type, const RankedEvent& event, ProjectionState* state) {
  ApplyEvent(type.transitions[event.rank], event.event, &state->projection);
  state->last = KeyOf(event.event, event.rank);
  ++state->events;
}

void FoldOnto(const EntityType& type, const EntityRef& ref, const std::vector<RankedEvent>& sorted,
              uint64_t interval, ProjectionState* state, std::vector<ProjectionState>* snapshots) {
  if (state->events == 0) StartFromNone(ref, state);
  for (const RankedEvent& e : sorted) {
    ApplyToState(type, e, state);
    if (interval > 0 && state->events % interval == 0) snapshots->push_back(*state);
  }
}

Result<Materialized> Materialize(const EntityType& type, const EntityRef& ref,
                                 const RankedEvent& event, LogView& log, uint64_t snapshot_interval,
                                 ProjectionState* state) {
  Materialized out;
  const FoldKey key = KeyOf(event.event, event.rank);
  if (state->events == 0 || state->last < key) {
    FoldOnto(type, ref, {event}, snapshot_interval, state, &out.snapshots);
    out.events_folded = 1;
    return out;
  }
  // Late: resume from the nearest snapshot before the event's position and
  // re-fold what follows it, the event included.
  Result<std::optional<ProjectionState>> snapshot = log.SnapshotBefore(key);
  if (!snapshot.ok()) return snapshot.status();
  std::vector<RankedEvent> events;
  const FoldKey* after = *snapshot ? &(*snapshot)->last : nullptr;
  Status st = log.EventsAfter(after, &events);
  if (!st.ok()) return st;
  events.insert(std::upper_bound(events.begin(), events.end(), event, FoldsBefore), event);

  ProjectionState resumed;
  if (*snapshot) resumed = std::move(**snapshot);
  FoldOnto(type, ref, events, snapshot_interval, &resumed, &out.snapshots);
  *state = std::move(resumed);
  out.stale_after = key;
  out.events_folded = events.size();
  return out;
}

}  // namespace eventfold
