// The seed of a randomized test.
//
// A fixed default keeps runs reproducible; EVENTFOLD_TEST_SEED overrides it
// to explore other inputs. The seed is always printed (and flushed, so it
// survives a crash) so a failure can be replayed exactly.

#ifndef EVENTFOLD_TESTS_COMMON_TEST_SEED_H_
#define EVENTFOLD_TESTS_COMMON_TEST_SEED_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace eventfold::test_util {

// Whether EVENTFOLD_TEST_SEED names a seed (set and not empty), so that a
// test running several seeds runs that one alone.
inline bool TestSeedChosen() {
  const char* env = std::getenv("EVENTFOLD_TEST_SEED");
  return env != nullptr && *env != '\0';
}

inline uint64_t TestSeed(const char* test_name, uint64_t fallback) {
  uint64_t seed = fallback;
  if (TestSeedChosen()) seed = std::strtoull(std::getenv("EVENTFOLD_TEST_SEED"), nullptr, 10);
  std::printf("%s: seed=%llu (set EVENTFOLD_TEST_SEED to replay)\n", test_name,
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_TEST_SEED_H_
