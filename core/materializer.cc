#include "core/materializer.h"

#include <algorithm>
#include <utility>

#include "core/decode.h"

namespace eventfold {

void StartFromNone(const EntityRef& ref, ProjectionState* state) {
  *state = ProjectionState{};
  state->projection.entity = ref.entity;
  state->projection.id = ref.id;
  state->snapshots = ProjectionState::Snapshots::kNone;
}

Status ApplyToState(const EntityType& type, const RankedEvent& event, ProjectionState* state) {
  Result<const Transition*> t = TransitionOf(type, event);
  if (!t.ok()) return t.status();
  ApplyEvent(**t, event.event, &state->projection);
  SetKeyOf(event, &state->last);
  ++state->events;
  return Status::OK();
}

Status FoldOnto(const EntityType& type, const EntityRef& ref, std::span<const RankedEvent> sorted,
                uint64_t interval, ProjectionState* state,
                std::vector<ProjectionState>* snapshots) {
  if (state->events == 0) StartFromNone(ref, state);
  for (const RankedEvent& e : sorted) {
    if (Status st = ApplyToState(type, e, state); !st.ok()) return st;
    if (interval > 0 && state->events % interval == 0) {
      state->snapshots = ProjectionState::Snapshots::kSome;
      snapshots->push_back(*state);
    }
  }
  return Status::OK();
}

Status CompleteData(RankedEvent* event) {
  if (event->data_from.empty()) return Status::OK();
  Result<std::vector<Field>> data = DecodeData(event->data_from);
  if (!data.ok()) return data.status();
  event->event.data = std::move(*data);
  event->data_from = {};
  return Status::OK();
}

Result<Materialized> Materialize(const EntityType& type, const EntityRef& ref,
                                 const RankedEvent& event, LogView& log, uint64_t snapshot_interval,
                                 ProjectionState* state) {
  Materialized out;
  const bool in_order = state->events == 0 || KeyFoldsBefore(state->last, event);
  // A cursor-only state applies the next event as well as a whole one, but a
  // snapshot taken from it would lack the fields: at a snapshot's position
  // the whole state is folded first, as for a late event (about one
  // interval of events once per interval).
  const bool snapshot_due = snapshot_interval > 0 && (state->events + 1) % snapshot_interval == 0;
  const bool without_data = !event.data_from.empty();
  if (in_order && !(state->cursor_only && snapshot_due)) {
    // A refused rank leaves `state` as it was (ApplyToState checks first).
    // The event itself, not a copy in a vector of one: it is most events.
    // Without its data, the fields it sets are not in `state`, which is
    // then cursor-only, unless a snapshot is taken now: that needs them.
    std::optional<RankedEvent> whole;
    if (without_data && snapshot_due) {
      whole = event;
      if (Status st = CompleteData(&*whole); !st.ok()) return st;
    }
    const RankedEvent& applied = whole ? *whole : event;
    if (Status st =
            FoldOnto(type, ref, std::span(&applied, 1), snapshot_interval, state, &out.snapshots);
        !st.ok()) {
      return st;
    }
    if (without_data && !whole) state->cursor_only = true;
    out.events_folded = 1;
    return out;
  }
  // Late (or due a snapshot): resume from the nearest snapshot before the
  // event's position and re-fold what follows it, the event included.
  const FoldKey key = KeyOf(event.event, event.rank);
  Result<std::optional<ProjectionState>> snapshot = log.SnapshotBefore(key);
  if (!snapshot.ok()) return snapshot.status();
  std::vector<RankedEvent> events;
  const FoldKey* after = *snapshot ? &(*snapshot)->last : nullptr;
  Status st = log.EventsAfter(after, &events);
  if (!st.ok()) return st;
  RankedEvent whole = event;
  if (Status st2 = CompleteData(&whole); !st2.ok()) return st2;
  const auto at = std::upper_bound(events.begin(), events.end(), whole, FoldsBefore);
  events.insert(at, std::move(whole));

  ProjectionState resumed;
  if (*snapshot) {
    resumed = std::move(**snapshot);
    resumed.snapshots = ProjectionState::Snapshots::kSome;
  }
  st = FoldOnto(type, ref, events, snapshot_interval, &resumed, &out.snapshots);
  if (!st.ok()) return st;
  *state = std::move(resumed);
  if (!in_order) out.stale_after = key;
  out.events_folded = events.size();
  return out;
}

}  // namespace eventfold
