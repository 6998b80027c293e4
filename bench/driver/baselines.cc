// The baselines, run by the same driver on the same disk:
//
// Raw LevelDB: the very puts an eventfold ingest writes (keys and values of
// the measured write shapes, keys made unique by rewriting their last 8
// bytes: sequential for the a/ and f/ families, hashed for the rest), with no
// reads and no logic, into a LevelDB opened with the store's own options.
//
// SQLite pattern: the receiver most teams write today (sql_pattern.h), one
// transaction per delivery; WAL, synchronous=FULL, prepared statements. The
// PostgreSQL pattern (postgres_baseline.cc) runs the same transaction.

#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>
#include <leveldb/write_batch.h>
#include <sqlite3.h>

#include <cinttypes>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>

#include "bench/driver/driver.h"
#include "bench/driver/sql_pattern.h"
#include "core/decode.h"
#include "core/json_writer.h"

namespace eventfold::benchdrv {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// ---------------------------------------------------------------------------
// Raw LevelDB.

class RawDb {
 public:
  explicit RawDb(const fs::path& dir, leveldb::Env* env = nullptr)
      : cache_(leveldb::NewLRUCache(RawDbOptions().block_cache_bytes)),
        bloom_(leveldb::NewBloomFilterPolicy(10)) {
    leveldb::Options lo;
    lo.create_if_missing = true;
    lo.block_cache = cache_.get();
    lo.filter_policy = bloom_.get();
    lo.write_buffer_size = RawDbOptions().write_buffer_bytes;
    if (env) lo.env = env;
    leveldb::DB* db = nullptr;
    leveldb::Status s = leveldb::DB::Open(lo, dir.string(), &db);
    if (!s.ok()) Die("raw LevelDB open: " + s.ToString());
    db_.reset(db);
  }
  leveldb::DB* db() { return db_.get(); }

 private:
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> bloom_;
  std::unique_ptr<leveldb::DB> db_;
};

// Appends event number `n`'s puts (shape n mod count) to `batch`.
void AppendEvent(const WriteShapes& shapes, uint64_t n, leveldb::WriteBatch* batch,
                 std::string* key) {
  const EventShape& shape = shapes.events[n % shapes.events.size()];
  for (size_t p = 0; p < shape.puts.size(); ++p) {
    const Put& put = shape.puts[p];
    key->assign(put.key);
    if (key->size() >= 10) {
      const bool sequential = (*key)[0] == 'a' || (*key)[0] == 'f';
      const uint64_t v = sequential ? n : Mix(n * 64 + p);
      for (int b = 0; b < 8; ++b) {
        (*key)[key->size() - 1 - b] = static_cast<char>((v >> (8 * b)) & 0xff);
      }
    }
    batch->Put(*key, put.value);
  }
}

// The bytes LevelDB's "leveldb.stats" property says it wrote to tables
// since the database was opened: the Write(MB) column summed over levels
// (whole MiB: the property prints no finer).
double StatsTableBytes(leveldb::DB* db) {
  std::string stats;
  if (!db->GetProperty("leveldb.stats", &stats)) return -1;
  const size_t rule = stats.find("----");
  if (rule == std::string::npos) return -1;
  std::istringstream in(stats.substr(stats.find('\n', rule) + 1));
  std::string line;
  double mib = 0;
  while (std::getline(in, line)) {
    int level = 0, files = 0;
    double size = 0, time = 0, read = 0, write = 0;
    if (std::sscanf(line.c_str(), "%d %d %lf %lf %lf %lf", &level, &files, &size, &time, &read,
                    &write) == 6) {
      mib += write;
    }
  }
  return mib * 1048576.0;
}

// Writes events 0 to `events` - 1 into `db`, `per_write` to a write batch;
// returns how many writes failed.
uint64_t WriteEventsInBatches(const WriteShapes& shapes, uint64_t events, uint64_t per_write,
                              const leveldb::WriteOptions& wo, leveldb::DB* db) {
  uint64_t failed = 0;
  std::string key;
  for (uint64_t first = 0; first < events; first += per_write) {
    leveldb::WriteBatch batch;
    const uint64_t end = std::min(events, first + per_write);
    for (uint64_t n = first; n < end; ++n) AppendEvent(shapes, n, &batch, &key);
    if (!db->Write(wo, &batch).ok()) ++failed;
  }
  return failed;
}

}  // namespace

Throughput RawRun(Context& ctx, const std::string& name, int threads, int events_per_write,
                  bool sync) {
  const fs::path dir = ctx.config.scratch / ("run-" + name);
  CopyDir(ctx.template_raw, dir);
  Throughput t;
  CountingEnv env;
  {
    RawDb raw(dir, &env);
    const uint64_t base = ctx.config.prefill_events;
    leveldb::WriteOptions wo;
    wo.sync = sync;
    ProfileScope profile(name);
    const EnvCounts before = env.counts();
    t = RunTimed(threads, ctx.config.seconds, UINT64_MAX / 1024, [&](int, uint64_t i) {
      leveldb::WriteBatch batch;
      std::string key;
      for (int e = 0; e < events_per_write; ++e) {
        AppendEvent(ctx.shapes, base + i * events_per_write + e, &batch, &key);
      }
      return raw.db()->Write(wo, &batch).ok();
    });
    t.io = Diff(env.counts(), before);
    t.stats_table_bytes = StatsTableBytes(raw.db());
  }
  t.ops *= events_per_write;  // events, not writes
  std::error_code ec;
  fs::remove_all(dir, ec);
  return t;
}

Throughput RawFileRun(Context& ctx, uint64_t events, int events_per_write) {
  const fs::path dir = ctx.config.scratch / "run-raw-file";
  std::error_code ec;
  fs::remove_all(dir, ec);
  Throughput t;
  const CpuTimes cpu0 = ProcessCpu();
  const auto start = SteadyClock::now();
  {
    RawDb raw(dir);  // a new store, as the command's
    leveldb::WriteOptions wo;
    wo.sync = true;
    t.errors = WriteEventsInBatches(ctx.shapes, events, static_cast<uint64_t>(events_per_write), wo,
                                    raw.db());
  }
  t.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  t.cpu_seconds = CpuSecondsSince(cpu0);
  t.ops = events;
  fs::remove_all(dir, ec);
  return t;
}

void BuildTemplateRaw(const WriteShapes& shapes, uint64_t events, const fs::path& dir) {
  {
    RawDb raw(dir);
    if (WriteEventsInBatches(shapes, events, 1000, leveldb::WriteOptions(), raw.db()) > 0) {
      Die("raw template write");
    }
  }
  CompactAll(dir);
}

void CompactAll(const fs::path& dir) {
  // A store that has been running a while is mostly compacted: without this
  // a run would pay for compacting the prefill it was copied with.
  RawDb raw(dir);
  raw.db()->CompactRange(nullptr, nullptr);
}

// ---------------------------------------------------------------------------
// The SQL pattern's rows (sql_pattern.h).

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool MakePatternRow(const std::string& body, PatternRow* row) {
  Result<DecodedEvent> d = DecodeEvent(body, Profile::ReceiptRoller());
  if (!d.ok()) return false;
  row->decoded = std::move(*d);
  row->state = nullptr;
  row->fields.clear();
  if (!row->decoded.entity) return true;
  const Event& ev = row->decoded.event;
  row->state = &Profile::ReceiptRoller().Find(ev.type)->transition->to;
  row->fields.push_back('{');
  for (size_t i = 0; i < ev.data.size(); ++i) {
    if (i > 0) row->fields.push_back(',');
    AppendJsonString(ev.data[i].name, &row->fields);
    row->fields.push_back(':');
    row->fields += ev.data[i].json;
  }
  row->fields.push_back('}');
  return true;
}

// ---------------------------------------------------------------------------
// SQLite pattern.

namespace {

void Check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    Die(std::string("sqlite: ") + what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  }
}

void Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "?";
    sqlite3_free(err);
    Die(std::string("sqlite: ") + sql + ": " + msg);
  }
}

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS processed_events (
  event_id TEXT PRIMARY KEY,
  processed_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY,
  event_id TEXT NOT NULL,
  type TEXT NOT NULL,
  entity TEXT,
  entity_id TEXT,
  occurred_at INTEGER NOT NULL,
  received_at INTEGER NOT NULL,
  body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_entity ON events (entity, entity_id, occurred_at);
CREATE TABLE IF NOT EXISTS projections (
  entity TEXT NOT NULL,
  entity_id TEXT NOT NULL,
  state TEXT NOT NULL,
  fields TEXT NOT NULL,
  version INTEGER,
  occurred_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (entity, entity_id));
)sql";

constexpr const char* kInsertProcessed =
    "INSERT INTO processed_events (event_id, processed_at) VALUES (?1, ?2) "
    "ON CONFLICT (event_id) DO NOTHING";
constexpr const char* kInsertEvent =
    "INSERT INTO events (event_id, type, entity, entity_id, occurred_at, received_at, body) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
constexpr const char* kUpsertProjection =
    "INSERT INTO projections (entity, entity_id, state, fields, version, occurred_at, "
    "updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
    "ON CONFLICT (entity, entity_id) DO UPDATE SET state = excluded.state, "
    "fields = json_patch(projections.fields, excluded.fields), "
    "version = coalesce(excluded.version, projections.version), "
    "occurred_at = excluded.occurred_at, updated_at = excluded.updated_at "
    "WHERE excluded.occurred_at >= projections.occurred_at";

// One application connection with its prepared statements.
class SqlReceiver {
 public:
  SqlReceiver(const fs::path& path, bool durable) {
    Check(
        sqlite3_open_v2(path.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr),
        db_, "open");
    sqlite3_busy_timeout(db_, 10000);
    Exec(db_, "PRAGMA journal_mode=WAL");
    Exec(db_, durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=OFF");
    Exec(db_, kSchema);
    for (auto [stmt, sql] :
         {std::pair{&begin_, "BEGIN IMMEDIATE"}, std::pair{&commit_, "COMMIT"},
          std::pair{&rollback_, "ROLLBACK"}, std::pair{&processed_, kInsertProcessed},
          std::pair{&event_, kInsertEvent}, std::pair{&upsert_, kUpsertProjection}}) {
      Check(sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, stmt, nullptr), db_, sql);
    }
  }
  ~SqlReceiver() {
    for (sqlite3_stmt* s : {begin_, commit_, rollback_, processed_, event_, upsert_}) {
      sqlite3_finalize(s);
    }
    sqlite3_close(db_);
  }
  sqlite3* db() { return db_; }

  enum class Outcome { kAccepted, kDuplicate, kError };

  // One delivery, one transaction (or, with `in_txn`, inside the caller's).
  Outcome Deliver(const std::string& body, bool in_txn = false) {
    if (!MakePatternRow(body, &row_)) return Outcome::kError;
    const DecodedEvent* d = &row_.decoded;
    const Event& ev = d->event;
    const int64_t now = NowMicros();
    if (!in_txn && Step(begin_) != SQLITE_DONE) return Outcome::kError;
    sqlite3_bind_text(processed_, 1, ev.event_id.data(), static_cast<int>(ev.event_id.size()),
                      SQLITE_STATIC);
    sqlite3_bind_int64(processed_, 2, now);
    if (Step(processed_) != SQLITE_DONE) return Fail(in_txn);
    if (sqlite3_changes(db_) == 0) {  // already processed: a duplicate
      if (!in_txn && Step(commit_) != SQLITE_DONE) return Fail(in_txn);
      return Outcome::kDuplicate;
    }
    sqlite3_bind_text(event_, 1, ev.event_id.data(), static_cast<int>(ev.event_id.size()),
                      SQLITE_STATIC);
    sqlite3_bind_text(event_, 2, ev.type.data(), static_cast<int>(ev.type.size()), SQLITE_STATIC);
    if (d->entity) {
      sqlite3_bind_text(event_, 3, d->entity->entity.data(),
                        static_cast<int>(d->entity->entity.size()), SQLITE_STATIC);
      sqlite3_bind_text(event_, 4, d->entity->id.data(), static_cast<int>(d->entity->id.size()),
                        SQLITE_STATIC);
    } else {
      sqlite3_bind_null(event_, 3);
      sqlite3_bind_null(event_, 4);
    }
    sqlite3_bind_int64(event_, 5, ev.occurred_at);
    sqlite3_bind_int64(event_, 6, now);
    sqlite3_bind_text(event_, 7, body.data(), static_cast<int>(body.size()), SQLITE_STATIC);
    if (Step(event_) != SQLITE_DONE) return Fail(in_txn);
    if (d->entity) {
      const std::string& state = *row_.state;
      const std::string& fields = row_.fields;
      sqlite3_bind_text(upsert_, 1, d->entity->entity.data(),
                        static_cast<int>(d->entity->entity.size()), SQLITE_STATIC);
      sqlite3_bind_text(upsert_, 2, d->entity->id.data(), static_cast<int>(d->entity->id.size()),
                        SQLITE_STATIC);
      sqlite3_bind_text(upsert_, 3, state.data(), static_cast<int>(state.size()), SQLITE_STATIC);
      sqlite3_bind_text(upsert_, 4, fields.data(), static_cast<int>(fields.size()), SQLITE_STATIC);
      if (ev.version) {
        sqlite3_bind_int64(upsert_, 5, *ev.version);
      } else {
        sqlite3_bind_null(upsert_, 5);
      }
      sqlite3_bind_int64(upsert_, 6, ev.occurred_at);
      sqlite3_bind_int64(upsert_, 7, now);
      if (Step(upsert_) != SQLITE_DONE) return Fail(in_txn);
    }
    if (!in_txn && Step(commit_) != SQLITE_DONE) return Fail(in_txn);
    return Outcome::kAccepted;
  }

 private:
  int Step(sqlite3_stmt* s) {
    const int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc;
  }
  Outcome Fail(bool in_txn) {
    if (!in_txn) Step(rollback_);
    return Outcome::kError;
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
  sqlite3_stmt* rollback_ = nullptr;
  sqlite3_stmt* processed_ = nullptr;
  sqlite3_stmt* event_ = nullptr;
  sqlite3_stmt* upsert_ = nullptr;
  PatternRow row_;
};

// A fresh copy of the template database (WAL checkpointed into it).
fs::path SqliteCopy(Context& ctx, const std::string& name) {
  const fs::path dir = ctx.config.scratch / ("run-" + name);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  fs::copy_file(ctx.template_sqlite, dir / "receiver.db", ec);
  if (ec) Die("copying the SQLite template: " + ec.message());
  return dir;
}

}  // namespace

void BuildTemplateSqlite(const Pool& pool, uint64_t events, const fs::path& path) {
  {
    SqlReceiver rx(path, /*durable=*/false);
    for (uint64_t i = 0; i < events; i += 10000) {
      Exec(rx.db(), "BEGIN");
      for (uint64_t n = i; n < std::min(events, i + 10000); ++n) {
        if (rx.Deliver(pool.bodies[n], /*in_txn=*/true) != SqlReceiver::Outcome::kAccepted) {
          Die("sqlite template: delivery " + std::to_string(n) + " not accepted");
        }
      }
      Exec(rx.db(), "COMMIT");
    }
    Exec(rx.db(), "PRAGMA wal_checkpoint(TRUNCATE)");
  }
  std::error_code ec;
  fs::remove(path.string() + "-wal", ec);
  fs::remove(path.string() + "-shm", ec);
}

Throughput SqliteRun(Context& ctx, const std::string& name, int threads) {
  const size_t first = ctx.config.prefill_events;
  const uint64_t available = ctx.pool.bodies.size() - first;
  const fs::path dir = SqliteCopy(ctx, name);
  Throughput t;
  {
    // The way an app server shares it: a pool, one connection per worker
    // thread, writers serialized by SQLite's lock (busy timeout 10 s).
    std::vector<std::unique_ptr<SqlReceiver>> connections;
    for (int i = 0; i < threads; ++i) {
      connections.push_back(std::make_unique<SqlReceiver>(dir / "receiver.db", true));
    }
    t = RunTimed(threads, ctx.config.seconds, available, [&](int thread, uint64_t i) {
      return connections[thread]->Deliver(ctx.pool.bodies[first + i]) ==
             SqlReceiver::Outcome::kAccepted;
    });
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  ctx.results.notes["sqlite_version"] = sqlite3_libversion();
  return t;
}

Throughput SqliteDuplicateRun(Context& ctx) {
  // Duplicates: the processed-ids check answers them, no write, no sync.
  const fs::path dir = SqliteCopy(ctx, "sqlite_duplicate");
  std::vector<uint32_t> order(ctx.config.prefill_events);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(6));
  Throughput t;
  {
    SqlReceiver rx(dir / "receiver.db", true);
    auto dup = [&](int, uint64_t i) {
      return rx.Deliver(ctx.pool.bodies[order[i % order.size()]]) ==
             SqlReceiver::Outcome::kDuplicate;
    };
    RunTimed(1, ctx.config.quick ? 0.2 : 1.0, order.size(), dup);
    t = RunTimed(1, ctx.config.seconds, UINT64_MAX, dup);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return t;
}

}  // namespace eventfold::benchdrv
