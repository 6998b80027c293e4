// Helpers shared by the change feed and subscription tests: stores on an
// in-memory Env with a ManualClock, and ingests that produce known changes.

#ifndef EVENTFOLD_TESTS_FEED_FEED_TEST_UTIL_H_
#define EVENTFOLD_TESTS_FEED_FEED_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eventfold/clock.h"
#include "eventfold/feed.h"
#include "eventfold/projection.h"
#include "eventfold/store.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold::feed_test {

using storage_test::Body;
using storage_test::NewMemEnv;
using storage_test::TestSeed;

inline constexpr int64_t kT0 = 1795000000000000;  // 2026-11-18, microseconds
inline constexpr int64_t kSecond = 1'000'000;

// A store on a MemEnv with a ManualClock; reopenable on the same files.
// `tune` adjusts the Options of every open.
class MemStore {
 public:
  explicit MemStore(std::function<void(Options*)> tune = {})
      : env_(NewMemEnv()), clock_(kT0), tune_(std::move(tune)) {
    Reopen();
  }

  void Reopen() {
    store_.reset();
    Options o;
    o.env = env_.get();
    o.clock = &clock_;
    if (tune_) tune_(&o);
    Result<std::unique_ptr<Store>> s = Store::Open("/feed", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  void Close() { store_.reset(); }

  Store* store() { return store_.get(); }
  ManualClock* clock() { return &clock_; }
  leveldb::Env* env() { return env_.get(); }

 private:
  std::unique_ptr<leveldb::Env> env_;
  ManualClock clock_;
  std::function<void(Options*)> tune_;
  std::unique_ptr<Store> store_;
};

// One inventory.updated of product `pid`; each with a higher version and
// time changes the projection, so each ingest makes exactly one change.
inline std::string InventoryUpdate(const std::string& event_id, const std::string& pid,
                                   int64_t version) {
  return Body(event_id, "inventory.updated", FormatTimestamp(kT0 + version * kSecond),
              "{\"product_id\":\"" + pid + "\",\"qty\":" + std::to_string(version) + "}", version);
}

// Ingests one change for each product in `pids`, in order (one ingest each),
// and returns their seqs. `versions` tracks the next version per product.
class ChangeMaker {
 public:
  explicit ChangeMaker(Store* store) : store_(store) {}
  void set_store(Store* store) { store_ = store; }

  uint64_t Touch(const std::string& pid) {
    const int64_t v = ++versions_[pid];
    IngestResult r =
        store_->Ingest(InventoryUpdate("evt_" + pid + "_" + std::to_string(v), pid, v));
    EXPECT_EQ(r.outcome, Outcome::kAccepted) << r.message;
    const uint64_t seq = store_->feed().LastSeq();
    entity_of_[seq] = pid;
    return seq;
  }

  std::vector<uint64_t> TouchAll(const std::vector<std::string>& pids) {
    std::vector<uint64_t> out;
    for (const std::string& p : pids) out.push_back(Touch(p));
    return out;
  }

  // Product id of a change made here.
  const std::string& EntityOf(uint64_t seq) { return entity_of_[seq]; }

 private:
  Store* store_;
  std::map<std::string, int64_t> versions_;
  std::map<uint64_t, std::string> entity_of_;
};

inline std::vector<Change> ReadAll(Store* store) {
  std::vector<Change> out;
  Status st = store->feed().Read(0, SIZE_MAX, AppendTo<Change>(&out));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

inline std::vector<ParkedChange> Parked(Store* store, const std::string& subscription) {
  std::vector<ParkedChange> out;
  Status st = store->feed().ListParked(subscription, [&](const ParkedChange& p) {
    out.push_back(p);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

inline uint64_t Checkpoint(Store* store, const std::string& subscription) {
  Result<uint64_t> cp = store->feed().GetCheckpoint(subscription);
  EXPECT_TRUE(cp.ok()) << cp.status().ToString();
  return cp.ok() ? *cp : 0;
}

}  // namespace eventfold::feed_test

#endif  // EVENTFOLD_TESTS_FEED_FEED_TEST_UTIL_H_
