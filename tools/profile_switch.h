// What `replay --profile F` would do to a store, computed without writing:
// which stored events stop (or start) being routed, and — with a rebuild
// aside under the new profile (Maintenance::Verify(profile, ...)) — the
// entities per type before and after and the projections that change.
//
// Thread-safety: none needed; one command runs per process.

#ifndef EVENTFOLD_TOOLS_PROFILE_SWITCH_H_
#define EVENTFOLD_TOOLS_PROFILE_SWITCH_H_

#include <cstdint>
#include <map>
#include <string>

#include "eventfold/store.h"

namespace eventfold::cli {

using TypeCounts = std::map<std::string, uint64_t>;

struct ProfileSwitchPlan {
  std::string from, to;                           // profile names
  uint64_t unrouted_now = 0, unrouted_after = 0;  // stored events
  uint64_t newly_unrouted = 0;                    // routed today, not after
  uint64_t newly_routed = 0;                      // unrouted today, routed after
  TypeCounts newly_unrouted_types;                // by event type
  // By entity type; filled only when the projections were compared.
  bool compared = false;
  TypeCounts entities_before, entities_after;
  TypeCounts dropped;  // projections the switch removes
  TypeCounts added;    // projections it creates
  TypeCounts changed;  // projections on both sides that differ
  // Projections whose state changes, by entity type and "from -> to"
  // ("(none)" for a projection that does not exist on that side).
  std::map<std::string, TypeCounts> state_changes;
};

// Scans the store's events twice (once per profile). With
// `compare_projections`, also rebuilds every projection aside under `to`
// (as long as a replay takes) and compares it with the live ones.
Result<ProfileSwitchPlan> PlanProfileSwitch(Store* store, const Profile& to,
                                            bool compare_projections);

// The plan as one JSON object (the dry run's output).
std::string PlanToJson(const ProfileSwitchPlan& plan);

// "3 stored events unrouted that are routed today (receipt.issued 2, ...)"
// and the projections dropped, for the refusal of a switch.
std::string DescribeLoss(const ProfileSwitchPlan& plan);

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_PROFILE_SWITCH_H_
