// The fold of docs/SPEC.md §4: one entity's events, totally ordered, through its
// state machine.
//
// Order: occurred_at, then version (absent first), then the type's rank in
// the entity's transition list, then event_id bytewise. An event is applied
// when the current state is in its from-set and it is not stale (it has a
// version and the entity already holds a version >= it); otherwise it is
// rejected with a reason and changes nothing. Pure functions; thread-safe.

#ifndef EVENTFOLD_CORE_FOLD_H_
#define EVENTFOLD_CORE_FOLD_H_

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/event.h"
#include "eventfold/profile.h"
#include "eventfold/projection.h"
#include "eventfold/status.h"

namespace eventfold {

// Where an event sits in its entity's fold order.
struct FoldKey {
  int64_t occurred_at = 0;
  std::optional<int64_t> version;  // nullopt sorts first
  uint32_t rank = 0;
  std::string event_id;

  std::strong_ordering operator<=>(const FoldKey& o) const;
  bool operator==(const FoldKey& o) const = default;
};

FoldKey KeyOf(const Event& event, uint32_t rank);

// An event with its rank, ready to fold.
struct RankedEvent {
  Event event;
  uint32_t rank = 0;
  // Not empty: event.data was left out (DecodeEventWithoutData) and this is
  // the body that holds it, which must outlive the event. Materialize
  // applies such an event as a cursor-only one and reads its data
  // (CompleteData) only for a snapshot or a re-fold.
  std::string_view data_from;
};

// One entity's fold state: its projection, how many events it has folded
// and the fold key of the last one. Stored as a projection record and as the
// materializer's snapshots (storage/record_codec.h).
struct ProjectionState {
  Projection projection;
  uint64_t events = 0;
  FoldKey last;  // meaningful when events > 0
  // True for a state read from a cursor-only projection record (format 4):
  // state, version, applied, occurred_at and the cursor are exact, but
  // projection.fields and projection.rejected were not stored. Applying the
  // next event needs nothing more; a snapshot or an answer needs the whole
  // state, which the materializer and storage/projection_read.h fold.
  bool cursor_only = false;
  // Whether the entity has a fold snapshot at or before `last`, so that a
  // read of a cursor knows where to start without searching. Persistent
  // (stored in projection records): never renumber.
  enum class Snapshots : uint8_t { kUnknown = 0, kNone = 1, kSome = 2 };
  Snapshots snapshots = Snapshots::kUnknown;
};

// True when `a` folds before `b`.
bool FoldsBefore(const RankedEvent& a, const RankedEvent& b);
// key < e's key, and e's key into `key` (reusing its storage): the same
// order and value as KeyOf, without a FoldKey built per event.
bool KeyFoldsBefore(const FoldKey& key, const RankedEvent& e);
void SetKeyOf(const RankedEvent& e, FoldKey* key);

// The transition an event's rank names in `type`. A rank comes from a stored
// record, so a bad disk or a record written under another profile can make
// it point past the list: that is a Corruption naming the event, never an
// out-of-bounds read.
[[nodiscard]] Result<const Transition*> TransitionOf(const EntityType& type,
                                                     const RankedEvent& event);

// Applies `event` (of transition `t`) to `p`. Returns "" when applied, else
// the rejection reason; a rejected event is recorded in p->rejected.
std::string ApplyEvent(const Transition& t, const Event& event, Projection* p);

// Folds `events` (any order, unique event_ids) of entity `ref` from state
// none. `verdicts`, when given, receives "" or the rejection reason for each
// event in fold order, and `events` is left sorted in fold order. Fails
// (Corruption) when an event's rank is outside the type's transitions.
[[nodiscard]] Result<Projection> Fold(const EntityType& type, const EntityRef& ref,
                                      std::vector<RankedEvent>* events,
                                      std::vector<std::string>* verdicts = nullptr);

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_FOLD_H_
