#include "core/fold.h"

#include <algorithm>

namespace eventfold {

namespace {

std::strong_ordering Compare(int64_t at_a, const std::optional<int64_t>& ver_a, uint32_t rank_a,
                             std::string_view id_a, int64_t at_b,
                             const std::optional<int64_t>& ver_b, uint32_t rank_b,
                             std::string_view id_b) {
  if (auto c = at_a <=> at_b; c != 0) return c;
  if (ver_a.has_value() != ver_b.has_value()) {
    return ver_a.has_value() ? std::strong_ordering::greater : std::strong_ordering::less;
  }
  if (ver_a) {
    if (auto c = *ver_a <=> *ver_b; c != 0) return c;
  }
  if (auto c = rank_a <=> rank_b; c != 0) return c;
  return id_a.compare(id_b) <=> 0;
}

}  // namespace

std::strong_ordering FoldKey::operator<=>(const FoldKey& o) const {
  return Compare(occurred_at, version, rank, event_id, o.occurred_at, o.version, o.rank,
                 o.event_id);
}

bool FoldsBefore(const RankedEvent& a, const RankedEvent& b) {
  return Compare(a.event.occurred_at, a.event.version, a.rank, a.event.event_id,
                 b.event.occurred_at, b.event.version, b.rank, b.event.event_id) < 0;
}

FoldKey KeyOf(const Event& event, uint32_t rank) {
  return FoldKey{event.occurred_at, event.version, rank, event.event_id};
}

bool KeyFoldsBefore(const FoldKey& key, const RankedEvent& e) {
  return Compare(key.occurred_at, key.version, key.rank, key.event_id, e.event.occurred_at,
                 e.event.version, e.rank, e.event.event_id) < 0;
}

void SetKeyOf(const RankedEvent& e, FoldKey* key) {
  key->occurred_at = e.event.occurred_at;
  key->version = e.event.version;
  key->rank = e.rank;
  key->event_id.assign(e.event.event_id);
}

Result<const Transition*> TransitionOf(const EntityType& type, const RankedEvent& event) {
  if (event.rank >= type.transitions.size()) {
    return Status::Corruption("event " + event.event.event_id + " (" + event.event.type +
                              ") has transition rank " + std::to_string(event.rank) + ", but " +
                              type.name + " has " + std::to_string(type.transitions.size()) +
                              " transitions");
  }
  return &type.transitions[event.rank];
}

std::string ApplyEvent(const Transition& t, const Event& event, Projection* p) {
  std::string reason;
  if (std::find(t.from.begin(), t.from.end(), p->state) == t.from.end()) {
    reason = "impossible transition " + p->state + " -> " + t.to;
  } else if (event.version && p->version && *p->version >= *event.version) {
    reason = "stale version " + std::to_string(*event.version) + " (entity is at version " +
             std::to_string(*p->version) + ")";
  }
  if (!reason.empty()) {
    p->rejected.push_back(Rejection{event.event_id, event.type, reason});
    return reason;
  }
  p->state = t.to;
  // A new entity's first event brings most of its fields: one allocation
  // for them, not one per doubling.
  if (p->fields.empty()) p->fields.reserve(event.data.size());
  for (const Field& f : event.data) {
    auto it = std::find_if(p->fields.begin(), p->fields.end(),
                           [&](const Field& g) { return g.name == f.name; });
    if (it == p->fields.end()) {
      p->fields.push_back(f);
    } else {
      it->json = f.json;
    }
  }
  if (event.version) p->version = event.version;
  p->occurred_at = event.occurred_at;
  ++p->applied;
  return reason;
}

Result<Projection> Fold(const EntityType& type, const EntityRef& ref,
                        std::vector<RankedEvent>* events, std::vector<std::string>* verdicts) {
  std::sort(events->begin(), events->end(), FoldsBefore);
  Projection p;
  p.entity = ref.entity;
  p.id = ref.id;
  p.state = std::string(kInitialState);
  if (verdicts) verdicts->clear();
  for (const RankedEvent& e : *events) {
    Result<const Transition*> t = TransitionOf(type, e);
    if (!t.ok()) return t.status();
    std::string verdict = ApplyEvent(**t, e.event, &p);
    if (verdicts) verdicts->push_back(std::move(verdict));
  }
  return p;
}

}  // namespace eventfold
