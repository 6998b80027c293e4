#include "tools/profile_switch.h"

#include <set>

#include "core/json_writer.h"

namespace eventfold::cli {
namespace {

constexpr const char* kNoState = "(none)";

// The live and rebuilt projections, entity by entity (Verify's differences).
Status CompareProjections(Store* store, const Profile& to, ProfileSwitchPlan* plan) {
  Status st = store->List("", [&](const Projection& p) {
    ++plan->entities_before[p.entity];
    return true;
  });
  if (!st.ok()) return st;
  TypeCounts after = plan->entities_before;
  Result<VerifySummary> sum = store->maintenance().Verify(
      &to, [&](const std::optional<Projection>& live, const std::optional<Projection>& rebuilt) {
        const std::string& entity = live ? live->entity : rebuilt->entity;
        if (!rebuilt) {
          ++plan->dropped[entity];
          --after[entity];
        } else if (!live) {
          ++plan->added[entity];
          ++after[entity];
        } else {
          ++plan->changed[entity];
        }
        const std::string& from_state = live ? live->state : kNoState;
        const std::string& to_state = rebuilt ? rebuilt->state : kNoState;
        if (from_state != to_state) ++plan->state_changes[entity][from_state + " -> " + to_state];
      });
  if (!sum.ok()) return sum.status();
  for (const auto& [entity, n] : after) {
    if (n > 0) plan->entities_after[entity] = n;
  }
  plan->compared = true;
  return Status::OK();
}

void Counts(JsonWriter& w, const TypeCounts& m) {
  w.BeginObject();
  for (const auto& [k, n] : m) w.Key(k).Uint(n);
  w.EndObject();
}

std::string Listed(const TypeCounts& m) {
  std::string out;
  for (const auto& [k, n] : m) out += (out.empty() ? "" : ", ") + k + " " + std::to_string(n);
  return out;
}

}  // namespace

Result<ProfileSwitchPlan> PlanProfileSwitch(Store* store, const Profile& to,
                                            bool compare_projections) {
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
  if (compare_projections) {
    st = CompareProjections(store, to, &plan);
    if (!st.ok()) return st;
  } else {
    // Without a rebuild aside: what is certain to go, projections of entity
    // types the new profile lacks.
    st = store->List("", [&](const Projection& p) {
      ++plan.entities_before[p.entity];
      if (!to.FindEntity(p.entity)) ++plan.dropped[p.entity];
      return true;
    });
    if (!st.ok()) return st;
  }
  return plan;
}

std::string PlanToJson(const ProfileSwitchPlan& plan) {
  JsonWriter w;
  w.BeginObject().Key("dry_run").Bool(true).Key("from").String(plan.from).Key("to").String(plan.to);
  w.Key("entities_before");
  Counts(w, plan.entities_before);
  if (plan.compared) {
    w.Key("entities_after");
    Counts(w, plan.entities_after);
  }
  w.Key("projections_dropped");
  Counts(w, plan.dropped);
  if (plan.compared) {
    w.Key("projections_added");
    Counts(w, plan.added);
    w.Key("projections_changed");
    Counts(w, plan.changed);
    w.Key("state_changes").BeginObject();
    for (const auto& [entity, changes] : plan.state_changes) {
      w.Key(entity);
      Counts(w, changes);
    }
    w.EndObject();
  }
  w.Key("unrouted_now").Uint(plan.unrouted_now).Key("unrouted_after").Uint(plan.unrouted_after);
  w.Key("newly_unrouted").Uint(plan.newly_unrouted).Key("newly_unrouted_types");
  Counts(w, plan.newly_unrouted_types);
  w.Key("newly_routed").Uint(plan.newly_routed).EndObject();
  return w.str();
}

std::string DescribeLoss(const ProfileSwitchPlan& plan) {
  uint64_t dropped = 0;
  for (const auto& [type, n] : plan.dropped) dropped += n;
  const bool one = plan.newly_unrouted == 1;
  std::string out = std::to_string(plan.newly_unrouted) +
                    (one ? " stored event" : " stored events") + " unrouted that " +
                    (one ? "is" : "are") + " routed today (" + Listed(plan.newly_unrouted_types) +
                    ")";
  if (dropped > 0) {
    out += ", and drop " + std::to_string(dropped) +
           (dropped == 1 ? " projection" : " projections") + " (" + Listed(plan.dropped) + ")";
  }
  return out;
}

}  // namespace eventfold::cli
