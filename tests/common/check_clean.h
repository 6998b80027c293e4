// Asserts that Store::Check finds nothing: each of the first problems is
// reported as a test failure with its key and message, and the count must
// be zero. Shared by the storage, replay and reliability tests.

#ifndef EVENTFOLD_TESTS_COMMON_CHECK_CLEAN_H_
#define EVENTFOLD_TESTS_COMMON_CHECK_CLEAN_H_

#include <gtest/gtest.h>

#include <cstdint>

#include "eventfold/maintenance.h"
#include "eventfold/store.h"

namespace eventfold::test_util {

// The summary of a clean check; an empty one (and a failure) when the check
// itself failed.
inline CheckSummary ExpectCheckClean(Store* store) {
  uint64_t shown = 0;
  Result<CheckSummary> c = store->maintenance().Check([&](const CheckProblem& p) {
    if (++shown <= 5) ADD_FAILURE() << "check: " << p.key << ": " << p.message;
  });
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return {};
  EXPECT_EQ(c->problems, 0u);
  return *c;
}

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_CHECK_CLEAN_H_
