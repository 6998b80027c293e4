// Quarantined: what a store's quarantine holds, for tests that check what
// was refused and kept.

#ifndef EVENTFOLD_TESTS_COMMON_QUARANTINED_H_
#define EVENTFOLD_TESTS_COMMON_QUARANTINED_H_

#include <gtest/gtest.h>

#include <vector>

#include "eventfold/store.h"

namespace eventfold::test_util {

// Every refusal `store`'s quarantine holds, oldest first (a failed read
// fails the test).
inline std::vector<RefusedDelivery> Quarantined(Store* store) {
  std::vector<RefusedDelivery> out;
  Status st = store->quarantine().List([&](const RefusedDelivery& r) {
    out.push_back(r);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_QUARANTINED_H_
