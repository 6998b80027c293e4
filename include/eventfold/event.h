// Event: one decoded webhook delivery, as the fold sees it.
//
// The verbatim body is what the store keeps; an Event is the part of it the
// engine reads (docs/SPEC.md §2): id, type, time, optional version, and the top-level
// fields of `data`, each as compact JSON text.
//
// Plain value types; no internal synchronization.

#ifndef EVENTFOLD_EVENT_H_
#define EVENTFOLD_EVENT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace eventfold {

// One top-level member of `data`: its name and its value as compact JSON.
struct Field {
  std::string name;
  std::string json;
  bool operator==(const Field&) const = default;
};

struct Event {
  std::string event_id;
  std::string type;
  int64_t occurred_at = 0;         // microseconds since the epoch, UTC
  std::optional<int64_t> version;  // absent sorts before any version
  std::vector<Field> data;         // in the order the body lists them
  bool operator==(const Event&) const = default;
};

// Which entity an event belongs to under a profile.
struct EntityRef {
  std::string entity;  // entity type name, e.g. "receipt"
  std::string id;      // key value, e.g. "rcp_1"
  bool operator==(const EntityRef&) const = default;
  auto operator<=>(const EntityRef&) const = default;
};

// The longest key (EntityRef::id) an entity can have: an event whose key is
// longer is refused (docs/SPEC.md), so no store holds one.
inline constexpr size_t kMaxEntityKeyBytes = 512;

}  // namespace eventfold

#endif  // EVENTFOLD_EVENT_H_
