#include "store/recent_events.h"

#include <algorithm>
#include <cstring>

namespace eventfold::storage {

RecentEvents::RecentEvents(size_t capacity)
    : sets_per_stripe_((capacity + kStripes * kWays - 1) / (kStripes * kWays)),
      stripes_(std::make_unique<Stripe[]>(kStripes)) {
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

void RecentEvents::Add(std::string_view digest, const std::optional<EntityRef>& entity,
                       uint64_t epoch) {
  if (sets_per_stripe_ == 0 || digest.size() != 2 * kDigestBytes) return;
  const auto [stripe, set] = Place(digest);
  Stripe& s = stripes_[stripe];
  MutexLock lock(&s.mu);
  // Clear() counts first and then empties each stripe under its lock: an
  // Add that sees the old count here is emptied after it.
  if (epoch != epoch_.load(std::memory_order_acquire)) return;
  Set& ways = s.sets[set];
  Slot* slot = nullptr;
  for (Slot& e : ways.slots) {
    if (e.used && std::equal(e.digest.begin(), e.digest.end(), digest.data())) {
      slot = &e;  // known: refreshed in place
      break;
    }
    if (!e.used && slot == nullptr) slot = &e;
  }
  if (slot == nullptr) {
    slot = &ways.slots[ways.next];
    ways.next = static_cast<uint8_t>((ways.next + 1) % kWays);
  }
  slot->used = true;
  std::copy_n(digest.data(), kDigestBytes, slot->digest.begin());
  slot->entity = entity;
}

bool RecentEvents::Find(std::string_view digest, std::optional<EntityRef>* entity) const {
  if (sets_per_stripe_ == 0 || digest.size() != 2 * kDigestBytes) return false;
  const auto [stripe, set] = Place(digest);
  const Stripe& s = stripes_[stripe];
  MutexLock lock(&s.mu);
  for (const Slot& e : s.sets[set].slots) {
    if (e.used && std::equal(e.digest.begin(), e.digest.end(), digest.data())) {
      *entity = e.entity;
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
