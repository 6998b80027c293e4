// eventfold-retention-bench: the cost of event retention (Google Benchmark).
//
//   BM_GcCompact/receipts:N   Store::Gc compacting N refunded receipts (two
//       events each) of a fresh in-memory store; reports events/s compacted.
//   BM_Rebuild/receipts:N/compacted:C   a full Store::Rebuild of the same
//       store, as stored (C=0) or after the compaction (C=1: every entity
//       is seeded from its snapshot); reports entities/s. The C=0 rebuild is
//       the baseline both other figures are compared with.
//
// See docs/RETENTION.md for the numbers.

#include <benchmark/benchmark.h>
#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "eventfold/projection.h"
#include "eventfold/store.h"

namespace eventfold::bench {
namespace {

constexpr int64_t kT0 = 1795000000000000;
constexpr int64_t kDay = 24LL * 3600 * 1'000'000;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "eventfold-retention-bench: %s\n", what.c_str());
  std::exit(2);
}

// A store on a MemEnv with n receipts, each issued and refunded ten days
// before its ManualClock's now.
struct Filled {
  std::unique_ptr<leveldb::Env> env{leveldb::NewMemEnv(leveldb::Env::Default())};
  ManualClock clock{kT0};
  std::unique_ptr<Store> store;

  explicit Filled(uint64_t n) {
    Options o;
    o.env = env.get();
    o.clock = &clock;
    o.durability = Durability::kBuffered;
    Result<std::unique_ptr<Store>> s = Store::Open("/retention-bench", o);
    if (!s.ok()) Die(s.status().ToString());
    store = std::move(*s);
    std::vector<Delivery> batch;
    for (uint64_t i = 0; i < n; ++i) {
      const std::string rid = "rcp_" + std::to_string(i);
      const std::string at = FormatTimestamp(kT0 + static_cast<int64_t>(i) * 1000);
      const std::string data = "\"data\":{\"receipt_id\":\"" + rid + "\"";
      batch.push_back(Delivery{{},
                               "{\"event_id\":\"i_" + rid +
                                   "\",\"type\":\"receipt.issued\",\"occurred_at\":\"" + at +
                                   "\"," + data + ",\"amount\":1500,\"currency\":\"THB\"}}"});
      batch.push_back(Delivery{{},
                               "{\"event_id\":\"r_" + rid +
                                   "\",\"type\":\"receipt.refunded\",\"occurred_at\":\"" + at +
                                   "\"," + data + "}}"});
      if (batch.size() >= 1000 || i + 1 == n) {
        for (const IngestResult& r : store->IngestBatch(batch)) {
          if (r.outcome != Outcome::kAccepted) Die("fill: " + r.message);
        }
        batch.clear();
      }
    }
    clock.Advance(10 * kDay);
  }

  void Compact() {
    GcOptions g;
    g.compact_after_micros = 7 * kDay;
    Result<GcSummary> sum = store->maintenance().Gc(g);
    if (!sum.ok()) Die(sum.status().ToString());
    if (sum->events_compacted == 0) Die("nothing compacted");
  }
};

void BM_GcCompact(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    Filled f(n);
    state.ResumeTiming();
    f.Compact();
    state.PauseTiming();
    f.store.reset();
    state.ResumeTiming();
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(2 * n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GcCompact)
    ->ArgNames({"receipts"})
    ->Arg(50000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Rebuild(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  Filled f(n);
  if (state.range(1) != 0) f.Compact();
  const std::string before = ProjectionToJson(*f.store->Get("receipt", "rcp_7"));
  for (auto _ : state) {
    RebuildOptions ro;
    ro.threads = 1;
    Result<RebuildSummary> r = f.store->maintenance().Rebuild(ro);
    if (!r.ok()) Die(r.status().ToString());
    if (r->entities != n) Die("rebuilt " + std::to_string(r->entities) + " entities");
  }
  if (ProjectionToJson(*f.store->Get("receipt", "rcp_7")) != before) Die("projection changed");
  state.counters["entities/s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Rebuild)
    ->ArgNames({"receipts", "compacted"})
    ->ArgsProduct({{50000}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace eventfold::bench

BENCHMARK_MAIN();
