// The PostgreSQL pattern: the receiver most teams (and Marten) run, on
// Debian's PostgreSQL, measured by the same driver on the same disk.
//
// The bench starts a private cluster of its own: initdb into a temporary
// directory under the scratch dir, the server on a free loopback port with
// its unix socket in that directory, run as an unprivileged user when the
// bench is root (initdb refuses root), and stopped and removed at the end,
// also when the bench dies (the server gets SIGQUIT when its parent exits,
// and an exit handler removes the directory). Each delivery is the SQLite
// pattern's transaction (sql_pattern.h) with synchronous_commit=on and
// fsync=on, prepared statements over libpq, one connection per producer.
// Each run starts from a fresh copy (CREATE DATABASE ... TEMPLATE) of a
// database holding the same prefill as the other baselines.

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <tuple>

#include "bench/driver/driver.h"
#include "bench/driver/sql_pattern.h"

namespace eventfold::benchdrv {
namespace {

// Who runs the server: ourselves, or (as root) an unprivileged account.
struct Account {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
};

std::optional<Account> ServerAccount() {
  Account a;
  if (::geteuid() != 0) return a;
  for (const char* name : {"postgres", "nobody"}) {
    if (const passwd* pw = ::getpwnam(name)) {
      a.switch_user = true;
      a.uid = pw->pw_uid;
      a.gid = pw->pw_gid;
      a.name = name;
      return a;
    }
  }
  return std::nullopt;
}

// Starts argv[0] as `who` in `cwd`, stdout and stderr appended to `log`.
// With `die_with_parent` the child gets SIGQUIT (PostgreSQL's immediate
// shutdown) when this process ends, however it ends. Returns the pid, or -1.
pid_t Spawn(const std::vector<std::string>& argv, const Account& who, const fs::path& cwd,
            const fs::path& log, bool die_with_parent) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) return -1;
  const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec: the driver has threads.
    if (::dup2(out, 1) < 0 || ::dup2(out, 2) < 0 || (in >= 0 && ::dup2(in, 0) < 0)) _exit(126);
    if (who.switch_user &&
        (::setgroups(0, nullptr) != 0 || ::setgid(who.gid) != 0 || ::setuid(who.uid) != 0)) {
      _exit(126);
    }
    if (::chdir(cwd.c_str()) != 0) _exit(126);
    if (die_with_parent) {
      // Set after setuid, which clears it; checked against a parent that
      // already left.
      if (::prctl(PR_SET_PDEATHSIG, SIGQUIT) != 0 || ::getppid() != parent) _exit(126);
    }
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::close(out);
  if (in >= 0) ::close(in);
  return pid;
}

// Waits up to `seconds` for `pid`; its exit status, or nullopt on timeout.
std::optional<int> WaitFor(pid_t pid, double seconds) {
  const auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                 std::chrono::duration<double>(seconds));
  while (true) {
    int st = 0;
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (r < 0) return -1;
    if (SteadyClock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A port on 127.0.0.1 nobody listens on now (the kernel's pick).
int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string Tail(const fs::path& file, size_t bytes = 600) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  std::string all = s.str();
  if (all.size() > bytes) all = "..." + all.substr(all.size() - bytes);
  while (!all.empty() && all.back() == '\n') all.pop_back();
  return all;
}

// The private cluster. Stop() (or the destructor, or the exit handler when
// the driver dies) shuts the server down and removes its directory.
class Cluster {
 public:
  ~Cluster() { Stop(); }

  // Empty on success, else why the cluster could not start.
  std::string Start(const fs::path& bin, const fs::path& dir) {
    std::optional<Account> who = ServerAccount();
    if (!who) return "running as root and no unprivileged account (postgres, nobody) to run as";
    dir_ = dir;
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_ / "data", ec);
    if (ec) return "cannot create " + dir_.string() + ": " + ec.message();
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::permissions(dir_ / "data", fs::perms::owner_all, ec);
    if (who->switch_user && (::chown(dir_.c_str(), who->uid, who->gid) != 0 ||
                             ::chown((dir_ / "data").c_str(), who->uid, who->gid) != 0)) {
      return "cannot give " + dir_.string() + " to " + who->name;
    }
    const fs::path log = dir_ / "server.log";
    const pid_t init =
        Spawn({(bin / "initdb").string(), "-D", (dir_ / "data").string(), "-U", "bench", "-A",
               "trust", "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"},
              *who, dir_, log, /*die_with_parent=*/true);
    if (init < 0) return "cannot start initdb";
    const std::optional<int> init_rc = WaitFor(init, 120);
    if (!init_rc || *init_rc != 0) {
      if (!init_rc) {
        ::kill(init, SIGKILL);
        WaitFor(init, 10);
      }
      return "initdb failed (as " + (who->switch_user ? who->name : "self") + "): " + Tail(log);
    }
    port_ = FreeLoopbackPort();
    if (port_ <= 0) return "no free loopback port";
    server_ = Spawn(
        {(bin / "postgres").string(), "-D", (dir_ / "data").string(), "-p", std::to_string(port_),
         "-k", dir_.string(), "-c", "listen_addresses=127.0.0.1", "-c", "synchronous_commit=on",
         "-c", "fsync=on", "-c", "max_connections=100", "-c", "shared_buffers=128MB"},
        *who, dir_, log, /*die_with_parent=*/true);
    if (server_ < 0) return "cannot start postgres";
    const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
    while (PQping(Conninfo("postgres").c_str()) != PQPING_OK) {
      int st = 0;
      if (::waitpid(server_, &st, WNOHANG) == server_) {
        server_ = -1;
        return "the server exited at start: " + Tail(log);
      }
      if (SteadyClock::now() >= deadline) return "the server did not answer in 60 s: " + Tail(log);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }

  std::string Conninfo(const std::string& db) const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=bench dbname=" + db +
           " connect_timeout=10";
  }
  int port() const { return port_; }

  void Stop() {
    if (server_ > 0) {
      ::kill(server_, SIGINT);  // fast shutdown: roll back, checkpoint, exit
      if (!WaitFor(server_, 30)) {
        ::kill(server_, SIGKILL);
        WaitFor(server_, 10);
      }
      server_ = -1;
    }
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
      dir_.clear();
    }
  }

 private:
  fs::path dir_;
  int port_ = -1;
  pid_t server_ = -1;
};

Cluster* g_cluster = nullptr;  // for the exit handler: Die() exits without unwinding

void StopClusterAtExit() {
  if (g_cluster) g_cluster->Stop();
}

constexpr const char* kSchema = R"sql(
CREATE TABLE processed_events (
  event_id text PRIMARY KEY,
  processed_at bigint NOT NULL);
CREATE TABLE events (
  id bigserial PRIMARY KEY,
  event_id text NOT NULL,
  type text NOT NULL,
  entity text,
  entity_id text,
  occurred_at bigint NOT NULL,
  received_at bigint NOT NULL,
  body text NOT NULL);
CREATE INDEX events_by_entity ON events (entity, entity_id, occurred_at);
CREATE TABLE projections (
  entity text NOT NULL,
  entity_id text NOT NULL,
  state text NOT NULL,
  fields jsonb NOT NULL,
  version bigint,
  occurred_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  PRIMARY KEY (entity, entity_id));
)sql";

// The SQLite pattern's statements; jsonb || merges the fields as json_patch
// does there (top-level keys).
constexpr const char* kInsertProcessed =
    "INSERT INTO processed_events (event_id, processed_at) VALUES ($1, $2) "
    "ON CONFLICT (event_id) DO NOTHING";
constexpr const char* kInsertEvent =
    "INSERT INTO events (event_id, type, entity, entity_id, occurred_at, received_at, body) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7)";
constexpr const char* kUpsertProjection =
    "INSERT INTO projections AS p (entity, entity_id, state, fields, version, occurred_at, "
    "updated_at) VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7) "
    "ON CONFLICT (entity, entity_id) DO UPDATE SET state = excluded.state, "
    "fields = p.fields || excluded.fields, version = coalesce(excluded.version, p.version), "
    "occurred_at = excluded.occurred_at, updated_at = excluded.updated_at "
    "WHERE excluded.occurred_at >= p.occurred_at";

// One application connection with its prepared statements.
class PgReceiver {
 public:
  // Empty on success, else the error.
  std::string Connect(const std::string& conninfo) {
    conn_ = PQconnectdb(conninfo.c_str());
    if (PQstatus(conn_) != CONNECTION_OK) return PQerrorMessage(conn_);
    return "";
  }
  // Prepares the pattern's statements (the schema must exist); empty on
  // success, else the error.
  std::string Prepare() {
    for (auto [name, sql, n] :
         {std::tuple{"processed", kInsertProcessed, 2}, std::tuple{"event", kInsertEvent, 7},
          std::tuple{"upsert", kUpsertProjection, 7}}) {
      PGresult* r = PQprepare(conn_, name, sql, n, nullptr);
      const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
      PQclear(r);
      if (!ok) return std::string(name) + ": " + PQerrorMessage(conn_);
    }
    return "";
  }
  ~PgReceiver() {
    if (conn_) PQfinish(conn_);
  }
  // Runs `sql` (no result rows); false on error.
  bool Exec(const char* sql) {
    PGresult* r = PQexec(conn_, sql);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
  }
  std::string Error() const { return PQerrorMessage(conn_); }

  enum class Outcome { kAccepted, kDuplicate, kError };

  // One delivery, one transaction (or, with `in_txn`, inside the caller's).
  Outcome Deliver(const std::string& body, bool in_txn = false) {
    if (!MakePatternRow(body, &row_)) return Outcome::kError;
    const DecodedEvent& d = row_.decoded;
    const Event& ev = d.event;
    const std::string now = std::to_string(NowMicros());
    const std::string occurred = std::to_string(ev.occurred_at);
    if (!in_txn && !Exec("BEGIN")) return Outcome::kError;
    int changed = 0;
    if (!Run("processed", {ev.event_id.c_str(), now.c_str()}, &changed)) return Fail(in_txn);
    if (changed == 0) {  // already processed: a duplicate
      if (!in_txn && !Exec("COMMIT")) return Fail(in_txn);
      return Outcome::kDuplicate;
    }
    const char* entity = d.entity ? d.entity->entity.c_str() : nullptr;
    const char* id = d.entity ? d.entity->id.c_str() : nullptr;
    if (!Run("event",
             {ev.event_id.c_str(), ev.type.c_str(), entity, id, occurred.c_str(), now.c_str(),
              body.c_str()},
             &changed)) {
      return Fail(in_txn);
    }
    if (d.entity) {
      const std::string version = ev.version ? std::to_string(*ev.version) : "";
      if (!Run("upsert",
               {entity, id, row_.state->c_str(), row_.fields.c_str(),
                ev.version ? version.c_str() : nullptr, occurred.c_str(), now.c_str()},
               &changed)) {
        return Fail(in_txn);
      }
    }
    if (!in_txn && !Exec("COMMIT")) return Fail(in_txn);
    return Outcome::kAccepted;
  }

 private:
  bool Run(const char* stmt, std::initializer_list<const char*> params, int* changed) {
    std::vector<const char*> values(params);
    PGresult* r = PQexecPrepared(conn_, stmt, static_cast<int>(values.size()), values.data(),
                                 nullptr, nullptr, 0);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (ok) *changed = std::atoi(PQcmdTuples(r));
    PQclear(r);
    return ok;
  }
  Outcome Fail(bool in_txn) {
    if (!in_txn) Exec("ROLLBACK");
    return Outcome::kError;
  }

  PGconn* conn_ = nullptr;
  PatternRow row_;
};

void Skip(Context& ctx, const std::string& why) {
  Log("PostgreSQL pattern: skipped: %s", why.c_str());
  ctx.results.notes["postgres_pattern"] = "skipped: " + why;
}

// Creates database `name` from the template database `from`.
bool CopyDatabase(PgReceiver& admin, const std::string& from, const std::string& name) {
  const std::string create =
      "CREATE DATABASE " + name + " TEMPLATE " + from + " STRATEGY FILE_COPY";
  return admin.Exec(create.c_str());
}

}  // namespace

void RunPostgresFigures(Context& ctx) {
  const Config& c = ctx.config;
  if (!c.Runs("postgres")) return;
  if (c.quick && !c.only.count("postgres")) {
    // A private cluster costs more than the rest of the quick suite's
    // budget (initdb alone takes seconds, and tens on a busy machine).
    Skip(ctx, "not in --quick runs (initdb, start and prefill take seconds); add --only postgres");
    return;
  }
  const fs::path bin = c.pg_bin;
  if (!fs::exists(bin / "initdb") || !fs::exists(bin / "postgres")) {
    Skip(ctx, "PostgreSQL is not installed (no initdb/postgres in " + bin.string() +
                  "; apt-get install postgresql)");
    return;
  }
  const auto start = SteadyClock::now();
  Cluster cluster;
  g_cluster = &cluster;
  static const bool registered = std::atexit(StopClusterAtExit) == 0;
  (void)registered;
  struct Unregister {
    ~Unregister() { g_cluster = nullptr; }
  } unregister;
  if (std::string err = cluster.Start(bin, c.scratch / "postgres"); !err.empty()) {
    Skip(ctx, err);
    return;
  }
  {
    PgReceiver admin;
    if (std::string err = admin.Connect(cluster.Conninfo("postgres")); !err.empty()) {
      Skip(ctx, "connect: " + err);
      return;
    }
    if (!admin.Exec("CREATE DATABASE prefill")) {
      Skip(ctx, "create database: " + admin.Error());
      return;
    }
  }
  {
    // The prefill, as the other baselines hold it, in big unsynced
    // transactions (the load is not measured).
    PgReceiver rx;
    if (std::string err = rx.Connect(cluster.Conninfo("prefill")); !err.empty()) {
      Skip(ctx, "connect: " + err);
      return;
    }
    if (!rx.Exec(kSchema)) Die("postgres schema: " + rx.Error());
    if (std::string err = rx.Prepare(); !err.empty()) Die("postgres prepare: " + err);
    if (!rx.Exec("SET synchronous_commit = off")) Die("postgres: " + rx.Error());
    for (uint64_t i = 0; i < c.prefill_events; i += 10000) {
      if (!rx.Exec("BEGIN")) Die("postgres prefill: " + rx.Error());
      for (uint64_t n = i; n < std::min(c.prefill_events, i + 10000); ++n) {
        if (rx.Deliver(ctx.pool.bodies[n], /*in_txn=*/true) != PgReceiver::Outcome::kAccepted) {
          Die("postgres prefill: delivery " + std::to_string(n) + ": " + rx.Error());
        }
      }
      if (!rx.Exec("COMMIT")) Die("postgres prefill: " + rx.Error());
    }
    if (!rx.Exec("VACUUM ANALYZE")) Die("postgres vacuum: " + rx.Error());
  }
  Log("PostgreSQL pattern: private cluster on 127.0.0.1:%d, %" PRIu64 " events prefilled (%.1fs)",
      cluster.port(), c.prefill_events,
      std::chrono::duration<double>(SteadyClock::now() - start).count());

  PgReceiver admin;
  if (std::string err = admin.Connect(cluster.Conninfo("postgres")); !err.empty()) {
    Die("postgres: " + err);
  }
  const size_t first = c.prefill_events;
  const uint64_t available = ctx.pool.bodies.size() - first;
  for (int threads : {1, 64}) {
    const std::string key = "postgres_pattern_" + std::to_string(threads);
    const std::string db = "run_" + std::to_string(threads);
    if (!CopyDatabase(admin, "prefill", db)) Die("postgres: copy database: " + admin.Error());
    Throughput t;
    {
      std::vector<std::unique_ptr<PgReceiver>> connections;
      for (int i = 0; i < threads; ++i) {
        connections.push_back(std::make_unique<PgReceiver>());
        std::string err = connections.back()->Connect(cluster.Conninfo(db));
        if (err.empty()) err = connections.back()->Prepare();
        if (!err.empty()) {
          Die("postgres: connection " + std::to_string(i) + ": " + err);
        }
      }
      ProfileScope profile(key);
      t = RunTimed(threads, c.seconds, available, [&](int thread, uint64_t i) {
        return connections[thread]->Deliver(ctx.pool.bodies[first + i]) ==
               PgReceiver::Outcome::kAccepted;
      });
    }
    const std::string drop = "DROP DATABASE " + db + " WITH (FORCE)";
    if (!admin.Exec(drop.c_str())) Die("postgres: " + admin.Error());
    RecordRun(ctx.results, key, t);
  }
  Results& res = ctx.results;
  const bool one = res.Get("postgres_pattern_1_eps") >= res.Get("postgres_pattern_64_eps");
  res.Set("postgres_pattern_eps",
          std::max(res.Get("postgres_pattern_1_eps"), res.Get("postgres_pattern_64_eps")));
  res.notes["postgres_pattern"] =
      std::string("PostgreSQL ") + std::to_string(PQlibVersion()) +
      " (libpq version), private cluster, synchronous_commit=on, fsync=on; best: " +
      (one ? "1 connection" : "64 connections");
  cluster.Stop();
  Log("PostgreSQL pattern: done, cluster stopped and removed (%.1fs in all)",
      std::chrono::duration<double>(SteadyClock::now() - start).count());
}

}  // namespace eventfold::benchdrv
