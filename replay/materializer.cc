#include "replay/materializer.h"

namespace eventfold {

storage::ProjectionState FoldLog(const EntityType& type, const EntityRef& ref,
                                 std::vector<RankedEvent>* events) {
  storage::ProjectionState state;
  state.projection = Fold(type, ref, events);
  state.events = events->size();
  if (!events->empty()) state.last = KeyOf(events->back().event, events->back().rank);
  return state;
}

Status Materialize(const EntityType& type, const EntityRef& ref,
                   const RankedEvent& event, const LogLoader& load,
                   storage::ProjectionState* state) {
  FoldKey key = KeyOf(event.event, event.rank);
  if (state->events == 0 || state->last < key) {
    if (state->events == 0) {
      state->projection = Projection{};
      state->projection.entity = ref.entity;
      state->projection.id = ref.id;
    }
    ApplyEvent(type.transitions[event.rank], event.event, &state->projection);
    state->last = std::move(key);
    ++state->events;
    return Status::OK();
  }
  std::vector<RankedEvent> events;
  events.reserve(state->events + 1);
  Status st = load(&events);
  if (!st.ok()) return st;
  events.push_back(event);
  *state = FoldLog(type, ref, &events);
  return Status::OK();
}

}  // namespace eventfold
