#include "store/recent_events.h"

#include <sys/mman.h>
#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <type_traits>

// Inlined: the hash compiles into this file, so the library gains no link
// dependency (xxHash is a header of Debian's libxxhash-dev).
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace eventfold::storage {

namespace {

// Fills `out` from the kernel's random source. Should that fail (a kernel
// without getrandom), from the clock and an address: the table's answers do
// not depend on the secret (see the header), only how hard a chosen
// collision is.
void FillSecret(unsigned char* out, size_t size) {
  size_t filled = 0;
  while (filled < size) {
    const ssize_t n = getrandom(out + filled, size - filled, 0);
    if (n <= 0) break;
    filled += static_cast<size_t>(n);
  }
  if (filled == size) return;
  uint64_t seed =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
      reinterpret_cast<uintptr_t>(out);
  XXH3_generateSecret_fromSeed(out, seed);  // writes XXH3_SECRET_DEFAULT_SIZE bytes
}

}  // namespace

RecentEvents::RecentEvents(size_t capacity)
    : sets_per_stripe_((capacity + kStripes * kWays - 1) / (kStripes * kWays)),
      stripe_bytes_(sets_per_stripe_ * sizeof(Set)),
      stripes_(std::make_unique<Stripe[]>(kStripes)) {
  static_assert(sizeof(Set) == 96 * kWays, "Options::recent_events documents 96 bytes a body");
  static_assert(kSecretBytes == XXH3_SECRET_DEFAULT_SIZE);
  // All-zero bytes are a Set's initial value (free slots), and a Set is an
  // aggregate of arrays of integers, so a fresh anonymous mapping (zero
  // pages, page-aligned) holds valid empty sets without being written.
  static_assert(std::is_aggregate_v<Set> && std::is_trivially_destructible_v<Set>);
  static_assert(kEmpty == 0);
  FillSecret(secret_.data(), secret_.size());
  if (stripe_bytes_ == 0) return;
  for (size_t i = 0; i < kStripes; ++i) {
    void* p =
        mmap(nullptr, stripe_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) stripes_[i].sets = static_cast<Set*>(p);
  }
}

RecentEvents::~RecentEvents() {
  for (size_t i = 0; i < kStripes; ++i) {
    if (stripes_[i].sets != nullptr) munmap(stripes_[i].sets, stripe_bytes_);
  }
}

RecentEvents::Key RecentEvents::KeyOf(std::string_view body) const {
  const XXH128_hash_t h =
      XXH3_128bits_withSecret(body.data(), body.size(), secret_.data(), secret_.size());
  return Key{h.low64, h.high64};
}

RecentEvents::Place RecentEvents::PlaceOf(const Key& key) const {
  return {key.low % kStripes, (key.low / kStripes) % sets_per_stripe_, key.high % sets_per_stripe_};
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

size_t RecentEvents::Set::Find(const Key& key, std::string_view event_id) const {
  for (size_t i = 0; i < kWays; ++i) {
    if (types[i] != kEmpty && keys[i].low == key.low && keys[i].high == key.high &&
        this->event_id(i) == event_id) {
      return i;
    }
  }
  return kWays;
}

void RecentEvents::Add(const Key& key, std::string_view event_id,
                       const std::optional<EntityRef>& entity, uint64_t epoch) {
  const std::string_view id = entity ? std::string_view(entity->id) : std::string_view();
  if (sets_per_stripe_ == 0 || event_id.size() + id.size() > kIdBytes) return;
  const std::optional<uint16_t> type = TypeOf(entity);
  if (!type) return;
  const Place place = PlaceOf(key);
  Stripe& s = stripes_[place.stripe];
  MutexLock lock(&s.mu);
  if (s.sets == nullptr) return;
  // Clear() counts first and then empties each stripe under its lock: an
  // Add that sees the old count here is emptied after it.
  if (epoch != epoch_.load(std::memory_order_acquire)) return;
  Set* other = &s.sets[place.second];
  // Known: refreshed in place.
  auto [ways, slot] = FindInEither(&s.sets[place.first], other, key, event_id);
  if (slot == kWays) {
    // A free slot in the emptier set (the first on a tie).
    const auto free = [](const Set& set) {
      return std::count(set.types.begin(), set.types.end(), kEmpty);
    };
    if (free(*other) > free(*ways)) ways = other;
    slot = static_cast<size_t>(std::find(ways->types.begin(), ways->types.end(), kEmpty) -
                               ways->types.begin());
  }
  if (slot == kWays) {  // both full: the first set's oldest slot
    slot = ways->next;
    ways->next = static_cast<uint8_t>((ways->next + 1) % kWays);
  }
  Set& set = *ways;
  set.keys[slot] = key;
  set.types[slot] = *type;
  set.event_id_sizes[slot] = static_cast<uint8_t>(event_id.size());
  set.id_sizes[slot] = static_cast<uint8_t>(id.size());
  // std::copy: an unrouted body's id is an empty view with no data, which
  // memcpy may not be handed.
  std::copy(event_id.begin(), event_id.end(), set.ids[slot].begin());
  std::copy(id.begin(), id.end(), set.ids[slot].begin() + event_id.size());
}

// A set in a large table is rarely in cache: all the lines of both sets are
// asked for at once, so a slot's ids arrive with its keys instead of after
// them, and the second set with the first.
void RecentEvents::PrefetchSets(const Set* first, const Set* second) {
  for (size_t line = 0; line < sizeof(Set); line += 64) {
    __builtin_prefetch(reinterpret_cast<const char*>(first) + line);
    __builtin_prefetch(reinterpret_cast<const char*>(second) + line);
  }
}

void RecentEvents::Prefetch(const Key& key) const {
  if (sets_per_stripe_ == 0) return;
  const Place place = PlaceOf(key);
  const Set* sets = stripes_[place.stripe].sets;  // fixed: see Stripe
  if (sets == nullptr) return;
  PrefetchSets(sets + place.first, sets + place.second);  // no read: cannot fault
}

bool RecentEvents::Find(const Key& key, std::string_view event_id,
                        std::optional<EntityRef>* entity) const {
  if (sets_per_stripe_ == 0) return false;
  const Place place = PlaceOf(key);
  const Stripe& s = stripes_[place.stripe];
  MutexLock lock(&s.mu);
  if (s.sets == nullptr) return false;
  const Set* first = &s.sets[place.first];
  const Set* second = &s.sets[place.second];
  PrefetchSets(first, second);
  const auto [ways, slot] = FindInEither(first, second, key, event_id);
  if (slot == kWays) return false;
  // A type index in a slot was published before the slot was written.
  const uint16_t type = ways->types[slot];
  *entity =
      type == kUnrouted
          ? std::nullopt
          : std::optional<EntityRef>(EntityRef{types_[type - 2], std::string(ways->id(slot))});
  return true;
}

void RecentEvents::Clear() {
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  for (size_t i = 0; i < kStripes; ++i) {
    MutexLock lock(&stripes_[i].mu);
    Set* sets = stripes_[i].sets;
    if (sets == nullptr) continue;
    // Back to zero pages: empty sets, and the memory returned. Should the
    // kernel refuse, emptied by hand.
    if (madvise(sets, stripe_bytes_, MADV_DONTNEED) != 0) {
      for (size_t j = 0; j < sets_per_stripe_; ++j) sets[j] = Set{};
    }
  }
}

}  // namespace eventfold::storage
