// eventfold-replay-bench: what replay and late arrivals cost (Google Benchmark).
//
//   BM_Rebuild/events:N/threads:T   Store::Rebuild of a store pre-filled with
//       N simulated ReceiptRoller events (real directory, default LevelDB
//       Env). Reports events/s and memory growth during the rebuild.
//   BM_RawScan/events:N/family:F    a plain LevelDB scan of the same store
//       (F=all: every key/value; F=events: only the a/ event records): the
//       raw engine's speed, for the rebuild/scan ratio.
//   BM_LateArrival/length:N         one late event (occurred_at just before
//       the entity's last event, no version) into an inventory entity that
//       holds N events (in-memory LevelDB Env, Durability::kBuffered).
//   BM_InOrderIngest                one in-order event, same store: the
//       direct-apply baseline a late arrival is compared with.
//   BM_RebuildSwitchPause/events:N/ingest_per_s:R   a full rebuild of N
//       events while 16 writers ingest R synced events a second: the pause
//       the switch stops ingest for, and the slowest answer.
//
// Filled stores are built once per size and process (the 1M-event one takes
// a while) and removed at exit — unless EVENTFOLD_REPLAY_BENCH_DIR names a
// directory: then they are kept there and reused by later runs (handy for
// profiling a rebuild under valgrind without filling under it too).
// See docs/notes/replay-performance.md for how to run and read it.

#include <benchmark/benchmark.h>
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <malloc.h>
#include <simdjson.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "core/rfc3339.h"
#include "eventfold/options.h"
#include "eventfold/store.h"
#include "tools/history.h"

namespace eventfold::bench {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

constexpr size_t kIngestChunk = 1000;
constexpr double kMiB = 1024.0 * 1024.0;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "eventfold-replay-bench: %s\n", what.c_str());
  std::exit(2);
}

ScratchRoot& Scratch() {
  static ScratchRoot root("eventfold-replay-bench");
  return root;
}

// Where filled stores live: kept across runs when EVENTFOLD_REPLAY_BENCH_DIR
// is set, otherwise in the scratch directory.
fs::path FilledRoot() {
  const char* keep = std::getenv("EVENTFOLD_REPLAY_BENCH_DIR");
  if (keep == nullptr || *keep == '\0') return Scratch().path();
  fs::create_directories(keep);
  return keep;
}

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

// Ingests `bodies` in IngestBatch chunks; every one must be accepted.
void IngestAll(Store& store, const std::vector<std::string>& bodies, size_t begin, size_t end) {
  std::vector<Delivery> chunk;
  for (size_t i = begin; i < end; i += kIngestChunk) {
    chunk.clear();
    for (size_t j = i; j < std::min(end, i + kIngestChunk); ++j) {
      chunk.push_back(Delivery{{}, bodies[j]});
    }
    const std::vector<IngestResult> results = store.IngestBatch(chunk);
    for (const IngestResult& r : results) {
      if (r.outcome != Outcome::kAccepted) {
        Die("fill: " + std::string(OutcomeName(r.outcome)) + " " + r.event_id + ": " + r.message);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// A store pre-filled with exactly N simulated events, built once per size.

struct FilledStore {
  fs::path dir;  // pristine: never opened by a benchmark, only copied
  uint64_t events = 0;
  uint64_t bytes = 0;  // on disk
  double fill_seconds = 0;
};

// A ReceiptRoller history of at least `n` distinct events, no duplicates,
// malformed bodies or conflicts (each event is stored exactly once).
std::vector<std::string> HistoryOf(uint64_t n) {
  for (double scale = 1.0;; scale *= 1.25) {
    sim::HistoryOptions ho;
    ho.seed = 20260101 + n;
    // About 3% products (each ~6 events: created, updates, inventory),
    // the rest receipts (1.25 events each: issued, 25% refunded).
    ho.products = static_cast<int>(std::max<uint64_t>(50, n / 200));
    const double receipt_events = static_cast<double>(n) - ho.products * 6.2;
    ho.receipts = static_cast<int>(scale * receipt_events / 1.25) + 100;
    ho.duplicate_rate = 0;
    ho.malformed = 0;
    ho.conflicts = 0;
    sim::History h = sim::GenerateHistory(ho);
    if (h.events.size() >= n) {
      h.events.resize(n);  // in production (occurred_at) order: drop the tail
      return std::move(h.events);
    }
  }
}

const FilledStore& Filled(uint64_t n) {
  static std::map<uint64_t, FilledStore> cache;
  if (auto it = cache.find(n); it != cache.end()) return it->second;
  FilledStore f;
  f.dir = FilledRoot() / ("filled-" + std::to_string(n));
  const fs::path ready = f.dir.string() + ".ready";  // written once complete
  if (fs::exists(ready) && fs::exists(f.dir)) {
    f.events = n;
    f.bytes = DirectoryBytes(f.dir);
    std::fprintf(stderr, "[reusing %s: %" PRIu64 " events, %.0f MiB on disk]\n", f.dir.c_str(),
                 f.events, static_cast<double>(f.bytes) / kMiB);
    return cache.emplace(n, std::move(f)).first->second;
  }
  fs::remove_all(f.dir);
  const auto start = SteadyClock::now();
  {
    std::vector<std::string> bodies = HistoryOf(n);
    Options o;
    o.durability = Durability::kBuffered;
    Result<std::unique_ptr<Store>> store = Store::Open(f.dir.string(), o);
    if (!store.ok()) Die(store.status().ToString());
    IngestAll(**store, bodies, 0, bodies.size());
    f.events = bodies.size();
  }  // the store closes, the history is freed
  ::malloc_trim(0);
  f.fill_seconds = Seconds(SteadyClock::now() - start);
  f.bytes = DirectoryBytes(f.dir);
  std::ofstream(ready) << f.events << "\n";
  std::fprintf(stderr, "[filled %" PRIu64 " events in %.1f s, %.0f MiB on disk]\n", f.events,
               f.fill_seconds, static_cast<double>(f.bytes) / kMiB);
  return cache.emplace(n, std::move(f)).first->second;
}

// A fresh copy of the pristine store for one benchmark run: every run starts
// from the same files (a rebuild rewrites the store; even opening one may
// compact it).
fs::path WorkCopy(const FilledStore& f) {
  const fs::path work = Scratch().path() / "work";
  fs::remove_all(work);
  fs::copy(f.dir, work, fs::copy_options::recursive);
  return work;
}

// ---------------------------------------------------------------------------
// 1. Full rebuild.

void BM_Rebuild(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const FilledStore& f = Filled(n);
  uint64_t events = 0, entities = 0;
  double build_s = 0, finish_s = 0, total_s = 0;
  double hwm_growth = 0, peak_growth = 0, anon_growth = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path work = WorkCopy(f);
    Options o;
    o.durability = Durability::kBuffered;
    Result<std::unique_ptr<Store>> store = Store::Open(work.string(), o);
    if (!store.ok()) {
      state.SkipWithError(store.status().ToString().c_str());
      break;
    }
    RebuildOptions ro;
    ro.threads = threads;
    ::malloc_trim(0);
    const bool reset = ResetPeakRss();
    const uint64_t hwm_before = ProcStatusBytes("VmHWM");
    const Rss before = ReadRss();
    state.ResumeTiming();

    RssSampler sampler;
    const auto start = SteadyClock::now();
    Result<RebuildSummary> sum = (*store)->maintenance().Rebuild(ro);
    const double seconds = Seconds(SteadyClock::now() - start);
    sampler.Stop();

    state.PauseTiming();
    if (!sum.ok()) {
      state.SkipWithError(sum.status().ToString().c_str());
      break;
    }
    const uint64_t hwm_after = ProcStatusBytes("VmHWM");
    // With the mark reset, VmHWM is this rebuild's own peak; without it, only
    // a rise above the process's earlier peak shows.
    hwm_growth += static_cast<double>(hwm_after - (reset ? before.total : hwm_before));
    peak_growth +=
        static_cast<double>(sampler.Peak().total - std::min(sampler.Peak().total, before.total));
    anon_growth +=
        static_cast<double>(sampler.Peak().anon - std::min(sampler.Peak().anon, before.anon));
    events += sum->events;
    entities = sum->entities;
    build_s += sum->seconds;
    finish_s += seconds - sum->seconds;
    total_s += seconds;
    store->reset();  // waits for LevelDB's background compaction to stop
    fs::remove_all(work);
    state.ResumeTiming();
  }
  const double iters =
      static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["entities"] = static_cast<double>(entities);
  state.counters["build_s"] = build_s / iters;    // BuildGeneration: route + fold
  state.counters["finish_s"] = finish_s / iters;  // catch-up, switch, drop old generation
  state.counters["total_s"] = total_s / iters;
  state.counters["hwm_growth_MiB"] = hwm_growth / iters / kMiB;
  state.counters["rss_peak_growth_MiB"] = peak_growth / iters / kMiB;
  state.counters["anon_peak_growth_MiB"] = anon_growth / iters / kMiB;
  state.counters["store_MiB"] = static_cast<double>(f.bytes) / kMiB;
}

// ---------------------------------------------------------------------------
// 3. The raw engine: a plain LevelDB scan of the same store.

void BM_RawScan(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  const bool all = state.range(1) == 0;
  const FilledStore& f = Filled(n);
  const fs::path work = WorkCopy(f);
  leveldb::Options lo;
  lo.create_if_missing = false;
  leveldb::DB* raw = nullptr;
  leveldb::Status s = leveldb::DB::Open(lo, work.string(), &raw);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  std::unique_ptr<leveldb::DB> db(raw);
  uint64_t events = 0, keys = 0, bytes = 0, checksum = 0;
  for (auto _ : state) {
    leveldb::ReadOptions ro;
    ro.fill_cache = false;  // as the rebuild reads
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));
    const leveldb::Slice events_prefix("a/");
    all ? it->SeekToFirst() : it->Seek(events_prefix);
    for (; it->Valid(); it->Next()) {
      const leveldb::Slice k = it->key();
      const bool is_event = k.starts_with(events_prefix);
      if (!all && !is_event) break;
      const leveldb::Slice v = it->value();
      events += is_event;
      ++keys;
      bytes += k.size() + v.size();
      checksum += v.empty() ? 0 : static_cast<unsigned char>(v[v.size() / 2]);
    }
    if (!it->status().ok()) {
      state.SkipWithError(it->status().ToString().c_str());
      break;
    }
  }
  benchmark::DoNotOptimize(checksum);
  const double iters =
      static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["keys_per_event"] =
      static_cast<double>(keys) / std::max<double>(1, static_cast<double>(events));
  state.counters["MiB_per_s"] =
      benchmark::Counter(static_cast<double>(bytes) / kMiB, benchmark::Counter::kIsRate);
  state.counters["events"] = static_cast<double>(events) / iters;
  db.reset();
  fs::remove_all(work);
}

// ---------------------------------------------------------------------------
// 2. Late arrivals versus entity length.
//
// Every timed late event is the first one its entity receives: it lands
// just before the entity's last event, so it always re-folds the same part
// of the log (the events since the last snapshot before it). Sending several
// late events into one entity would pile them up there, and each would
// re-fold the ones before it too, measuring the pile rather than the entity's
// length. So each length has a pool of identical entities, one per timed
// iteration, all in one shared in-memory store.

constexpr int64_t kLateStart = 1795000000000000;  // 2026-11-18
constexpr int64_t kSecond = 1000000;

std::string InventoryBody(const std::string& event_id, const std::string& product_id,
                          int64_t occurred_at, std::optional<int64_t> version, int64_t on_hand) {
  std::string b;
  b.reserve(640);
  b +=
      R"({"event_id":")" + event_id + R"(","type":"inventory.updated","api_version":"2025-10-01",)";
  b += R"("occurred_at":")" + FormatRfc3339(occurred_at) + "\",";
  if (version) b += "\"version\":" + std::to_string(*version) + ",";
  b += R"("account":"acct_5e1f0a9b3c7d","livemode":true,)";
  b += R"("data":{"product_id":")" + product_id + R"(","sku":"SKU-00042","location":"wh_bkk_01",)";
  b += "\"on_hand\":" + std::to_string(on_hand) + ",\"reserved\":" + std::to_string(on_hand % 7) +
       R"(,"reason":"sync"},)";
  b += R"("metadata":{"source":"inventory-sync","request_id":"req_0f3a9c1d2b4e6f70",)"
       R"("trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","locale":"th-TH",)"
       R"("timezone":"Asia/Bangkok","delivery":"at-least-once",)"
       R"("client":"receiptroller-webhooks/3.8.2","region":"ap-southeast-1",)"
       R"("schema":"https://schemas.receiptroller.example/inventory.updated/2025-10-01.json"}})";
  return b;
}

class LateStore {
 public:
  static LateStore& Get() {
    static LateStore s;
    return s;
  }
  Store& store() { return *store_; }

  // The next entity of `length` events that has had no late event yet;
  // builds `batch` more when the pool is used up (call with timing paused).
  std::string Next(int64_t length, int batch) {
    Pool& pool = pools_[length];
    if (pool.next == pool.ids.size()) {
      const auto start = SteadyClock::now();
      for (int i = 0; i < batch; ++i) pool.ids.push_back(Fill(length, pool.ids.size()));
      std::fprintf(stderr, "[late pool: %d entities of %" PRId64 " events in %.1f s]\n", batch,
                   length, Seconds(SteadyClock::now() - start));
    }
    return pool.ids[pool.next++];
  }

  // The late event for entity `id` of `length` events.
  Delivery LateFor(const std::string& id, int64_t length) {
    const int64_t last = kLateStart + (length - 1) * kSecond;
    return Delivery{{}, InventoryBody("evt_late_" + id, id, last - 1, std::nullopt, 17)};
  }

 private:
  struct Pool {
    std::vector<std::string> ids;
    size_t next = 0;
  };

  LateStore() : env_(leveldb::NewMemEnv(leveldb::Env::Default())) {
    Options o;
    o.durability = Durability::kBuffered;
    o.env = env_.get();
    Result<std::unique_ptr<Store>> s = Store::Open("/eventfold-late", o);
    if (!s.ok()) Die(s.status().ToString());
    store_ = std::move(*s);
  }

  std::string Fill(int64_t length, size_t index) {
    const std::string id = "prd_len" + std::to_string(length) + "_" + std::to_string(index);
    std::vector<std::string> bodies;
    bodies.reserve(static_cast<size_t>(length));
    for (int64_t i = 0; i < length; ++i) {
      bodies.push_back(InventoryBody("evt_" + id + "_" + std::to_string(i), id,
                                     kLateStart + i * kSecond, i + 1, 100 + i % 50));
    }
    IngestAll(*store_, bodies, 0, bodies.size());
    return id;
  }

  std::unique_ptr<leveldb::Env> env_;  // declared first: outlives the store
  std::unique_ptr<Store> store_;
  std::map<int64_t, Pool> pools_;
};

// Timed iterations per entity length (each needs its own entity).
int LateIterations(int64_t length) {
  if (length <= 10) return 2000;
  if (length <= 1000) return 100;
  if (length <= 10000) return 12;
  return 4;
}

void BM_LateArrival(benchmark::State& state) {
  const int64_t length = state.range(0);
  LateStore& late = LateStore::Get();
  Store& store = late.store();
  const int batch = static_cast<int>(std::max<benchmark::IterationCount>(1, state.max_iterations));
  uint64_t refolded = 0, late_count = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string id = late.Next(length, batch);
    const Delivery d = late.LateFor(id, length);
    const Counters before = store.counters();
    state.ResumeTiming();
    const IngestResult r = store.Ingest(d);
    state.PauseTiming();
    if (r.outcome != Outcome::kAccepted) {
      state.SkipWithError(("late ingest: " + r.message).c_str());
      break;
    }
    const Counters after = store.counters();
    refolded += after.refolded - before.refolded;
    late_count += after.late - before.late;
    state.ResumeTiming();
  }
  state.counters["refolded_per_op"] =
      benchmark::Counter(static_cast<double>(refolded), benchmark::Counter::kAvgIterations);
  state.counters["late_per_op"] =
      benchmark::Counter(static_cast<double>(late_count), benchmark::Counter::kAvgIterations);
}

void BM_InOrderIngest(benchmark::State& state) {
  Store& store = LateStore::Get().store();
  static int64_t next = 0;  // across repetitions: always after the last one
  const std::string id = "prd_in_order";
  uint64_t refolded = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const Delivery d{{},
                     InventoryBody("evt_in_order_" + std::to_string(next), id,
                                   kLateStart + next * kSecond, next + 1, 100)};
    ++next;
    const uint64_t before = store.counters().refolded;
    state.ResumeTiming();
    const IngestResult r = store.Ingest(d);
    state.PauseTiming();
    if (r.outcome != Outcome::kAccepted) {
      state.SkipWithError(("in-order ingest: " + r.message).c_str());
      break;
    }
    refolded += store.counters().refolded - before;
    state.ResumeTiming();
  }
  state.counters["refolded_per_op"] =
      benchmark::Counter(static_cast<double>(refolded), benchmark::Counter::kAvgIterations);
}

// ---------------------------------------------------------------------------
// 4. The rebuild's switch pause under ingest load.

// A full rebuild of N events while 16 writers ingest fresh inventory events
// at a steady `rate` per second in all (synced, one per call). Reports the pause the
// switch stopped ingest for (RebuildSummary::pause_seconds), how many events
// it caught up in rounds while ingest went on and how many with ingest
// stopped, and the writers' slowest acknowledgement during the rebuild (what
// a sender saw of the pause).
void BM_RebuildSwitchPause(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  const int64_t rate = state.range(1);
  const FilledStore& f = Filled(n);
  double pause_s = 0, worst_ack_s = 0;
  uint64_t caught_up = 0, caught_up_paused = 0, written = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path work = WorkCopy(f);
    Options o;  // synced writes: what a receiver runs with
    Result<std::unique_ptr<Store>> store = Store::Open(work.string(), o);
    if (!store.ok()) {
      state.SkipWithError(store.status().ToString().c_str());
      break;
    }
    state.ResumeTiming();
    std::atomic<bool> done{false};
    std::atomic<uint64_t> refused{0}, count{0};
    std::atomic<int64_t> worst_ns{0};
    // Synced ingests share their syncs only when they overlap: kWriters
    // writers, each at rate / kWriters, reach the rate a single synced
    // writer cannot (one fsync per event).
    constexpr int kWriters = 16;
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        const auto period = std::chrono::nanoseconds(1000000000LL * kWriters / rate);
        auto next = SteadyClock::now() + period * w / kWriters;
        for (uint64_t i = w; !done; i += kWriters) {
          next += period;
          std::this_thread::sleep_until(next);
          const std::string id = "prd_pause_" + std::to_string(i % 997);
          const Delivery d{{},
                           InventoryBody("evt_pause_" + std::to_string(i), id,
                                         kLateStart + static_cast<int64_t>(i) * kSecond,
                                         std::nullopt, static_cast<int64_t>(i % 50))};
          const auto start = SteadyClock::now();
          const IngestResult r = (*store)->Ingest(d);
          const int64_t ns =
              std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - start)
                  .count();
          int64_t seen = worst_ns.load();
          while (ns > seen && !worst_ns.compare_exchange_weak(seen, ns)) {
          }
          if (r.outcome != Outcome::kAccepted) refused.fetch_add(1);
          count.fetch_add(1);
        }
      });
    }
    Result<RebuildSummary> sum = (*store)->maintenance().Rebuild(RebuildOptions{});
    done = true;
    for (std::thread& t : writers) t.join();
    state.PauseTiming();
    if (!sum.ok() || refused.load() > 0) {
      state.SkipWithError(sum.ok() ? "the writer's ingest was refused"
                                   : sum.status().ToString().c_str());
      break;
    }
    pause_s += sum->pause_seconds;
    caught_up += sum->events_caught_up;
    caught_up_paused += sum->events_caught_up_paused;
    worst_ack_s = std::max(worst_ack_s, static_cast<double>(worst_ns.load()) / 1e9);
    written += count.load();
    store->reset();
    fs::remove_all(work);
    state.ResumeTiming();
  }
  const double iters =
      static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  state.counters["pause_ms"] = pause_s / iters * 1e3;
  state.counters["caught_up_in_rounds"] = static_cast<double>(caught_up) / iters;
  state.counters["caught_up_paused"] = static_cast<double>(caught_up_paused) / iters;
  state.counters["worst_ack_ms"] = worst_ack_s * 1e3;
  state.counters["ingested_during"] = static_cast<double>(written) / iters;
}

// ---------------------------------------------------------------------------

void RegisterAll() {
  for (int64_t n : {100000, 1000000}) {
    for (int64_t threads : {1, 2}) {
      benchmark::RegisterBenchmark("BM_Rebuild", BM_Rebuild)
          ->ArgNames({"events", "threads"})
          ->Args({n, threads})
          ->Iterations(1)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    for (int64_t family : {0, 1}) {  // 0: every key; 1: a/ events only
      benchmark::RegisterBenchmark("BM_RawScan", BM_RawScan)
          ->ArgNames({"events", "only_events"})
          ->Args({n, family})
          ->Iterations(2)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (int64_t length : {10, 1000, 10000, 100000}) {
    benchmark::RegisterBenchmark("BM_LateArrival", BM_LateArrival)
        ->ArgName("length")
        ->Arg(length)
        ->Iterations(LateIterations(length))
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("BM_RebuildSwitchPause", BM_RebuildSwitchPause)
      ->ArgNames({"events", "ingest_per_s"})
      ->Args({100000, 5000})
      ->Iterations(3)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_InOrderIngest", BM_InOrderIngest)
      ->Iterations(2000)
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace
}  // namespace eventfold::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // On-demand JSON decoding (stored bodies) runs the compile-time "builtin"
  // simdjson kernel; DOM parsing picks the best one at run time.
  benchmark::AddCustomContext("simdjson_ondemand_kernel",
                              simdjson::builtin_implementation()->name());
  benchmark::AddCustomContext("simdjson_runtime_kernel",
                              simdjson::get_active_implementation()->name());
  eventfold::bench::Scratch();  // created before, removed after every benchmark
  eventfold::bench::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
