// Projection: the materialized state of one entity, and its event log.
//
// A projection is the result of folding every stored event of one entity in
// the order of docs/SPEC.md §4. It is a pure function of the set of stored events:
// arrival order and duplicates never change it.
//
// Plain value types; no internal synchronization.

#ifndef EVENTFOLD_PROJECTION_H_
#define EVENTFOLD_PROJECTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eventfold/event.h"

namespace eventfold {

struct Rejection {
  std::string event_id;
  std::string type;
  std::string reason;  // e.g. "impossible transition refunded -> issued"
  bool operator==(const Rejection&) const = default;
};

struct Projection {
  std::string entity;
  std::string id;
  std::string state = "none";
  std::vector<Field> fields;           // merged `data`, first-set order
  std::optional<int64_t> version;      // of the last applied versioned event
  uint64_t applied = 0;                // events applied
  std::vector<Rejection> rejected;     // in fold order
  std::optional<int64_t> occurred_at;  // of the last applied event
  bool operator==(const Projection&) const = default;
};

// One event of an entity's log with its fold verdict.
struct LoggedEvent {
  Event event;
  uint64_t seq = 0;         // arrival sequence number in the store
  int64_t received_at = 0;  // microseconds since the epoch, from the Clock
  bool applied = false;
  std::string reason;  // why it was rejected; empty when applied
};

// What compaction (Maintenance::Gc) folded into a snapshot and dropped.
struct LogCompaction {
  Projection snapshot;       // the state the remaining events fold on from
  uint64_t events = 0;       // events dropped
  int64_t compacted_at = 0;  // microseconds since the epoch
};

struct EntityLog {
  EntityRef ref;
  std::optional<LogCompaction> compacted;  // set when older events were compacted
  std::vector<LoggedEvent> fold_order;     // as folded; arrival order is by seq
};

// The projection object of docs/SPEC.md §5.4, compact, keys in the documented order.
std::string ProjectionToJson(const Projection& projection);

// {"entity":..,"id":..,"arrival":[..],"fold":[..]}; each event with its
// id, type, occurred_at, version, seq, verdict and reason.
std::string EntityLogToJson(const EntityLog& log);

// RFC 3339 text of a microsecond timestamp: "2026-11-29T10:15:30.123000Z".
std::string FormatTimestamp(int64_t micros);

}  // namespace eventfold

#endif  // EVENTFOLD_PROJECTION_H_
