// The driver's workload and helpers: the body pool, the per-event write
// shape (read back from a store's write-ahead log), timing, formatting.

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_set>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define EVENTFOLD_BENCH_HAVE_CALLGRIND 1
#endif

#include <leveldb/env.h>
#include <leveldb/helpers/memenv.h>
#include <snappy.h>

#include "bench/driver/driver.h"
#include "core/decode.h"
#include "eventfold/store.h"
#include "storage/key_codec.h"
#include "tools/history.h"
#include "tools/sender.h"

namespace eventfold::benchdrv {

void Die(const std::string& what) {
  std::fprintf(stderr, "eventfold-bench: %s\n", what.c_str());
  std::exit(2);
}

void Log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fputs("[eventfold-bench] ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

CpuTimes ProcessCpu() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
  };
  return CpuTimes{secs(ru.ru_utime), secs(ru.ru_stime)};
}

namespace {

// Sends `command` to perf's control FIFO when EVENTFOLD_BENCH_PERF_CTL names
// one (`perf record --control fifo:FIFO -D -1`, which starts disabled).
void TellPerf(const char* command) {
  const char* fifo = std::getenv("EVENTFOLD_BENCH_PERF_CTL");
  if (fifo == nullptr) return;
  const int fd = ::open(fifo, O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    Log("EVENTFOLD_BENCH_PERF_CTL: cannot open %s", fifo);
    return;
  }
  const std::string line = std::string(command) + "\n";
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    Log("EVENTFOLD_BENCH_PERF_CTL: cannot write to %s", fifo);
  }
  ::close(fd);
}

}  // namespace

ProfileScope::ProfileScope(const std::string& run) {
  const char* want = std::getenv("EVENTFOLD_BENCH_PROFILE");
  on_ = want != nullptr && run == want;
#ifdef EVENTFOLD_BENCH_HAVE_CALLGRIND
  if (on_) {
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
  }
#endif
  if (on_) {
    Log("profiling %s", run.c_str());
    TellPerf("enable");
  }
}

ProfileScope::~ProfileScope() {
  if (on_) TellPerf("disable");
#ifdef EVENTFOLD_BENCH_HAVE_CALLGRIND
  if (on_) {
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT("eventfold-bench profile scope");
  }
#endif
}

namespace {

class CountingFile final : public leveldb::WritableFile {
 public:
  CountingFile(leveldb::WritableFile* base, CountingEnv* env, bool wal)
      : base_(base), env_(env), wal_(wal) {}
  ~CountingFile() override { delete base_; }
  leveldb::Status Append(const leveldb::Slice& data) override {
    (wal_ ? env_->wal_bytes : env_->table_bytes).fetch_add(data.size(), std::memory_order_relaxed);
    return base_->Append(data);
  }
  leveldb::Status Close() override { return base_->Close(); }
  leveldb::Status Flush() override { return base_->Flush(); }
  leveldb::Status Sync() override {
    const auto start = SteadyClock::now();
    leveldb::Status s = base_->Sync();
    env_->sync_nanos.fetch_add(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - start).count()));
    env_->syncs.fetch_add(1, std::memory_order_relaxed);
    return s;
  }

 private:
  leveldb::WritableFile* base_;
  CountingEnv* env_;
  bool wal_;
};

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

leveldb::Status CountingEnv::NewWritableFile(const std::string& f, leveldb::WritableFile** r) {
  leveldb::WritableFile* base = nullptr;
  leveldb::Status s = target()->NewWritableFile(f, &base);
  *r = s.ok() ? new CountingFile(base, this, EndsWith(f, ".log")) : nullptr;
  return s;
}

leveldb::Status CountingEnv::NewAppendableFile(const std::string& f, leveldb::WritableFile** r) {
  leveldb::WritableFile* base = nullptr;
  leveldb::Status s = target()->NewAppendableFile(f, &base);
  *r = s.ok() ? new CountingFile(base, this, EndsWith(f, ".log")) : nullptr;
  return s;
}

EnvCounts CountingEnv::counts() const {
  EnvCounts c;
  c.syncs = syncs.load();
  c.sync_seconds = static_cast<double>(sync_nanos.load()) * 1e-9;
  c.wal_bytes = wal_bytes.load();
  c.table_bytes = table_bytes.load();
  return c;
}

TempDir::TempDir(const fs::path& parent, const std::string& name) : path_(parent / name) {
  std::error_code ec;
  fs::remove_all(path_, ec);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void CopyDir(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::remove_all(to, ec);
  fs::copy(from, to, fs::copy_options::recursive, ec);
  if (ec) Die("copying " + from.string() + " to " + to.string() + ": " + ec.message());
}

std::string RunCommand(const std::string& command, int* exit_code) {
  std::FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) Die("cannot run: " + command);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  if (exit_code) *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return out;
}

std::optional<double> ResultField(const std::string& out, const std::string& key) {
  const size_t line = out.rfind("RESULT ");
  if (line == std::string::npos) return std::nullopt;
  const std::string needle = " " + key + "=";
  const size_t at = out.find(needle, line);
  if (at == std::string::npos) return std::nullopt;
  return std::strtod(out.c_str() + at + needle.size(), nullptr);
}

// ---------------------------------------------------------------------------

Pool MakePool(uint64_t n, uint64_t seed) {
  // A ReceiptRoller shop: about 0.5% products (each ~6 events: created,
  // updates, stock reports), the rest receipts (1.25 events each: issued,
  // a quarter refunded), 2% events that break a state machine. Every event
  // is distinct (no retries, malformed bodies or conflicts: those are
  // measured on their own).
  for (double scale = 1.0;; scale *= 1.1) {
    sim::HistoryOptions ho;
    ho.seed = seed;
    ho.products = static_cast<int>(std::max<uint64_t>(50, n / 200));
    const double receipt_events = static_cast<double>(n) - ho.products * 6.2;
    ho.receipts = static_cast<int>(scale * std::max(100.0, receipt_events) / 1.25) + 100;
    ho.duplicate_rate = 0;
    ho.malformed = 0;
    ho.conflicts = 0;
    sim::History h = sim::GenerateHistory(ho);
    if (h.events.size() < n) continue;
    h.deliveries.clear();
    h.deliveries.shrink_to_fit();
    Pool pool;
    pool.bodies = std::move(h.events);
    pool.bodies.resize(n);  // production (occurred_at) order: drop the tail
    pool.bodies.shrink_to_fit();
    double bytes = 0;
    for (const std::string& b : pool.bodies) bytes += static_cast<double>(b.size());
    pool.mean_body_bytes = bytes / static_cast<double>(n);
    return pool;
  }
}

uint64_t CountEntities(const std::vector<std::string>& bodies, size_t begin, size_t end) {
  std::unordered_set<std::string> seen;
  const Profile& profile = Profile::ReceiptRoller();
  for (size_t i = begin; i < end && i < bodies.size(); ++i) {
    Result<DecodedEvent> d = DecodeEvent(bodies[i], profile);
    if (d.ok() && d->entity) seen.insert(d->entity->entity + '/' + d->entity->id);
  }
  return seen.size();
}

// ---------------------------------------------------------------------------
// LevelDB's log format (db/log_format.h, db/write_batch.cc): 32 KiB blocks of
// records with a 7-byte header (crc32 4, length 2, type 1); a record type
// FULL=1, FIRST=2, MIDDLE=3, LAST=4; a batch is seq (8) count (4) and then
// entries: tag 1 (put) varint key varint value, tag 0 (delete) varint key.

namespace {

constexpr size_t kBlockSize = 32768;
constexpr size_t kHeaderSize = 7;

bool ReadVarint32(std::string_view* in, uint32_t* v) {
  uint32_t result = 0;
  for (int shift = 0; shift <= 28 && !in->empty(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in->front());
    in->remove_prefix(1);
    result |= static_cast<uint32_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

bool ReadPrefixed(std::string_view* in, std::string* out) {
  uint32_t len = 0;
  if (!ReadVarint32(in, &len) || in->size() < len) return false;
  out->assign(in->data(), len);
  in->remove_prefix(len);
  return true;
}

// Every logical record (a write batch) of one log file.
std::vector<std::string> LogRecords(const std::string& file) {
  std::vector<std::string> records;
  std::string partial;
  for (size_t block = 0; block < file.size(); block += kBlockSize) {
    size_t pos = block;
    const size_t end = std::min(file.size(), block + kBlockSize);
    while (pos + kHeaderSize <= end) {
      const auto* h = reinterpret_cast<const unsigned char*>(file.data() + pos);
      const size_t len = h[4] | (static_cast<size_t>(h[5]) << 8);
      const int type = h[6];
      if (type == 0 && len == 0) break;  // zero padding
      if (pos + kHeaderSize + len > end) Die("write shape: malformed log record");
      const std::string_view payload(file.data() + pos + kHeaderSize, len);
      switch (type) {
        case 1:
          records.emplace_back(payload);
          break;
        case 2:
          partial.assign(payload);
          break;
        case 3:
          partial.append(payload);
          break;
        case 4:
          partial.append(payload);
          records.push_back(std::move(partial));
          partial.clear();
          break;
        default:
          Die("write shape: unknown log record type");
      }
      pos += kHeaderSize + len;
    }
  }
  return records;
}

}  // namespace

WriteShapes MeasureWriteShapes(const Pool& pool, size_t begin, size_t end) {
  std::unique_ptr<leveldb::Env> env(leveldb::NewMemEnv(leveldb::Env::Default()));
  const std::string dir = "/shape-store";
  {
    Options o;
    o.env = env.get();
    o.durability = Durability::kBuffered;
    Result<std::unique_ptr<Store>> store = Store::Open(dir, o);
    if (!store.ok()) Die("write shape store: " + store.status().ToString());
    for (size_t i = begin; i < end; ++i) {
      IngestResult r = (*store)->Ingest(Delivery{{}, pool.bodies[i]});
      if (r.outcome != Outcome::kAccepted) Die("write shape ingest: " + r.message);
    }
  }
  std::vector<std::string> children;
  env->GetChildren(dir, &children);
  std::sort(children.begin(), children.end());
  WriteShapes shapes;
  for (const std::string& name : children) {
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".log") != 0) continue;
    leveldb::SequentialFile* raw = nullptr;
    if (!env->NewSequentialFile(dir + "/" + name, &raw).ok()) Die("write shape: open log");
    std::unique_ptr<leveldb::SequentialFile> f(raw);
    std::string file;
    std::vector<char> scratch(1 << 20);
    while (true) {
      leveldb::Slice got;
      if (!f->Read(scratch.size(), &got, scratch.data()).ok()) Die("write shape: read log");
      if (got.empty()) break;
      file.append(got.data(), got.size());
    }
    for (const std::string& rec : LogRecords(file)) {
      std::string_view in(rec);
      if (in.size() < 12) Die("write shape: short batch");
      in.remove_prefix(12);
      EventShape shape;
      bool meta_only = true;
      while (!in.empty()) {
        const char tag = in.front();
        in.remove_prefix(1);
        Put p;
        if (!ReadPrefixed(&in, &p.key)) Die("write shape: bad batch key");
        if (tag == 1) {
          if (!ReadPrefixed(&in, &p.value)) Die("write shape: bad batch value");
          if (p.key.compare(0, 2, "m/") != 0) meta_only = false;
          shape.puts.push_back(std::move(p));
        } else {
          ++shapes.deletes;
        }
      }
      if (!meta_only) shapes.events.push_back(std::move(shape));
    }
  }
  if (shapes.events.size() != end - begin) {
    Die("write shape: expected " + std::to_string(end - begin) + " batches, found " +
        std::to_string(shapes.events.size()));
  }
  double puts = 0, kb = 0, vb = 0;
  for (const EventShape& e : shapes.events) {
    puts += static_cast<double>(e.puts.size());
    for (const Put& p : e.puts) {
      kb += static_cast<double>(p.key.size());
      vb += static_cast<double>(p.value.size());
      std::string family = p.key.substr(0, 2);
      if (const auto g = storage::ParseGenerationKey(p.key); g && !g->rest.empty()) {
        family = "g/" + std::string(g->rest.substr(0, 1)) + "/";
      }
      shapes.bytes_per_family[family] += static_cast<double>(p.key.size() + p.value.size());
      std::string compressed;
      snappy::Compress(p.value.data(), p.value.size(), &compressed);
      shapes.snappy_value_bytes_per_event += static_cast<double>(compressed.size());
    }
  }
  const double n = static_cast<double>(shapes.events.size());
  shapes.puts_per_event = puts / n;
  shapes.key_bytes_per_event = kb / n;
  shapes.value_bytes_per_event = vb / n;
  for (auto& [family, bytes] : shapes.bytes_per_family) bytes /= n;
  shapes.snappy_value_bytes_per_event /= n;
  return shapes;
}

// ---------------------------------------------------------------------------

std::string Results::Check(const std::string& name, const std::string& rule, double value,
                           double threshold, bool at_least) {
  const bool met = at_least ? value >= threshold : value < threshold;
  targets.push_back(Target{name, rule, value, threshold, met});
  return met ? "met" : "NOT MET";
}

void RecordLatencies(Results& res, const std::string& key, const std::vector<double>& seconds) {
  res.Set(key + "_p50_ms", sim::Quantile(seconds, 0.5) * 1e3);
  res.Set(key + "_p99_ms", sim::Quantile(seconds, 0.99) * 1e3);
  res.Set(key + "_p999_ms", sim::Quantile(seconds, 0.999) * 1e3);
  res.Set(key + "_max_ms", sim::Quantile(seconds, 1.0) * 1e3);
}

void RecordRun(Results& res, const std::string& key, const Throughput& t) {
  res.Set(key + "_eps", t.eps());
  res.Set(key + "_cpu_us", t.cpu_us_per_op());
  res.Set(key + "_ops", static_cast<double>(t.ops));
  if (t.errors > 0) {
    res.notes[key + "_errors"] = std::to_string(t.errors) + " operations failed";
    Log("%s: %" PRIu64 " operations failed", key.c_str(), t.errors);
  }
  std::string io;
  if (t.io.wal_bytes > 0 && t.ops > 0) {
    const double ops = static_cast<double>(t.ops);
    res.Set(key + "_wal_bytes_per_event", static_cast<double>(t.io.wal_bytes) / ops);
    res.Set(key + "_table_bytes_per_event", static_cast<double>(t.io.table_bytes) / ops);
    if (t.stats_table_bytes >= 0) {
      res.Set(key + "_stats_table_bytes_per_event", t.stats_table_bytes / ops);
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, ", WAL %.0f B/ev, tables %.0f B/ev",
                  static_cast<double>(t.io.wal_bytes) / ops,
                  static_cast<double>(t.io.table_bytes) / ops);
    io = buf;
    if (t.io.syncs > 0) {
      const double syncs = static_cast<double>(t.io.syncs);
      res.Set(key + "_syncs_per_s", syncs / t.seconds);
      res.Set(key + "_events_per_sync", ops / syncs);
      res.Set(key + "_sync_ms", t.io.sync_seconds * 1e3 / syncs);
      std::snprintf(buf, sizeof buf, ", %.0f syncs/s, %.1f ev/sync, %.2f ms/sync",
                    syncs / t.seconds, ops / syncs, t.io.sync_seconds * 1e3 / syncs);
      io += buf;
    }
  }
  Log("%-24s %9.0f ops/s (%" PRIu64 " in %.2fs, %.1f us CPU/op%s)", key.c_str(), t.eps(), t.ops,
      t.seconds, t.cpu_us_per_op(), io.c_str());
}

std::string JoinRates(const std::vector<double>& rates) {
  std::string all;
  for (double rate : rates) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.0f", all.empty() ? "" : ", ", rate);
    all += buf;
  }
  return all;
}

std::string MedianOf(const std::vector<double>& rates) {
  return rates.size() > 1 ? " (median; rounds: " + JoinRates(rates) + ")" : "";
}

void RecordRounds(Results& res, const std::string& key, std::vector<Throughput> rounds) {
  if (rounds.empty()) return;
  std::vector<double> rates;
  for (const Throughput& t : rounds) rates.push_back(t.eps());
  const std::string all = JoinRates(rates);
  std::sort(rounds.begin(), rounds.end(),
            [](const Throughput& a, const Throughput& b) { return a.eps() < b.eps(); });
  if (rounds.size() > 1) {
    res.notes[key + "_rounds"] = all;
    Log("%s: rounds %s; median recorded", key.c_str(), all.c_str());
  }
  RecordRun(res, key, rounds[rounds.size() / 2]);
}

std::string FormatRate(double eps) {
  char buf[64];
  if (eps >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM/s", eps / 1e6);
  } else if (eps >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.1fk/s", eps / 1e3);
  } else if (eps >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.2fk/s", eps / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f/s", eps);
  }
  return buf;
}

std::string FormatNs(double ns) {
  char buf[64];
  if (ns >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  } else if (ns >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  }
  return buf;
}

std::string FormatRatio(double r) {
  char buf[64];
  std::snprintf(buf, sizeof buf, r >= 10 ? "%.1fx" : "%.2fx", r);
  return buf;
}

std::string FormatBytes(double b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024.0));
  return buf;
}

}  // namespace eventfold::benchdrv
