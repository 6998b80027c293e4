// Tests of Maintenance::CountProjections: the counts by entity type and
// state it reads from the projection records must equal what listing every
// projection (a fold of each) counts, whatever the history, after
// compaction, after a rebuild and under another profile.

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "eventfold/clock.h"
#include "eventfold/maintenance.h"
#include "eventfold/store.h"
#include "tests/common/invoice_profile.h"
#include "tests/storage/storage_test_util.h"
#include "tools/history.h"

namespace eventfold::storage {
namespace {

using storage_test::TestSeed;

constexpr int64_t kDay = 24LL * 3600 * 1'000'000;

// The counts the slow way: every projection, folded.
ProjectionCounts Listed(Store* store) {
  ProjectionCounts counts;
  Status st = store->List("", [&](const Projection& p) {
    ++counts.by_entity[p.entity][p.state];
    ++counts.projections;
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  return counts;
}

void ExpectCountsAsListed(Store* store, const std::string& when) {
  SCOPED_TRACE(when);
  Result<ProjectionCounts> counted = store->maintenance().CountProjections();
  ASSERT_TRUE(counted.ok()) << counted.status().ToString();
  const ProjectionCounts listed = Listed(store);
  EXPECT_EQ(counted->projections, listed.projections);
  EXPECT_EQ(counted->by_entity, listed.by_entity);
  EXPECT_GT(listed.projections, 0u);
}

TEST(ProjectionCountsTest, EqualTheListedCountsThroughCompactionAndRebuilds) {
  const uint64_t base = TestSeed("ProjectionCountsTest", 31);
  Result<Profile> invoices = Profile::FromJson(test_util::kInvoiceProfile);
  ASSERT_TRUE(invoices.ok()) << invoices.status().ToString();
  uint64_t compacted = 0;
  for (uint64_t seed = base; seed < base + 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    sim::HistoryOptions ho;
    ho.seed = seed;
    ho.receipts = 80;
    ho.products = 20;
    ho.malformed = 3;
    ho.conflicts = 3;
    const sim::History history = sim::GenerateHistory(ho);
    std::unique_ptr<leveldb::Env> env = storage_test::NewMemEnv();
    ManualClock clock(ho.start_micros);
    Options o;
    o.env = env.get();
    o.clock = &clock;
    o.durability = Durability::kBuffered;
    o.snapshot_interval = 2;
    o.gc_interval_micros = 0;
    Result<std::unique_ptr<Store>> opened = Store::Open("/counts", o);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    Store* store = opened->get();
    for (const Delivery& d : history.deliveries) (void)store->Ingest(d);
    ExpectCountsAsListed(store, "after ingest");

    // Terminal entities (refunded receipts, deleted products) compacted.
    clock.Advance(60 * kDay);
    GcOptions gc;
    gc.compact_after_micros = 7 * kDay;
    Result<GcSummary> g = store->maintenance().Gc(gc);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    compacted += g->entities_compacted;
    ExpectCountsAsListed(store, "after compaction");

    ASSERT_TRUE(store->maintenance().Rebuild(nullptr).ok());
    ExpectCountsAsListed(store, "after a rebuild");
    ASSERT_TRUE(store->maintenance().Rebuild(&*invoices).ok());
    ExpectCountsAsListed(store, "under another profile");
  }
  EXPECT_GT(compacted, 0u) << "no entity was compacted: the test would not cover it";
}

}  // namespace
}  // namespace eventfold::storage
