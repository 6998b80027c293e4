#include "store/recent_events.h"

#include <algorithm>
#include <cstring>

namespace eventfold::storage {

RecentEvents::RecentEvents(size_t capacity)
    : sets_per_stripe_((capacity + kStripes * kWays - 1) / (kStripes * kWays)),
      stripes_(std::make_unique<Stripe[]>(kStripes)) {
  static_assert(sizeof(Slot) <= 56, "Options::recent_events documents 56 bytes a body");
  for (size_t i = 0; i < kStripes; ++i) {
    MutexLock lock(&stripes_[i].mu);
    stripes_[i].sets.resize(sets_per_stripe_);
  }
}

std::pair<size_t, size_t> RecentEvents::Place(std::string_view digest) const {
  uint64_t h = 0;
  std::memcpy(&h, digest.data() + kDigestBytes, sizeof h);
  return {h % kStripes, (h / kStripes) % sets_per_stripe_};
}

std::optional<uint16_t> RecentEvents::TypeOf(const std::optional<EntityRef>& entity) {
  if (!entity) return kUnrouted;
  const auto find = [&](size_t count) -> std::optional<uint16_t> {
    for (size_t i = 0; i < count; ++i) {
      if (types_[i] == entity->entity) return static_cast<uint16_t>(i + 2);
    }
    return std::nullopt;
  };
  if (auto known = find(type_count_.load(std::memory_order_acquire))) return known;
  MutexLock lock(&types_mu_);
  const size_t count = type_count_.load(std::memory_order_acquire);
  if (auto known = find(count)) return known;  // added meanwhile
  if (count == kMaxTypes) return std::nullopt;
  types_[count] = entity->entity;
  type_count_.store(count + 1, std::memory_order_release);
  return static_cast<uint16_t>(count + 2);
}

void RecentEvents::Add(std::string_view digest, const std::optional<EntityRef>& entity,
                       uint64_t epoch) {
  if (sets_per_stripe_ == 0 || digest.size() != 2 * kDigestBytes) return;
  const std::optional<uint16_t> type = TypeOf(entity);
  if (!type) return;
  const auto [stripe, set] = Place(digest);
  Stripe& s = stripes_[stripe];
  MutexLock lock(&s.mu);
  // Clear() counts first and then empties each stripe under its lock: an
  // Add that sees the old count here is emptied after it.
  if (epoch != epoch_.load(std::memory_order_acquire)) return;
  Set& ways = s.sets[set];
  Slot* slot = nullptr;
  for (Slot& e : ways.slots) {
    if (e.type != kEmpty && std::equal(e.digest.begin(), e.digest.end(), digest.data())) {
      slot = &e;  // known: refreshed in place
      break;
    }
    if (e.type == kEmpty && slot == nullptr) slot = &e;
  }
  if (slot == nullptr) {
    slot = &ways.slots[ways.next];
    ways.next = static_cast<uint8_t>((ways.next + 1) % kWays);
  }
  std::copy_n(digest.data(), kDigestBytes, slot->digest.begin());
  slot->type = *type;
  slot->id = entity ? entity->id : std::string();
}

bool RecentEvents::Find(std::string_view digest, std::optional<EntityRef>* entity) const {
  if (sets_per_stripe_ == 0 || digest.size() != 2 * kDigestBytes) return false;
  const auto [stripe, set] = Place(digest);
  const Stripe& s = stripes_[stripe];
  MutexLock lock(&s.mu);
  for (const Slot& e : s.sets[set].slots) {
    if (e.type != kEmpty && std::equal(e.digest.begin(), e.digest.end(), digest.data())) {
      // A type index in a slot was published before the slot was written.
      *entity = e.type == kUnrouted ? std::nullopt
                                    : std::optional<EntityRef>(EntityRef{types_[e.type - 2], e.id});
      return true;
    }
  }
  return false;
}

void RecentEvents::Clear() {
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  for (size_t i = 0; i < kStripes; ++i) {
    MutexLock lock(&stripes_[i].mu);
    for (Set& set : stripes_[i].sets) set = Set{};
  }
}

}  // namespace eventfold::storage
