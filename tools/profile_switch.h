// What `replay --profile F` would do to a store, computed without writing:
// which stored events stop (or start) being routed, and which projections
// go because the new profile has no entity of their type.

#ifndef EVENTFOLD_TOOLS_PROFILE_SWITCH_H_
#define EVENTFOLD_TOOLS_PROFILE_SWITCH_H_

#include <cstdint>
#include <map>
#include <string>

#include "eventfold/store.h"

namespace eventfold::cli {

struct ProfileSwitchPlan {
  std::string from, to;                           // profile names
  uint64_t unrouted_now = 0, unrouted_after = 0;  // stored events
  uint64_t newly_unrouted = 0;                    // routed today, not after
  uint64_t newly_routed = 0;                      // unrouted today, routed after
  std::map<std::string, uint64_t> newly_unrouted_types;
  std::map<std::string, uint64_t> entities_now;      // projections by entity type
  std::map<std::string, uint64_t> projections_gone;  // types the new profile lacks
};

// Scans the store's events twice (once per profile) and its projections.
Result<ProfileSwitchPlan> PlanProfileSwitch(Store* store, const Profile& to);

// The plan as one JSON object.
std::string PlanToJson(const ProfileSwitchPlan& plan);

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_PROFILE_SWITCH_H_
