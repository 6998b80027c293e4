// StableHash: 64-bit FNV-1a over one or two strings.
//
// Deterministic across processes, builds and machines (no seed, no
// std::hash), so it can pick lock stripes and, in cluster mode, the
// partition of an entity forever. Pure function.

#ifndef EVENTFOLD_CORE_STABLE_HASH_H_
#define EVENTFOLD_CORE_STABLE_HASH_H_

#include <cstdint>
#include <string_view>

namespace eventfold {

inline uint64_t StableHash(std::string_view a, std::string_view b = {}) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix(a);
  h ^= 0xFF;  // separator, so ("ab","c") and ("a","bc") differ
  h *= 1099511628211ull;
  mix(b);
  return h;
}

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_STABLE_HASH_H_
