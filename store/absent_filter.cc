#include "store/absent_filter.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>

namespace eventfold::storage {
namespace {

// The bit positions (0-511) of a key in its block: double hashing over the
// hash's two halves, 9 bits each.
template <typename Fn>
void ForEachProbe(uint64_t hash, int probes, Fn fn) {
  uint32_t h = static_cast<uint32_t>(hash >> 32);
  const uint32_t delta = (h >> 17) | (h << 15) | 1;
  for (int i = 0; i < probes; ++i) {
    fn(h & 511);
    h += delta;
  }
}

}  // namespace

AbsentFilter::AbsentFilter(size_t capacity, uint64_t tag)
    : capacity_(capacity),
      tag_(tag),
      blocks_(std::max<size_t>(1, (capacity * kBitsPerKey + 511) / 512)),
      table_(new Block[blocks_]) {
  for (size_t b = 0; b < blocks_; ++b) {
    for (auto& w : table_[b].words) w.store(0, std::memory_order_relaxed);
  }
}

const AbsentFilter::Block& AbsentFilter::BlockOf(uint64_t hash) const {
  // The low half picks the block (multiply-shift: no modulo), the high
  // half the bits in it.
  const uint64_t low = static_cast<uint32_t>(hash);
  return table_[(low * blocks_) >> 32];
}

void AbsentFilter::Add(std::string_view key) {
  const uint64_t hash = XXH3_64bits(key.data(), key.size());
  Block& block = const_cast<Block&>(BlockOf(hash));
  bool fresh = false;
  ForEachProbe(hash, kProbes, [&](uint32_t bit) {
    const uint64_t mask = uint64_t{1} << (bit & 63);
    fresh |= (block.words[bit >> 6].fetch_or(mask, std::memory_order_relaxed) & mask) == 0;
  });
  if (fresh) added_.fetch_add(1, std::memory_order_relaxed);
}

bool AbsentFilter::MayContain(std::string_view key) const {
  const uint64_t hash = XXH3_64bits(key.data(), key.size());
  const Block& block = BlockOf(hash);
  bool all = true;
  ForEachProbe(hash, kProbes, [&](uint32_t bit) {
    if ((block.words[bit >> 6].load(std::memory_order_relaxed) & (uint64_t{1} << (bit & 63))) ==
        0) {
      all = false;
    }
  });
  return all;
}

}  // namespace eventfold::storage
