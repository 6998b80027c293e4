// eventfold-bench: the benchmark driver (see docs/BENCHMARKS.md).
//
// One executable measures every headline figure of the store and, in the
// same run, on the same bodies and the same disk, the baselines it is judged
// against: raw LevelDB writing the same bytes with no logic, and the SQL
// receiver most teams write (a processed-ids table plus an UPSERT, one
// SQLite transaction per delivery). This header is what the driver's files
// share: sizes, the body pool, the per-event write shape, measurement
// helpers and the results table.

#ifndef EVENTFOLD_BENCH_DRIVER_DRIVER_H_
#define EVENTFOLD_BENCH_DRIVER_DRIVER_H_

#include <leveldb/env.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace eventfold::benchdrv {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// Sizes: --quick shrinks everything so that the whole run stays under a
// minute on a 2-core machine; the full run uses the sizes the issue asks for.

struct Config {
  bool quick = false;
  fs::path scratch;                    // where every store lives (must be a real disk)
  double seconds = 10;                 // length of each timed throughput run
  uint64_t pool_events = 0;            // distinct ReceiptRoller events generated
  uint64_t prefill_events = 0;         // events already in a store before a timed run
  uint64_t rebuild_small = 0;          // events of the small rebuild store
  uint64_t rebuild_large = 0;          // events of the large rebuild store
  std::vector<uint64_t> late_lengths;  // entity lengths for late arrivals
  int late_ops = 0;                    // late events measured per length
  int deep_late_ops = 0;               // deep (middle of the log) late events per length
  double http_seconds = 10;            // wrk run
  double steady_seconds = 10;          // paced run at steady_rate
  double steady_rate = 1000;
  int http_connections = 64;
  uint64_t idle_connections = 10000;  // idle keep-alive connections held at once
  int rounds = 1;                     // interleaved repetitions of the target pairs
  uint64_t file_lines = 0;            // lines of the history file `eventfold ingest` reads
  std::string wrk = "wrk";
  std::string pg_bin = "/usr/lib/postgresql/15/bin";  // Debian's PostgreSQL server
  std::string cli;                                    // the eventfold command
  std::set<std::string> only;                         // figure groups to run; empty: all
  std::string self_exe;                               // this program, for child processes

  bool Runs(const std::string& group) const { return only.empty() || only.count(group) > 0; }
};

// ---------------------------------------------------------------------------
// Workload: distinct ReceiptRoller event bodies (~600 bytes), in production
// order, from one seeded history. Entity counts are reported with them.

struct Pool {
  std::vector<std::string> bodies;
  uint64_t entities = 0;  // distinct entities among the bodies
  double mean_body_bytes = 0;
};

Pool MakePool(uint64_t events, uint64_t seed);

// The entities (entity/id) routed by bodies[begin, end) under the built-in
// profile.
uint64_t CountEntities(const std::vector<std::string>& bodies, size_t begin, size_t end);

// ---------------------------------------------------------------------------
// The bytes eventfold writes per event: every put (key and value) of the
// LevelDB write batches of single Ingest calls, read back from the store's
// write-ahead log. The raw LevelDB baseline replays these shapes.

struct Put {
  std::string key;
  std::string value;
};

struct EventShape {
  std::vector<Put> puts;  // one ingest's write batch, in order
};

struct WriteShapes {
  std::vector<EventShape> events;
  double puts_per_event = 0;
  double key_bytes_per_event = 0;
  double value_bytes_per_event = 0;
  std::map<std::string, double> bytes_per_family;  // "a/", "d/", ... per event
  double snappy_value_bytes_per_event = 0;         // the values, each snappy-compressed
  uint64_t deletes = 0;  // deletions seen (snapshots dropped by late events)
};

// Ingests bodies[begin, end) one by one into a fresh in-memory store
// (Durability::kBuffered) and decodes its log.
WriteShapes MeasureWriteShapes(const Pool& pool, size_t begin, size_t end);

// ---------------------------------------------------------------------------
// Measurement helpers.

// A leveldb::Env (the default one underneath) that counts what reaches the
// files: bytes appended to write-ahead logs (*.log) and to tables (*.ldb),
// and every Sync with its latency. Given to eventfold (Options::env) and to
// the raw LevelDB baseline alike, so both are observed the same way.
struct EnvCounts {
  uint64_t syncs = 0;
  double sync_seconds = 0;
  uint64_t wal_bytes = 0;
  uint64_t table_bytes = 0;
};

class CountingEnv final : public leveldb::EnvWrapper {
 public:
  CountingEnv() : leveldb::EnvWrapper(leveldb::Env::Default()) {}
  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override;
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override;
  EnvCounts counts() const;

  std::atomic<uint64_t> syncs{0};
  std::atomic<uint64_t> sync_nanos{0};
  std::atomic<uint64_t> wal_bytes{0};
  std::atomic<uint64_t> table_bytes{0};
};

inline EnvCounts Diff(const EnvCounts& a, const EnvCounts& b) {
  return EnvCounts{a.syncs - b.syncs, a.sync_seconds - b.sync_seconds, a.wal_bytes - b.wal_bytes,
                   a.table_bytes - b.table_bytes};
}

struct CpuTimes {
  double user = 0, sys = 0;  // seconds, whole process
};
CpuTimes ProcessCpu();
// User + system seconds the whole process used since `start`.
inline double CpuSecondsSince(const CpuTimes& start) {
  const CpuTimes now = ProcessCpu();
  return (now.user - start.user) + (now.sys - start.sys);
}

struct Throughput {
  uint64_t ops = 0;
  double seconds = 0;
  double cpu_seconds = 0;  // user + sys of the process during the run
  uint64_t errors = 0;     // operations that did not end as expected
  EnvCounts io;            // what reached the files during the run
  // Table bytes by LevelDB's own "leveldb.stats" (raw baseline only; -1: not read).
  double stats_table_bytes = -1;
  double eps() const { return seconds > 0 ? static_cast<double>(ops) / seconds : 0; }
  double cpu_us_per_op() const {
    return ops > 0 ? cpu_seconds * 1e6 / static_cast<double>(ops) : 0;
  }
};

// Runs op(thread, index) on `threads` threads for indexes 0, 1, ... until
// `seconds` pass or `max_ops` indexes are taken; op returns false when the
// operation did not end as expected (counted as an error).
template <typename Op>
Throughput RunTimed(int threads, double seconds, uint64_t max_ops, Op op) {
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> errors{0};
  const CpuTimes cpu0 = ProcessCpu();
  const auto start = SteadyClock::now();
  const auto deadline = start + std::chrono::duration_cast<SteadyClock::duration>(
                                    std::chrono::duration<double>(seconds));
  auto work = [&](int t) {
    uint64_t mine = 0, bad = 0;
    while (SteadyClock::now() < deadline) {
      const uint64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= max_ops) break;
      if (!op(t, i)) ++bad;
      ++mine;
    }
    done.fetch_add(mine);
    errors.fetch_add(bad);
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
  for (std::thread& th : pool) th.join();
  Throughput r;
  r.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  r.cpu_seconds = CpuSecondsSince(cpu0);
  r.ops = done.load();
  r.errors = errors.load();
  return r;
}

// Profiling: when the environment names this run in EVENTFOLD_BENCH_PROFILE
// and the driver runs under `valgrind --tool=callgrind --instr-atstart=no`,
// instrumentation is on exactly while the scope lives (all threads, the
// store's background compaction included). Under perf, set
// EVENTFOLD_BENCH_PERF_CTL to the FIFO of `perf record --control fifo:FIFO
// -D -1`: the scope enables perf's counting and disables it at the end.
// A no-op otherwise.
class ProfileScope {
 public:
  explicit ProfileScope(const std::string& run);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  bool on_ = false;
};

// A scratch directory, removed when destroyed.
class TempDir {
 public:
  TempDir(const fs::path& parent, const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Copies directory `from` to `to` (replacing it).
void CopyDir(const fs::path& from, const fs::path& to);

[[noreturn]] void Die(const std::string& what);
void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// ---------------------------------------------------------------------------
// Results: flat metrics for JSON and the rows of the printed table.

struct Row {
  std::string figure;          // "durable ingest, 64 producers"
  std::string eventfold;       // formatted value, e.g. "23.1k ev/s"
  std::string baseline;        // baseline name, or ""
  std::string baseline_value;  // formatted, or ""
  std::string ratio;           // "0.82x", or ""
  std::string target;          // "ratio >= 0.75", or ""
  std::string status;          // "met", "NOT MET", "" (informational)
};

struct Target {
  std::string name;
  std::string rule;
  double value = 0;
  double threshold = 0;
  bool met = false;
};

struct Results {
  std::map<std::string, double> metrics;     // JSON numbers, flat
  std::map<std::string, std::string> notes;  // JSON strings
  std::vector<Row> rows;
  std::vector<Target> targets;
  std::map<std::string, std::string> machine;

  bool Has(const std::string& key) const { return metrics.count(key) > 0; }
  double Get(const std::string& key) const {
    auto it = metrics.find(key);
    return it == metrics.end() ? 0 : it->second;
  }
  void Set(const std::string& key, double v) { metrics[key] = v; }
  // Records a target check and returns "met" / "NOT MET".
  std::string Check(const std::string& name, const std::string& rule, double value,
                    double threshold, bool at_least);
};

// Records a run's throughput, CPU and I/O figures under `key` ("<key>_eps",
// "<key>_cpu_us", "<key>_events_per_sync", ...) and logs them.
void RecordRun(Results& res, const std::string& key, const Throughput& t);
// Several rounds of the same run: records the median round (by throughput)
// and keeps every round's rate in the JSON ("<key>_rounds").
void RecordRounds(Results& res, const std::string& key, std::vector<Throughput> rounds);
// Rates in the order given, as the JSON keeps rounds: "61234, 59876, 60110".
std::string JoinRates(const std::vector<double>& rates);
// " (median; rounds: 61234, 59876, 60110)" after a figure of more than one
// round, for its log line; "" for one round.
std::string MedianOf(const std::vector<double>& rates);

// Records the acknowledgement latencies of one sender run, in seconds, as
// "<key>_p50_ms", "<key>_p99_ms", "<key>_p999_ms" and "<key>_max_ms".
void RecordLatencies(Results& res, const std::string& key, const std::vector<double>& seconds);

std::string FormatRate(double eps);  // "23.1k ev/s"
std::string FormatNs(double ns);     // "12.3 us"
std::string FormatRatio(double r);   // "0.82x"
std::string FormatBytes(double b);   // "12.3 MiB"

// ---------------------------------------------------------------------------
// The figures. Each reads what it needs from `pool` and writes metrics and
// rows into `results`.

struct Context {
  const Config& config;
  const Pool& pool;
  const WriteShapes& shapes;
  Results& results;
  // A store holding pool.bodies[0, prefill_events), ready to be copied for
  // each timed run (never opened by one).
  fs::path template_store;
  fs::path template_raw;     // raw LevelDB holding the same shapes
  fs::path template_sqlite;  // SQLite pattern database holding them
};

// eventfold itself. A run ingests the pool's bodies after the prefill into a
// fresh copy of the template store (durable: Durability::kSync).
Throughput IngestRun(Context& ctx, const std::string& name, bool durable, int producers);
// Redelivery of stored events on one thread, then Store::Get of their
// projections, the same redeliveries without recent bodies in memory, and
// raw LevelDB Gets of the same d/ keys: {duplicate, projection get,
// duplicate from the database, raw}.
std::vector<Throughput> RunDuplicateFigure(Context& ctx);
void RunLateArrivalFigures(Context& ctx);
void RunRebuildFigures(Context& ctx);
void RunHttpFigures(Context& ctx);
// Signed HTTP through JetStream (3 local nodes, R=3) to 2 fold workers:
// cluster_* figures (cluster_figures.cc).
void RunClusterFigures(Context& ctx);
// `eventfold ingest FILE` (the built command) on a history file of the
// pool's first file_lines bodies: file_ingest_lps, file_ingest_cpu_us_per_line.
void RunFileIngestFigure(Context& ctx);

// Baselines: raw LevelDB writing the measured shapes (events_per_write per
// WriteBatch), the SQLite pattern with `threads` connections, and SQLite
// answering duplicates.
Throughput RawRun(Context& ctx, const std::string& name, int threads, int events_per_write,
                  bool sync);
// The file figure's baseline: raw LevelDB writing `events` events' bytes
// into a new store from one thread, `events_per_write` to a synced write,
// as `eventfold ingest` does with its batches, and closing it.
Throughput RawFileRun(Context& ctx, uint64_t events, int events_per_write);
Throughput SqliteRun(Context& ctx, const std::string& name, int threads);
Throughput SqliteDuplicateRun(Context& ctx);
// The PostgreSQL pattern (the SQLite pattern's transaction on a private
// PostgreSQL cluster the bench starts and removes) from 1 and 64
// connections: postgres_pattern_{1,64}_eps and postgres_pattern_eps (the
// best). Says so in one line and records nothing when PostgreSQL is absent.
void RunPostgresFigures(Context& ctx);

// Template stores (built once per run).
void BuildTemplateStore(const Pool& pool, uint64_t events, const fs::path& dir);
void BuildTemplateRaw(const WriteShapes& shapes, uint64_t events, const fs::path& dir);
void BuildTemplateSqlite(const Pool& pool, uint64_t events, const fs::path& path);
// Compacts every level of the LevelDB database in `dir` (a store or a raw
// baseline), opened raw with the store's options.
void CompactAll(const fs::path& dir);

// Child processes (for clean peak-memory readings): run by main() when the
// hidden --child option is given; print one "RESULT k=v ..." line.
// `profile`: "" keeps the store's profile, "reroute" rebuilds under one
// that routes every event to a new entity.
int ChildRebuild(const std::string& dir, int threads, const std::string& profile);
int ChildScan(const std::string& dir);
// The idle keep-alive figure's client (idle_client.cc): holds `connections`
// served-once connections to 127.0.0.1:port for `hold_seconds`.
int ChildIdle(int port, uint64_t connections, double hold_seconds);
// The steady-latency figure's receiver and sender (http_figures.cc): serves
// the store at `dir` and sends the bodies of `input` (NDJSON) to it, signed,
// at `rate` a second over `connections`; prints "RESULT attempts=...
// p99_us=...".
int ChildSteady(const std::string& dir, const std::string& input, double rate, int connections);
// Raises the soft limit on open descriptors to the hard one.
void RaiseFdLimit();

// Runs `command` and returns its stdout; exits on failure to start.
std::string RunCommand(const std::string& command, int* exit_code);
// The value of "key=<number>" in a "RESULT ..." line of `out`; nullopt when absent.
std::optional<double> ResultField(const std::string& out, const std::string& key);

// Shared options every store of the driver is opened with (the defaults,
// except durability).
struct RawDbOptions {
  size_t block_cache_bytes = 32 << 20;
  size_t write_buffer_bytes = 16 << 20;
};

}  // namespace eventfold::benchdrv

#endif  // EVENTFOLD_BENCH_DRIVER_DRIVER_H_
