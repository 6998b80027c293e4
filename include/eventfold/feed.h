// The change feed: every ingest that changes a projection appends one change
// record per changed entity, with a global, gap-free sequence number, in the
// same atomic write as the events and projections that caused it.
//
// A change names the entity and carries what a worker needs to decide what to
// do (new and previous state, the events that caused it); a worker that needs
// the full picture reads the current projection (the "re-fetch" pattern), so
// the order in which it handles changes never matters to it.
//
// Plain value types; no internal synchronization.

#ifndef EVENTFOLD_FEED_H_
#define EVENTFOLD_FEED_H_

#include <cstdint>
#include <string>
#include <vector>

namespace eventfold {

struct Change {
  uint64_t seq = 0;  // 1, 2, 3, ... with no gaps
  std::string entity;
  std::string id;
  std::string state;                   // after the change
  std::string previous_state;          // before it ("none" for a new entity)
  std::vector<std::string> event_ids;  // the ingested events that caused it
  int64_t changed_at = 0;              // microseconds since the epoch (Clock)
  bool operator==(const Change&) const = default;
};

// One failed attempt to handle a change.
struct DeliveryAttempt {
  int64_t at = 0;     // microseconds since the epoch (Clock)
  std::string error;  // the handler's error text, first 1 KiB
  bool operator==(const DeliveryAttempt&) const = default;
};

// A change a subscription gave up on after its last attempt: its dead letter.
struct ParkedChange {
  std::string subscription;
  Change change;
  std::vector<DeliveryAttempt> attempts;  // every attempt, oldest first
  // Marked for redrive: the subscription re-delivers it (see
  // eventfold/subscription.h). Empty `attempts` means it never ran: it was
  // parked behind an earlier dead letter of its entity.
  bool redrive = false;
  bool operator==(const ParkedChange&) const = default;
};

// {"seq":..,"entity":..,"id":..,"state":..,"previous_state":..,
//  "event_ids":[..],"changed_at":"<RFC 3339>"}
std::string ChangeToJson(const Change& change);

// {"subscription":..,"change":{..},"attempts":[{"at":..,"error":..},..],
//  "redrive":false}
std::string ParkedChangeToJson(const ParkedChange& parked);

}  // namespace eventfold

#endif  // EVENTFOLD_FEED_H_
