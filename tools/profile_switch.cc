#include "tools/profile_switch.h"

#include <set>

#include "core/json_writer.h"

namespace eventfold::cli {

Result<ProfileSwitchPlan> PlanProfileSwitch(Store* store, const Profile& to) {
  ProfileSwitchPlan plan;
  plan.from = store->profile()->name();
  plan.to = to.name();
  std::set<uint64_t> unrouted_now;
  Status st = store->maintenance().ListUnrouted(nullptr, [&](const UnroutedEvent& e) {
    unrouted_now.insert(e.seq);
    return true;
  });
  if (!st.ok()) return st;
  plan.unrouted_now = unrouted_now.size();
  st = store->maintenance().ListUnrouted(&to, [&](const UnroutedEvent& e) {
    ++plan.unrouted_after;
    if (unrouted_now.erase(e.seq) == 0) {
      ++plan.newly_unrouted;
      ++plan.newly_unrouted_types[e.type];
    }
    return true;
  });
  if (!st.ok()) return st;
  plan.newly_routed = unrouted_now.size();  // those left were not seen again
  st = store->List("", [&](const Projection& p) {
    ++plan.entities_now[p.entity];
    if (!to.FindEntity(p.entity)) ++plan.projections_gone[p.entity];
    return true;
  });
  if (!st.ok()) return st;
  return plan;
}

std::string PlanToJson(const ProfileSwitchPlan& plan) {
  auto counts = [](JsonWriter& w, const std::map<std::string, uint64_t>& m) {
    w.BeginObject();
    for (const auto& [k, n] : m) w.Key(k).Uint(n);
    w.EndObject();
  };
  JsonWriter w;
  w.BeginObject().Key("dry_run").Bool(true).Key("from").String(plan.from).Key("to").String(plan.to);
  w.Key("entities_now");
  counts(w, plan.entities_now);
  w.Key("projections_dropped");
  counts(w, plan.projections_gone);
  w.Key("unrouted_now").Uint(plan.unrouted_now).Key("unrouted_after").Uint(plan.unrouted_after);
  w.Key("newly_unrouted").Uint(plan.newly_unrouted).Key("newly_unrouted_types");
  counts(w, plan.newly_unrouted_types);
  w.Key("newly_routed").Uint(plan.newly_routed).EndObject();
  return w.str();
}

}  // namespace eventfold::cli
