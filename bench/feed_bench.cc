// eventfold-feed-bench: how fast the change feed reaches a worker (Google
// Benchmark).
//
//   BM_SubscriptionDelivery/changes:N/threads:T   a new Subscription over a
//       store pre-filled with N changes (in-memory LevelDB Env), no-op
//       handler, from Start until its checkpoint reaches N (saved, so the
//       checkpoint writes are in). T=0: RunUntilIdle on the calling thread;
//       T>0: T worker threads plus the feeder. Reports changes/s.
//   BM_ReadFeedScan/changes:N   Store::ReadFeed over the same store in
//       pages of 1024, decoding every change: the baseline the delivery rate
//       is compared with.
//
// Besides changes/s (wall), each reports changes_per_cpu_s: changes over the
// CPU seconds of the whole process (all threads), which a busy machine
// disturbs much less than wall time.
//
// See docs/QUEUE_WORKER.md for the numbers.

#include <benchmark/benchmark.h>
#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eventfold/projection.h"
#include "eventfold/store.h"
#include "eventfold/subscription.h"

namespace eventfold::bench {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "eventfold-feed-bench: %s\n", what.c_str());
  std::exit(2);
}

// A store on a MemEnv holding `n` changes (one per receipt), built once per
// size and process.
struct Filled {
  std::unique_ptr<leveldb::Env> env;
  std::unique_ptr<Store> store;
};

// User + system CPU seconds of the whole process so far.
double ProcessCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void SetCounters(benchmark::State& state, uint64_t n, double cpu_seconds) {
  state.counters["changes/s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["changes_per_cpu_s"] =
      static_cast<double>(n) * static_cast<double>(state.iterations()) / cpu_seconds;
}

Store* FilledStore(uint64_t n) {
  static std::map<uint64_t, Filled> stores;
  Filled& f = stores[n];
  if (f.store) return f.store.get();
  f.env.reset(leveldb::NewMemEnv(leveldb::Env::Default()));
  Options o;
  o.env = f.env.get();
  o.durability = Durability::kBuffered;
  Result<std::unique_ptr<Store>> s = Store::Open("/feed-bench", o);
  if (!s.ok()) Die(s.status().ToString());
  f.store = std::move(*s);
  const int64_t t0 = 1795000000000000;
  std::vector<Delivery> batch;
  for (uint64_t i = 0; i < n; ++i) {
    const std::string rid = "rcp_" + std::to_string(i);
    batch.push_back(Delivery{
        {},
        "{\"event_id\":\"evt_" + rid + "\",\"type\":\"receipt.issued\",\"occurred_at\":\"" +
            FormatTimestamp(t0 + static_cast<int64_t>(i) * 1000) +
            "\",\"data\":{\"receipt_id\":\"" + rid + "\",\"amount\":1500,\"currency\":\"THB\"}}"});
    if (batch.size() == 1000 || i + 1 == n) {
      for (const IngestResult& r : f.store->IngestBatch(batch)) {
        if (r.outcome != Outcome::kAccepted) Die("fill: " + r.message);
      }
      batch.clear();
    }
  }
  if (f.store->feed().LastSeq() != n) Die("fill: unexpected change count");
  return f.store.get();
}

void BM_SubscriptionDelivery(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  Store* store = FilledStore(n);
  static std::atomic<uint64_t> run{0};
  std::atomic<uint64_t> handled{0};
  const double cpu_start = ProcessCpuSeconds();
  for (auto _ : state) {
    SubscriptionOptions o;
    o.name = "bench-" + std::to_string(run.fetch_add(1));  // a new one: from seq 1
    o.threads = threads;
    auto sub = Subscription::Start(store, o, [&](const Change&) {
      handled.fetch_add(1, std::memory_order_relaxed);
      return Status::OK();
    });
    if (!sub.ok()) Die(sub.status().ToString());
    if (threads == 0) {
      if (Status st = (*sub)->RunUntilIdle(); !st.ok()) Die(st.ToString());
    } else if (!(*sub)->WaitForCheckpoint(n, 600'000'000)) {
      Die("delivery did not finish");
    }
    if ((*sub)->Stats().checkpoint != n) Die("checkpoint short of the feed");
    (*sub)->Stop();
  }
  const double cpu = ProcessCpuSeconds() - cpu_start;  // Start/Stop included: small
  if (handled.load() != n * state.iterations()) Die("handled count");
  SetCounters(state, n, cpu);
}
BENCHMARK(BM_SubscriptionDelivery)
    ->ArgNames({"changes", "threads"})
    ->ArgsProduct({{100000}, {0, 1, 2, 4}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_ReadFeedScan(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  Store* store = FilledStore(n);
  const double cpu_start = ProcessCpuSeconds();
  for (auto _ : state) {
    uint64_t after = 0;
    std::vector<Change> page;
    for (;;) {
      page.clear();
      if (Status st = store->feed().Read(after, 1024, AppendTo<Change>(&page)); !st.ok())
        Die(st.ToString());
      if (page.empty()) break;
      after = page.back().seq;
    }
    if (after != n) Die("scan short of the feed");
    benchmark::DoNotOptimize(after);
  }
  SetCounters(state, n, ProcessCpuSeconds() - cpu_start);
}
BENCHMARK(BM_ReadFeedScan)
    ->ArgNames({"changes"})
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace eventfold::bench

BENCHMARK_MAIN();
