// The seed of a randomized test, and the other numbers a test takes from
// its environment.
//
// A fixed default keeps runs reproducible; EVENTFOLD_TEST_SEED overrides it
// to explore other inputs. The seed is always printed (and flushed, so it
// survives a crash) so a failure can be replayed exactly.

#ifndef EVENTFOLD_TESTS_COMMON_TEST_SEED_H_
#define EVENTFOLD_TESTS_COMMON_TEST_SEED_H_

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace eventfold::test_util {

// EVENTFOLD_TEST_SEED when it is set and not empty, else nullptr.
inline const char* ChosenTestSeedText() {
  const char* env = std::getenv("EVENTFOLD_TEST_SEED");
  return env != nullptr && *env != '\0' ? env : nullptr;
}

// Whether EVENTFOLD_TEST_SEED names a seed (set and not empty), so that a
// test running several seeds runs that one alone.
inline bool TestSeedChosen() { return ChosenTestSeedText() != nullptr; }

// The decimal number `text` names, or the test binary ends with a line
// naming `name` (a knob set to "abc" must not quietly run zero rounds, nor
// a seed replay another seed).
inline uint64_t ParseTestKnob(const char* name, const char* text) {
  uint64_t n = 0;
  const char* end = text + std::strlen(text);
  const std::from_chars_result r = std::from_chars(text, end, n);
  if (r.ec != std::errc() || r.ptr != end) {
    std::fprintf(stderr, "%s=%s is not a decimal number below 2^64\n", name, text);
    std::abort();
  }
  return n;
}

// The environment variable `name` as a count (set and not empty), else
// `fallback`; 0 counts as unset. Ends the test binary, as ParseTestKnob,
// when it is not a number.
inline uint64_t EnvCount(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  const uint64_t n = ParseTestKnob(name, text);
  return n > 0 ? n : fallback;
}

// The seed: EVENTFOLD_TEST_SEED (a decimal number), else `fallback`.
inline uint64_t TestSeed(const char* test_name, uint64_t fallback) {
  const char* text = ChosenTestSeedText();
  const uint64_t seed = text ? ParseTestKnob("EVENTFOLD_TEST_SEED", text) : fallback;
  std::printf("%s: seed=%llu (set EVENTFOLD_TEST_SEED to replay)\n", test_name,
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_TEST_SEED_H_
