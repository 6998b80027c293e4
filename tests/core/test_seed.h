// Seeds for the property tests of tests/core.
//
// A fixed default keeps runs reproducible; EVENTFOLD_TEST_SEED overrides it
// to explore other inputs. The seed is always printed so a failure can be
// replayed exactly.

#ifndef EVENTFOLD_TESTS_CORE_TEST_SEED_H_
#define EVENTFOLD_TESTS_CORE_TEST_SEED_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace eventfold::test_util {

inline uint64_t TestSeed(const char* test_name, uint64_t fallback) {
  uint64_t seed = fallback;
  if (const char* env = std::getenv("EVENTFOLD_TEST_SEED"); env && *env) {
    seed = std::strtoull(env, nullptr, 10);
  }
  std::printf("%s: seed=%llu (set EVENTFOLD_TEST_SEED to replay)\n", test_name,
              static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_CORE_TEST_SEED_H_
