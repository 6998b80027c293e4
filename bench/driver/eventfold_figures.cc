// eventfold's own figures: durable and async ingest, duplicate delivery,
// late arrival, full rebuild (in child processes, for peak memory).

#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <malloc.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/driver/driver.h"
#include "core/decode.h"
#include "core/rfc3339.h"
#include "eventfold/store.h"

namespace eventfold::benchdrv {
namespace {

constexpr size_t kFillChunk = 1000;

std::unique_ptr<Store> OpenStore(const fs::path& dir, Durability durability,
                                 leveldb::Env* env = nullptr,
                                 size_t recent_events = Options().recent_events) {
  Options o;
  o.durability = durability;
  o.env = env;
  o.recent_events = recent_events;
  Result<std::unique_ptr<Store>> store = Store::Open(dir.string(), o);
  if (!store.ok()) Die("opening " + dir.string() + ": " + store.status().ToString());
  return std::move(*store);
}

void FillStore(Store& store, const std::vector<std::string>& bodies, size_t begin, size_t end) {
  std::vector<Delivery> chunk;
  for (size_t i = begin; i < end; i += kFillChunk) {
    chunk.clear();
    for (size_t j = i; j < std::min(end, i + kFillChunk); ++j) {
      chunk.push_back(Delivery{{}, bodies[j]});
    }
    for (const IngestResult& r : store.IngestBatch(chunk)) {
      if (r.outcome != Outcome::kAccepted) {
        Die("fill: " + std::string(OutcomeName(r.outcome)) + " " + r.event_id + ": " + r.message);
      }
    }
  }
}

}  // namespace

// One timed ingest run on a fresh copy of the template store: the pool's
// bodies after the prefill, each ingested once.
Throughput IngestRun(Context& ctx, const std::string& name, bool durable, int producers) {
  const Durability durability = durable ? Durability::kSync : Durability::kBuffered;
  const fs::path dir = ctx.config.scratch / ("run-" + name);
  CopyDir(ctx.template_store, dir);
  CountingEnv env;
  std::unique_ptr<Store> store = OpenStore(dir, durability, &env);
  const size_t first = ctx.config.prefill_events;
  const uint64_t available = ctx.pool.bodies.size() - first;
  Throughput t;
  {
    ProfileScope profile(name);
    const EnvCounts before = env.counts();
    t = RunTimed(producers, ctx.config.seconds, available, [&](int, uint64_t i) {
      IngestResult r = store->Ingest(Delivery{{}, ctx.pool.bodies[first + i]});
      return r.outcome == Outcome::kAccepted;
    });
    t.io = Diff(env.counts(), before);
  }
  if (t.ops >= available) {
    Log("%s: ran out of bodies after %" PRIu64 " events (%.1fs)", name.c_str(), t.ops, t.seconds);
  }
  store.reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
  return t;
}

void BuildTemplateStore(const Pool& pool, uint64_t events, const fs::path& dir) {
  {
    std::unique_ptr<Store> store = OpenStore(dir, Durability::kBuffered);
    FillStore(*store, pool.bodies, 0, events);
  }
  CompactAll(dir);
}

// ---------------------------------------------------------------------------

namespace {

// Redelivers `deliveries` (the prefill's bodies, in a random order) to
// `store` on one thread: a warm-up pass (at most a second), then the timed
// run. Each is handed over as a receiver holds it, a Delivery already made
// (Store::Ingest takes it by reference), so the run does not count a copy
// of every body that the store never asked for.
Throughput Redeliver(Context& ctx, Store* store, const std::vector<Delivery>& deliveries) {
  auto dup = [&](int, uint64_t i) {
    return store->Ingest(deliveries[i % deliveries.size()]).outcome == Outcome::kDuplicate;
  };
  RunTimed(1, ctx.config.quick ? 0.2 : 1.0, deliveries.size(), dup);
  return RunTimed(1, ctx.config.seconds, UINT64_MAX, dup);
}

}  // namespace

std::vector<Throughput> RunDuplicateFigure(Context& ctx) {
  std::vector<Throughput> out;
  {
    // Redelivery of stored events (a retry storm): the prefill's bodies again,
    // in a seeded random order, on one thread. One warm-up pass over a share
    // of them first (cold block cache after the copy).
    const fs::path dir = ctx.config.scratch / "run-duplicate";
    CopyDir(ctx.template_store, dir);
    std::vector<uint32_t> order(ctx.config.prefill_events);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(6));
    std::vector<Delivery> redeliveries;
    redeliveries.reserve(order.size());
    for (uint32_t i : order) redeliveries.push_back(Delivery{{}, ctx.pool.bodies[i]});
    {
      std::unique_ptr<Store> store = OpenStore(dir, Durability::kSync);
      // A body's first redelivery reads its dedup entry and remembers the
      // body (Options::recent_events holds the whole prefill): the run is a
      // retry storm over events the store has seen redelivered before.
      {
        ProfileScope profile("duplicate");
        out.push_back(Redeliver(ctx, store.get(), redeliveries));
      }
      // Reads of the same store's projections, in random entity order: each
      // folds its fields from the cursor (format 4), so it costs a few reads.
      std::vector<EntityRef> refs;
      for (uint32_t i : order) {
        Result<DecodedEvent> d = DecodeEvent(ctx.pool.bodies[i], Profile::ReceiptRoller());
        if (d.ok() && d->entity) refs.push_back(*d->entity);
      }
      if (refs.empty()) Die("no routed entity in the prefill");
      auto get = [&](int, uint64_t i) {
        const EntityRef& r = refs[i % refs.size()];
        return store->Get(r.entity, r.id).ok();
      };
      RunTimed(1, ctx.config.quick ? 0.2 : 1.0, refs.size(), get);
      ProfileScope profile("projection_get");
      out.push_back(RunTimed(1, ctx.config.seconds, UINT64_MAX, get));
    }
    // The same redeliveries answered by the database alone (no memory of
    // recent bodies): each reads its d/ entry.
    {
      std::unique_ptr<Store> store = OpenStore(dir, Durability::kSync, nullptr, 0);
      out.push_back(Redeliver(ctx, store.get(), redeliveries));
    }
    // The physical floor of that lookup: LevelDB Gets of the same d/ keys in
    // the same store, opened raw with the store's own options.
    {
      std::vector<std::string> keys;
      keys.reserve(order.size());
      const Profile& profile = Profile::ReceiptRoller();
      for (uint32_t i : order) {
        Result<DecodedEvent> d = DecodeEvent(ctx.pool.bodies[i], profile);
        if (!d.ok()) Die("decode: " + d.status().ToString());
        keys.push_back("d/" + d->event.event_id);
      }
      std::unique_ptr<leveldb::Cache> cache(leveldb::NewLRUCache(32 << 20));
      std::unique_ptr<const leveldb::FilterPolicy> bloom(leveldb::NewBloomFilterPolicy(10));
      leveldb::Options lo;
      lo.block_cache = cache.get();
      lo.filter_policy = bloom.get();
      leveldb::DB* raw = nullptr;
      if (!leveldb::DB::Open(lo, dir.string(), &raw).ok()) Die("raw open for Get");
      std::unique_ptr<leveldb::DB> db(raw);
      auto get = [&](int, uint64_t i) {
        std::string value;
        return db->Get(leveldb::ReadOptions(), keys[i % keys.size()], &value).ok();
      };
      RunTimed(1, ctx.config.quick ? 0.2 : 1.0, keys.size(), get);
      out.push_back(RunTimed(1, ctx.config.seconds, UINT64_MAX, get));
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Late arrival: inventory entities of a given length, their events built from
// a real inventory.updated body (unversioned, so every event applies), one
// second apart. A late event sorts just before one of the entity's last ten
// events (a retry that lost the race against a few newer ones); a deep one
// sorts into the middle of the log.

namespace {

// Replaces the string value of the first "key":"..." in `body`.
void SetString(std::string* body, std::string_view key, std::string_view value) {
  const std::string needle = "\"" + std::string(key) + "\":\"";
  const size_t at = body->find(needle);
  if (at == std::string::npos) Die("late arrival template lacks " + std::string(key));
  const size_t start = at + needle.size();
  const size_t end = body->find('"', start);
  body->replace(start, end - start, value);
}

void RemoveVersion(std::string* body) {
  const size_t at = body->find("\"version\":");
  if (at == std::string::npos) return;
  const size_t end = body->find(',', at);
  body->erase(at, end - at + 1);
}

class LateBodies {
 public:
  explicit LateBodies(const Pool& pool) {
    for (const std::string& b : pool.bodies) {
      if (b.find("\"type\":\"inventory.updated\"") != std::string::npos) {
        template_ = b;
        break;
      }
    }
    if (template_.empty()) Die("late arrival: no inventory.updated body in the pool");
    RemoveVersion(&template_);
  }
  // Event `tag` of product `product` at `micros`.
  std::string Make(const std::string& product, const std::string& tag, int64_t micros) const {
    std::string b = template_;
    SetString(&b, "event_id", "evt_" + tag);
    SetString(&b, "occurred_at", FormatRfc3339(micros));
    SetString(&b, "product_id", product);
    return b;
  }

 private:
  std::string template_;
};

constexpr int64_t kLateBase = 1795000000000000;
constexpr int64_t kSecondMicros = 1000000;

}  // namespace

void RunLateArrivalFigures(Context& ctx) {
  if (!ctx.config.Runs("late")) return;
  Results& res = ctx.results;
  const LateBodies make(ctx.pool);
  const fs::path dir = ctx.config.scratch / "run-late";
  std::error_code ec;
  fs::remove_all(dir, ec);
  std::unique_ptr<Store> store = OpenStore(dir, Durability::kBuffered);
  std::mt19937_64 rng(11);
  res.notes["late_arrival_method"] =
      "Durability::kBuffered, real directory; late = sorts before one of the entity's last 10 "
      "events; deep = sorts into the middle of its log";
  for (uint64_t length : ctx.config.late_lengths) {
    const int ops = ctx.config.late_ops;
    // Entities of exactly `length` events; each op goes to the next one, so
    // short entities stay short (at most ops/entities late events each).
    const uint64_t entities =
        std::max<uint64_t>(1, std::min<uint64_t>(ops, 20000 / std::max<uint64_t>(1, length)));
    std::vector<std::string> products;
    std::vector<uint64_t> next(entities, length);  // in-order events so far
    const auto fill_start = SteadyClock::now();
    for (uint64_t e = 0; e < entities; ++e) {
      products.push_back("prd_late_" + std::to_string(length) + "_" + std::to_string(e));
      std::vector<Delivery> chunk;
      for (uint64_t k = 0; k < length; ++k) {
        chunk.push_back(
            Delivery{{},
                     make.Make(products.back(), products.back() + "_" + std::to_string(k),
                               kLateBase + static_cast<int64_t>(k) * kSecondMicros)});
        if (chunk.size() == kFillChunk || k + 1 == length) {
          for (const IngestResult& r : store->IngestBatch(chunk)) {
            if (r.outcome != Outcome::kAccepted) Die("late fill: " + r.message);
          }
          chunk.clear();
        }
      }
    }
    Log("late arrival: %" PRIu64 " entities of %" PRIu64 " events filled in %.1fs", entities,
        length, std::chrono::duration<double>(SteadyClock::now() - fill_start).count());

    const std::string l = std::to_string(length);
    const Counters before = store->counters();
    uint64_t serial = 0;
    struct Cost {
      double mean = 0, median = 0, p99 = 0;  // ns per event
    };
    auto timed = [&](int n, auto make_body) {
      std::vector<std::string> bodies;
      for (int j = 0; j < n; ++j) bodies.push_back(make_body(j));
      std::vector<double> ns;
      for (const std::string& b : bodies) {
        const auto start = SteadyClock::now();
        IngestResult r = store->Ingest(Delivery{{}, b});
        ns.push_back(std::chrono::duration<double, std::nano>(SteadyClock::now() - start).count());
        if (r.outcome != Outcome::kAccepted) Die("late arrival: " + r.message);
      }
      Cost c;
      c.mean = std::accumulate(ns.begin(), ns.end(), 0.0) / static_cast<double>(ns.size());
      std::sort(ns.begin(), ns.end());
      c.median = ns[ns.size() / 2];
      c.p99 = ns[std::min(ns.size() - 1, ns.size() * 99 / 100)];
      return c;
    };
    // Late by a few events.
    const Cost late = timed(ops, [&](int j) {
      const uint64_t e = static_cast<uint64_t>(j) % entities;
      const uint64_t back = 1 + rng() % std::min<uint64_t>(10, length);
      const int64_t at = kLateBase + static_cast<int64_t>(next[e] - back) * kSecondMicros -
                         kSecondMicros / 2 + static_cast<int64_t>(serial % 1000);
      return make.Make(products[e], "late_" + l + "_" + std::to_string(serial++), at);
    });
    const Counters after = store->counters();
    const double refolded = static_cast<double>(after.refolded - before.refolded) / ops;
    // In order: the direct-apply path, into the same entities.
    const Cost in_order = timed(ops, [&](int j) {
      const uint64_t e = static_cast<uint64_t>(j) % entities;
      const int64_t at = kLateBase + static_cast<int64_t>(next[e]++) * kSecondMicros;
      return make.Make(products[e], "next_" + l + "_" + std::to_string(serial++), at);
    });
    // Deep: into the middle of the log.
    const int deep = ctx.config.deep_late_ops;
    const Counters before_deep = store->counters();
    const Cost deep_cost = timed(deep, [&](int j) {
      const uint64_t e = static_cast<uint64_t>(j) % entities;
      const int64_t at = kLateBase + static_cast<int64_t>(next[e] / 2) * kSecondMicros -
                         kSecondMicros / 3 + static_cast<int64_t>(serial % 1000);
      return make.Make(products[e], "deep_" + l + "_" + std::to_string(serial++), at);
    });
    const double deep_refolded =
        static_cast<double>(store->counters().refolded - before_deep.refolded) / deep;
    res.Set("late_ns_" + l, late.mean);
    res.Set("late_median_ns_" + l, late.median);
    res.Set("late_p99_ns_" + l, late.p99);
    res.Set("late_refolded_" + l, refolded);
    res.Set("inorder_ns_" + l, in_order.mean);
    res.Set("inorder_median_ns_" + l, in_order.median);
    res.Set("deep_late_ns_" + l, deep_cost.mean);
    res.Set("deep_late_median_ns_" + l, deep_cost.median);
    res.Set("deep_late_refolded_" + l, deep_refolded);
    Log("late arrival, %6" PRIu64
        "-event entities: late mean %s median %s (%.0f events "
        "re-folded); in order mean %s median %s; deep mean %s (%.0f re-folded)",
        length, FormatNs(late.mean).c_str(), FormatNs(late.median).c_str(), refolded,
        FormatNs(in_order.mean).c_str(), FormatNs(in_order.median).c_str(),
        FormatNs(deep_cost.mean).c_str(), deep_refolded);
  }
  store.reset();
  fs::remove_all(dir, ec);
}

// ---------------------------------------------------------------------------
// Rebuild: each measured in a child process of its own, so that its peak
// memory is the rebuild's and nothing else's.

namespace {

struct ChildRebuildResult {
  double events = 0, seconds = 0, build_seconds = 0, cpu_seconds = 0, peak_anon = 0, base_anon = 0,
         vm_hwm = 0;
  // After the call: until the old generation's drop (in the background)
  // had finished, and the CPU time with it.
  double drop_seconds = 0, cpu_seconds_with_drop = 0;
};

// The re-routing profile: ReceiptRoller's state machines under new entity
// names (receipt -> sale, product -> item, inventory -> stock), so that every
// event routes to an entity the store has never held and a rebuild under it
// must re-derive every log, not only re-fold it.
constexpr const char* kRerouteProfile = R"json({
  "name": "receiptroller-rerouted",
  "entities": [
    {"name": "sale", "key": "data.receipt_id",
     "transitions": [
       {"type": "receipt.issued", "from": ["none"], "to": "issued"},
       {"type": "receipt.refunded", "from": ["issued"], "to": "refunded"}]},
    {"name": "item", "key": "data.product_id",
     "transitions": [
       {"type": "product.created", "from": ["none"], "to": "active"},
       {"type": "product.updated", "from": ["active"], "to": "active"},
       {"type": "product.deleted", "from": ["active"], "to": "deleted"}]},
    {"name": "stock", "key": "data.product_id",
     "transitions": [
       {"type": "inventory.updated", "from": ["none", "tracked"], "to": "tracked"}]}
  ]
})json";

// Rebuilds a fresh copy of the store at `dir` (under the re-routing profile
// when `reroute`): a rebuild leaves the store with compaction work (the
// dropped generation) and a recovered memtable, which would weigh on the
// next run measured on it.
ChildRebuildResult SpawnRebuild(const Config& config, const fs::path& template_dir, int threads,
                                const std::string& mode = "") {
  const fs::path dir = template_dir.string() + "-run";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::copy(template_dir, dir, fs::copy_options::recursive, ec);
  if (ec) Die("copying " + template_dir.string() + ": " + ec.message());
  int code = 0;
  const std::string out =
      RunCommand("'" + config.self_exe + "' --child rebuild --child-dir '" + dir.string() +
                     "' --child-threads " + std::to_string(threads) +
                     (mode.empty() ? "" : " --child-profile " + mode),
                 &code);
  ChildRebuildResult r;
  if (code != 0 || !ResultField(out, "events")) {
    Die("rebuild child failed (exit " + std::to_string(code) + "): " + out);
  }
  r.events = *ResultField(out, "events");
  r.seconds = *ResultField(out, "seconds");
  r.build_seconds = *ResultField(out, "build_seconds");
  r.cpu_seconds = *ResultField(out, "cpu_seconds");
  r.peak_anon = *ResultField(out, "peak_anon");
  r.base_anon = *ResultField(out, "base_anon");
  r.vm_hwm = *ResultField(out, "vm_hwm");
  r.drop_seconds = *ResultField(out, "drop_seconds");
  r.cpu_seconds_with_drop = *ResultField(out, "cpu_seconds_with_drop");
  fs::remove_all(dir, ec);
  return r;
}

// `rounds` rebuilds of fresh copies (as the file figure runs its command):
// the median round by time, whole, and every round's rate in the order run.
// A single rebuild on this machine moves by a third with its load (the
// re-routing one has read 288k and 437k events/s with the same code).
ChildRebuildResult MedianRebuild(const Config& config, const fs::path& template_dir, int threads,
                                 const std::string& mode, std::vector<double>* rates) {
  std::vector<ChildRebuildResult> runs;
  for (int round = 0; round < std::max(1, config.rounds); ++round) {
    runs.push_back(SpawnRebuild(config, template_dir, threads, mode));
    rates->push_back(runs.back().events / runs.back().seconds);
  }
  std::sort(runs.begin(), runs.end(), [](const ChildRebuildResult& a, const ChildRebuildResult& b) {
    return a.seconds < b.seconds;
  });
  return runs[runs.size() / 2];
}

}  // namespace

int ChildRebuild(const std::string& dir, int threads, const std::string& profile_name) {
  std::optional<Profile> profile_arg;
  RebuildOptions ro;
  if (profile_name == "rederive") {
    ro.rederive_logs = true;  // the same profile, every log routed anew
  } else if (profile_name == "reroute") {
    Result<Profile> p = Profile::FromJson(kRerouteProfile);
    if (!p.ok()) Die("re-routing profile: " + p.status().ToString());
    profile_arg = std::move(*p);
  } else if (!profile_name.empty()) {
    Die("unknown rebuild profile " + profile_name);
  }
  std::unique_ptr<Store> store = OpenStore(dir, Durability::kSync);
  ::malloc_trim(0);
  const uint64_t base = bench::ReadRss().anon;
  bench::RssSampler sampler;
  ro.threads = threads;
  if (profile_arg) ro.profile = &*profile_arg;
  const auto start = SteadyClock::now();
  const CpuTimes cpu0 = ProcessCpu();
  std::optional<ProfileScope> profile(std::in_place, "rebuild");
  Result<RebuildSummary> sum = store->maintenance().Rebuild(ro);
  profile.reset();
  // The whole call: the build, the catch-up and switch (RebuildSummary::
  // seconds covers the build only). The old generation is dropped after
  // the call returns, in the background; closing the store waits for that,
  // which drop_seconds measures. CPU time counts every thread, LevelDB's
  // compaction thread included: on a shared machine it is the steadier
  // number. Memory is sampled through the drop.
  const double wall = std::chrono::duration<double>(SteadyClock::now() - start).count();
  const double cpu_call = CpuSecondsSince(cpu0);
  const auto returned = SteadyClock::now();
  store.reset();
  const double drop = std::chrono::duration<double>(SteadyClock::now() - returned).count();
  const double cpu_with_drop = CpuSecondsSince(cpu0);
  sampler.Stop();
  if (!sum.ok()) {
    std::fprintf(stderr, "rebuild: %s\n", sum.status().ToString().c_str());
    return 2;
  }
  std::printf("RESULT events=%" PRIu64 " entities=%" PRIu64
              " seconds=%.6f build_seconds=%.6f"
              " cpu_seconds=%.6f peak_anon=%" PRIu64 " base_anon=%" PRIu64 " vm_hwm=%" PRIu64
              " drop_seconds=%.6f cpu_seconds_with_drop=%.6f\n",
              sum->events, sum->entities, wall, sum->seconds, cpu_call, sampler.Peak().anon, base,
              bench::ProcStatusBytes("VmHWM"), drop, cpu_with_drop);
  return 0;
}

int ChildScan(const std::string& dir) {
  // The engine's floor for a rebuild's input: one sequential scan of every
  // stored event record (a/), values touched, nothing decoded.
  std::unique_ptr<leveldb::Cache> cache(leveldb::NewLRUCache(32 << 20));
  std::unique_ptr<const leveldb::FilterPolicy> bloom(leveldb::NewBloomFilterPolicy(10));
  leveldb::Options lo;
  lo.block_cache = cache.get();
  lo.filter_policy = bloom.get();
  leveldb::DB* raw = nullptr;
  if (!leveldb::DB::Open(lo, dir, &raw).ok()) return 2;
  std::unique_ptr<leveldb::DB> db(raw);
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  const auto start = SteadyClock::now();
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));
  uint64_t n = 0, bytes = 0, sum = 0;
  for (it->Seek("a/"); it->Valid() && it->key().starts_with("a/"); it->Next()) {
    ++n;
    bytes += it->value().size();
    sum += static_cast<unsigned char>(it->value()[it->value().size() / 2]);
  }
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  std::printf("RESULT events=%" PRIu64 " seconds=%.6f bytes=%" PRIu64 " touch=%" PRIu64 "\n", n,
              seconds, bytes, sum);
  return 0;
}

void RunRebuildFigures(Context& ctx) {
  if (!ctx.config.Runs("rebuild")) return;
  Results& res = ctx.results;
  const fs::path large = ctx.config.scratch / "rebuild-large";
  const fs::path small = ctx.config.scratch / "rebuild-small";
  for (auto [dir, n] :
       {std::pair{small, ctx.config.rebuild_small}, std::pair{large, ctx.config.rebuild_large}}) {
    const auto start = SteadyClock::now();
    std::error_code ec;
    fs::remove_all(dir, ec);
    BuildTemplateStore(ctx.pool, n, dir);
    Log("rebuild store of %" PRIu64 " events filled in %.1fs (%s on disk)", n,
        std::chrono::duration<double>(SteadyClock::now() - start).count(),
        FormatBytes(static_cast<double>(bench::DirectoryBytes(dir))).c_str());
  }
  res.Set("rebuild_store_bytes", static_cast<double>(bench::DirectoryBytes(large)));

  {
    int code = 0;
    const std::string out = RunCommand(
        "'" + ctx.config.self_exe + "' --child scan --child-dir '" + large.string() + "'", &code);
    if (code != 0 || !ResultField(out, "events")) Die("scan child failed: " + out);
    const double eps = *ResultField(out, "events") / *ResultField(out, "seconds");
    res.Set("raw_leveldb_scan_eps", eps);
    Log("raw LevelDB scan of a/: %.0f events/s", eps);
  }
  for (int threads : {1, 2}) {
    // The 2-thread rebuild carries the target: its median of the rounds.
    std::vector<double> rates;
    ChildRebuildResult r = threads == 2 ? MedianRebuild(ctx.config, large, threads, "", &rates)
                                        : SpawnRebuild(ctx.config, large, threads);
    const std::string key = "rebuild_" + std::to_string(threads) + "t";
    if (rates.size() > 1) res.notes[key + "_eps_rounds"] = JoinRates(rates);
    res.Set(key + "_eps", r.events / r.seconds);
    res.Set(key + "_seconds", r.seconds);
    res.Set(key + "_build_only_eps", r.events / r.build_seconds);
    res.Set(key + "_cpu_seconds", r.cpu_seconds);
    res.Set(key + "_eps_per_cpu_s", r.events / r.cpu_seconds);
    res.Set(key + "_peak_anon_bytes", r.peak_anon);
    res.Set(key + "_growth_anon_bytes", r.peak_anon - r.base_anon);
    res.Set(key + "_vm_hwm_bytes", r.vm_hwm);
    res.Set(key + "_then_drop_seconds", r.drop_seconds);
    res.Set(key + "_cpu_seconds_with_drop", r.cpu_seconds_with_drop);
    res.Set("rebuild_events", r.events);
    Log("rebuild %.0f events, %d thread(s): %.0f events/s%s (%.0f per CPU second), peak anon %s "
        "(growth %s), VmHWM %s; the old generation's drop went on %.2f s after the call (CPU "
        "with it %.2f s)",
        r.events, threads, r.events / r.seconds, MedianOf(rates).c_str(), r.events / r.cpu_seconds,
        FormatBytes(r.peak_anon).c_str(), FormatBytes(r.peak_anon - r.base_anon).c_str(),
        FormatBytes(r.vm_hwm).c_str(), r.drop_seconds, r.cpu_seconds_with_drop);
  }
  res.Set("rebuild_eps", res.Get("rebuild_2t_eps"));
  {
    ChildRebuildResult r = SpawnRebuild(ctx.config, large, 2, "rederive");
    res.Set("rebuild_rederive_eps", r.events / r.seconds);
    res.Set("rebuild_rederive_2t_seconds", r.seconds);
    res.Set("rebuild_rederive_2t_cpu_seconds", r.cpu_seconds);
    Log("rebuild %.0f events deriving every log anew (--rederive-logs), 2 threads: %.0f events/s "
        "(%.0f per CPU second)",
        r.events, r.events / r.seconds, r.events / r.cpu_seconds);
  }
  {
    std::vector<double> rates;
    ChildRebuildResult r = MedianRebuild(ctx.config, large, 2, "reroute", &rates);
    if (rates.size() > 1) res.notes["rebuild_reroute_eps_rounds"] = JoinRates(rates);
    res.Set("rebuild_reroute_eps", r.events / r.seconds);
    res.Set("rebuild_reroute_2t_seconds", r.seconds);
    res.Set("rebuild_reroute_2t_cpu_seconds", r.cpu_seconds);
    res.Set("rebuild_reroute_2t_peak_anon_bytes", r.peak_anon);
    Log("rebuild %.0f events under a new (re-routing) profile, 2 threads: %.0f events/s%s (%.0f "
        "per CPU second), peak anon %s",
        r.events, r.events / r.seconds, MedianOf(rates).c_str(), r.events / r.cpu_seconds,
        FormatBytes(r.peak_anon).c_str());
  }
  {
    ChildRebuildResult r = SpawnRebuild(ctx.config, small, 2);
    res.Set("rebuild_small_events", r.events);
    res.Set("rebuild_small_2t_eps", r.events / r.seconds);
    res.Set("rebuild_small_2t_peak_anon_bytes", r.peak_anon);
    res.Set("rebuild_small_2t_growth_anon_bytes", r.peak_anon - r.base_anon);
    Log("rebuild %.0f events, 2 threads: %.0f events/s, peak anon %s (growth %s)", r.events,
        r.events / r.seconds, FormatBytes(r.peak_anon).c_str(),
        FormatBytes(r.peak_anon - r.base_anon).c_str());
  }
  std::error_code ec;
  fs::remove_all(small, ec);
  fs::remove_all(large, ec);
}

}  // namespace eventfold::benchdrv
