// Profile: what a sender's events mean, as data.
//
// A profile names the entity types a sender talks about, where each event
// carries its entity key (a dotted path such as "data.receipt_id"), and each
// entity's state machine: an ordered list of transitions, one per event type,
// each with the set of states it may leave ("from") and the state it enters
// ("to"). The position of a transition in that list is its rank, the third
// sort key of the fold. Every entity starts in the state "none".
//
// Profiles are immutable values once built; a const Profile may be shared by
// any number of threads.

#ifndef EVENTFOLD_PROFILE_H_
#define EVENTFOLD_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/status.h"

namespace eventfold {

// The state every entity is in before its first applied event.
inline constexpr std::string_view kInitialState = "none";

struct Transition {
  std::string type;               // event type, e.g. "receipt.refunded"
  std::vector<std::string> from;  // states this event may be applied in
  std::string to;                 // state after the event is applied
};

struct EntityType {
  std::string name;  // e.g. "receipt"
  std::string key;   // dotted path to the key in the body, e.g. "data.receipt_id"
  std::vector<Transition> transitions;  // in rank order

  // Path segments of `key` below the body root, e.g. {"data", "receipt_id"}.
  std::vector<std::string> KeyPath() const;
};

// Where an event type routes: its entity type and its transition's rank.
struct Route {
  const EntityType* entity = nullptr;
  const Transition* transition = nullptr;
  uint32_t rank = 0;
};

class Profile {
 public:
  // The built-in profile of the first sender: receipts, products, inventory.
  static const Profile& ReceiptRoller();

  // Parses and validates a profile document (the JSON shape of docs/SPEC.md §4.3).
  // On failure, kInvalidArgument naming the entity, the type and the
  // problem.
  static Result<Profile> FromJson(std::string_view json);

  // Reads a profile file: kIOError when it cannot be read, else as
  // FromJson; errors name the file.
  static Result<Profile> FromFile(const std::string& path);

  // Validates and indexes a profile built in code: kInvalidArgument naming
  // the entity, the type and the problem, as FromJson.
  static Result<Profile> Make(std::string name, std::vector<EntityType> entities);

  Profile(const Profile& other);
  Profile& operator=(const Profile& other);
  Profile(Profile&&) noexcept = default;
  Profile& operator=(Profile&&) noexcept = default;

  const std::string& name() const { return name_; }
  const std::vector<EntityType>& entities() const { return entities_; }

  // The route of an event type, or nullptr when no entity has that type
  // (the event is then stored as unrouted).
  const Route* Find(std::string_view type) const;

  // The entity type named `name`, or nullptr.
  const EntityType* FindEntity(std::string_view name) const;

  // Canonical JSON (compact, fixed key order): the form stored in a store.
  std::string ToJson() const;

  // Hex SHA-256 of ToJson(): two profiles with the same fingerprint route
  // and fold identically. Computed once, when the profile is built (a
  // store's Stats() reads it, a cluster worker's after every batch).
  const std::string& Fingerprint() const { return fingerprint_; }

 private:
  Profile() = default;
  void Reindex();

  std::string name_;
  std::vector<EntityType> entities_;
  std::map<std::string, Route, std::less<>> routes_;
  std::string fingerprint_;
};

}  // namespace eventfold

#endif  // EVENTFOLD_PROFILE_H_
