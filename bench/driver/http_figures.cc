// Signed HTTP: the in-process receiver (Receiver + HttpServer over a real
// store with the default durability, prefilled like the other runs) under a
// real load generator.
//
// Throughput: wrk (-t2 -c64) sending pre-signed, distinct ReceiptRoller
// deliveries. The bodies are signed (X-RR-Signature, t = now) just before
// wrk starts and streamed from files by a small Lua script, one request per
// body; enough are generated for the whole run (sized from the in-process
// durable rate), so every request is a new event unless the run outpaces
// that estimate (then the files wrap and the repeats are duplicates: the
// counts are reported). Without wrk, the project's own sender
// (tools/sender.h, 64 keep-alive connections, as fast as possible) is used.
//
// Latency at a steady rate: tools/sender.h pacing 1000 deliveries/s over 64
// connections, each signed at send time; latency counts from each
// delivery's scheduled send time, so a stall cannot hide (no coordinated
// omission). The receiver and its sender run in a child process of their
// own (`--child steady`) on a copy of the template store: in this process,
// beside the event pool's few GiB of heap, the p99 was 3-4x what the same
// receiver shows alone (docs/BENCHMARKS.md, "The steady p99"). Its
// baseline, run right after on the same disk, is what a synced 1.1 KB
// append costs there (DiskSyncProbe): each 2xx waits for its group's sync.
//
// The throughput rows' ceiling: the same wrk run against the same server
// and receiver over a sink that keeps nothing (FrontEndCeiling,
// `http_no_store_*`): what the front end, the signature checks, loopback
// TCP and wrk cost on these two cores without any store behind them.

#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>

#include "bench/driver/driver.h"
#include "core/signature.h"
#include "eventfold/http_server.h"
#include "eventfold/ingest_sink.h"
#include "eventfold/receiver.h"
#include "eventfold/store.h"
#include "tools/sender.h"

namespace eventfold::benchdrv {
namespace {

constexpr const char* kSecret = "eventfold-bench-signing-secret";
constexpr const char* kPath = "/webhooks/receiptroller";

// The bench's signing sender to a server on `port`: `connections`
// keep-alive connections, paced at `rate` requests a second (0: unpaced).
sim::SenderOptions SignedSender(int port, int connections, double rate = 0) {
  sim::SenderOptions so;
  so.port = port;
  so.path = kPath;
  so.secret = kSecret;
  so.connections = connections;
  so.rate_per_second = rate;
  return so;
}

// A running receiver over a fresh copy of the template store.
class Server {
 public:
  Server(Context& ctx, const std::string& name, int connections,
         Durability durability = Durability::kSync)
      : Server(CopyOfTemplate(ctx, name), connections, durability) {}

  // Over the store at `dir`, which it removes when destroyed.
  Server(fs::path dir, int connections, Durability durability = Durability::kSync)
      : dir_(std::move(dir)) {
    Options options;
    options.durability = durability;
    Result<std::unique_ptr<Store>> store = Store::Open(dir_.string(), options);
    if (!store.ok()) Die("http store: " + store.status().ToString());
    store_ = std::move(*store);
    ReceiverOptions ro;
    ro.secrets = {kSecret};
    Result<std::unique_ptr<Receiver>> rx = Receiver::Make(store_.get(), ro);
    if (!rx.ok()) Die("receiver: " + rx.status().ToString());
    receiver_ = std::move(*rx);
    HttpServerOptions so;
    so.workers = connections + 8;
    server_ = std::make_unique<HttpServer>(receiver_.get(), so);
    if (Status st = server_->Start(); !st.ok()) Die("http server: " + st.ToString());
  }
  ~Server() {
    server_->Stop();
    receiver_.reset();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  int port() const { return server_->port(); }
  Store& store() { return *store_; }
  void Stop() { server_->Stop(); }

  // A fresh copy of the template store, for the run `name`.
  static fs::path CopyOfTemplate(Context& ctx, const std::string& name) {
    fs::path dir = ctx.config.scratch / ("run-" + name);
    CopyDir(ctx.template_store, dir);
    return dir;
  }

 private:
  fs::path dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Receiver> receiver_;
  std::unique_ptr<HttpServer> server_;
};

std::string EventIdOf(const std::string& body) {
  const std::string needle = "\"event_id\":\"";
  const size_t at = body.find(needle);
  if (at == std::string::npos) return "";
  const size_t start = at + needle.size();
  return body.substr(start, body.find('"', start) - start);
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool HaveWrk(const std::string& wrk) {
  int code = 0;
  RunCommand("command -v '" + wrk + "' >/dev/null 2>&1", &code);
  return code == 0;
}

constexpr const char* kLua = R"lua(
-- Generated by eventfold-bench: streams pre-signed requests from files,
-- one file per wrk thread, each entry "<length>\n<raw request>".
local counter = 0
function setup(thread)
  thread:set("file_id", counter)
  counter = counter + 1
end
local f = nil
function init(args)
  f = assert(io.open(REQUEST_DIR .. "/requests-" .. file_id .. ".bin", "rb"))
end
function request()
  local line = f:read("*l")
  if not line then
    f:seek("set", 0)
    line = f:read("*l")
  end
  return f:read(tonumber(line))
end
function done(summary, latency, requests)
  io.write(string.format(
    "RESULT requests=%d duration_us=%d p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f " ..
    "connect_errors=%d read_errors=%d write_errors=%d status_errors=%d timeouts=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), latency.max, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.status, summary.errors.timeout))
end
)lua";

// How many distinct bodies a wrk run of `durability` sends: twice the
// in-process durable rate (an upper bound for the same store behind HTTP),
// at least 20k/s; without syncs, at least 60k/s (above what two cores parse
// and store).
uint64_t WrkBodies(const Context& ctx, Durability durability) {
  const Config& c = ctx.config;
  const uint64_t available = ctx.pool.bodies.size() - c.prefill_events;
  const double floor = durability == Durability::kSync ? 20000.0 : 60000.0;
  const double guess = std::max(floor, 2 * ctx.results.Get("durable_ingest_64_eps"));
  return std::min<uint64_t>(available, static_cast<uint64_t>(guess * c.http_seconds) + 10000);
}

// What wrk reports: its RESULT line's fields.
struct WrkRun {
  double requests = 0;
  double seconds = 0;
  double errors = 0;  // connect, read, write, non-2xx and timeouts
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
};

// Runs wrk (-t2, `c.http_connections` connections, `c.http_seconds`) against
// 127.0.0.1:`port`, sending `bodies` distinct deliveries of the pool, each
// signed just before the run, and profiles the run as `key`.
WrkRun RunWrk(Context& ctx, const std::string& key, int port, uint64_t bodies) {
  const Config& c = ctx.config;
  const size_t first = c.prefill_events;
  const fs::path req_dir = c.scratch / "wrk-requests";
  fs::create_directories(req_dir);
  const int wrk_threads = 2;
  {
    const int64_t t = UnixSeconds();
    const std::string host = "Host: 127.0.0.1:" + std::to_string(port) + "\r\n";
    std::vector<std::ofstream> files;
    for (int i = 0; i < wrk_threads; ++i) {
      files.emplace_back(req_dir / ("requests-" + std::to_string(i) + ".bin"), std::ios::binary);
    }
    for (uint64_t i = 0; i < bodies; ++i) {
      const std::string& body = ctx.pool.bodies[first + i];
      std::string req = std::string("POST ") + kPath + " HTTP/1.1\r\n" + host +
                        "Content-Type: application/json\r\n"
                        "User-Agent: receiptroller-webhooks/3.8.2\r\n"
                        "X-RR-Event-Id: " +
                        EventIdOf(body) +
                        "\r\n"
                        "X-RR-Signature: " +
                        SignRr(kSecret, t, body) +
                        "\r\n"
                        "Content-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body;
      files[i % wrk_threads] << req.size() << '\n' << req;
    }
    std::ofstream lua(req_dir / "send.lua");
    lua << "REQUEST_DIR = \"" << req_dir.string() << "\"\n" << kLua;
  }
  char duration[32];
  std::snprintf(duration, sizeof duration, "%.0fs", std::max(1.0, c.http_seconds));
  const std::string cmd = "'" + c.wrk + "' -t" + std::to_string(wrk_threads) + " -c" +
                          std::to_string(c.http_connections) + " -d" + duration +
                          " --timeout 10s -s '" + (req_dir / "send.lua").string() +
                          "' http://127.0.0.1:" + std::to_string(port) + kPath + " 2>&1";
  int code = 0;
  std::optional<ProfileScope> profile(std::in_place, key);  // wrk included: perf follows children
  const std::string out = RunCommand(cmd, &code);
  profile.reset();
  std::error_code ec;
  fs::remove_all(req_dir, ec);
  if (code != 0 || !ResultField(out, "requests"))
    Die("wrk failed (exit " + std::to_string(code) + "): " + out);
  WrkRun run;
  run.requests = *ResultField(out, "requests");
  run.seconds = *ResultField(out, "duration_us") / 1e6;
  run.p50_us = *ResultField(out, "p50_us");
  run.p99_us = *ResultField(out, "p99_us");
  run.p999_us = *ResultField(out, "p999_us");
  run.max_us = *ResultField(out, "max_us");
  run.errors = *ResultField(out, "connect_errors") + *ResultField(out, "read_errors") +
               *ResultField(out, "write_errors") + *ResultField(out, "status_errors") +
               *ResultField(out, "timeouts");
  return run;
}

// Records `run` under `key`_rps, _p50_ms, _p99_ms, _p999_ms, _max_ms,
// _requests and _errors.
void RecordWrk(Results& res, const std::string& key, const WrkRun& run) {
  res.Set(key + "_rps", run.requests / run.seconds);
  res.Set(key + "_p50_ms", run.p50_us / 1e3);
  res.Set(key + "_p99_ms", run.p99_us / 1e3);
  res.Set(key + "_p999_ms", run.p999_us / 1e3);
  res.Set(key + "_max_ms", run.max_us / 1e3);
  res.Set(key + "_requests", run.requests);
  res.Set(key + "_errors", run.errors);
}

// `key`: the results' prefix ("http": the store's default kSync durability;
// "http_buffered": kBuffered).
void WrkThroughput(Context& ctx, const std::string& key, Durability durability) {
  Results& res = ctx.results;
  const uint64_t bodies = WrkBodies(ctx, durability);
  Server server(ctx, key + "-wrk", ctx.config.http_connections, durability);
  const WrkRun run = RunWrk(ctx, key, server.port(), bodies);
  server.Stop();
  const Counters counters = server.store().counters();
  RecordWrk(res, key, run);
  res.Set(key + "_accepted", static_cast<double>(counters.accepted));
  res.Set(key + "_duplicate", static_cast<double>(counters.duplicate));
  res.Set(key + "_distinct_bodies", static_cast<double>(bodies));
  res.notes["http_client"] =
      "wrk -t2 -c" + std::to_string(ctx.config.http_connections) + ", pre-signed bodies";
  Log("wrk (%s): %.0f requests/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms; %" PRIu64
      " accepted, %" PRIu64 " duplicates, %.0f errors",
      key.c_str(), run.requests / run.seconds, run.p50_us / 1e3, run.p99_us / 1e3,
      run.p999_us / 1e3, counters.accepted, counters.duplicate, run.errors);
}

// A sink that keeps nothing: every delivery the receiver has verified is
// answered 200 "accepted" at once, on the thread that verified it (an I/O
// thread, as NeverBlocks says it may be).
class KeepNothingSink : public IngestSink {
 public:
  IngestResult Ingest(const Delivery&) override {
    IngestResult r;
    r.outcome = Outcome::kAccepted;
    return r;
  }
  // Ingest() waits for nothing, so the I/O threads may take deliveries
  // themselves, as they do over a Store.
  bool NeverBlocks() const override { return true; }
  Status Quarantine(RefusedDelivery) override { return Status::OK(); }
  uint64_t ApproximateBytes() override { return 0; }
};

// The kBuffered row's ceiling: the same wrk run against the same server and
// receiver (signature checks included) over a sink that keeps nothing, so
// what is left is the HTTP front end, the receiver's checks, the kernel's
// loopback TCP and wrk itself, on the same two cores. No store, however
// fast, behind this front end can answer faster on this host.
void FrontEndCeiling(Context& ctx) {
  Results& res = ctx.results;
  KeepNothingSink sink;
  ReceiverOptions ro;
  ro.secrets = {kSecret};
  Result<std::unique_ptr<Receiver>> rx = Receiver::Make(&sink, ro);
  if (!rx.ok()) Die("receiver: " + rx.status().ToString());
  HttpServerOptions so;
  so.workers = ctx.config.http_connections + 8;
  HttpServer server(rx->get(), so);
  if (Status st = server.Start(); !st.ok()) Die("http server: " + st.ToString());
  const WrkRun run =
      RunWrk(ctx, "http_no_store", server.port(), WrkBodies(ctx, Durability::kBuffered));
  server.Stop();
  RecordWrk(res, "http_no_store", run);
  Log("wrk (http_no_store, a sink that keeps nothing): %.0f requests/s, p50 %.2f ms, p99 %.2f "
      "ms, %.0f errors",
      run.requests / run.seconds, run.p50_us / 1e3, run.p99_us / 1e3, run.errors);
}

std::vector<sim::Outgoing> Outgoing(Context& ctx, uint64_t n) {
  const size_t first = ctx.config.prefill_events;
  n = std::min<uint64_t>(n, ctx.pool.bodies.size() - first);
  std::vector<sim::Outgoing> out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    const std::string& body = ctx.pool.bodies[first + i];
    out.push_back(sim::Outgoing{Delivery{{{"X-RR-Event-Id", EventIdOf(body)}}, body}});
  }
  return out;
}

void SenderThroughput(Context& ctx) {
  // Fallback without wrk: the project's sender, unpaced.
  Results& res = ctx.results;
  const Config& c = ctx.config;
  const double guess = std::max(20000.0, 2 * ctx.results.Get("durable_ingest_64_eps"));
  std::vector<sim::Outgoing> outgoing =
      Outgoing(ctx, static_cast<uint64_t>(guess * c.http_seconds / 2));
  Server server(ctx, "http-sender", c.http_connections);
  sim::SendReport r = sim::Send(outgoing, SignedSender(server.port(), c.http_connections));
  res.Set("http_rps", static_cast<double>(r.attempts) / r.seconds);
  RecordLatencies(res, "http", r.latencies);
  res.Set("http_requests", static_cast<double>(r.attempts));
  res.Set("http_errors", static_cast<double>(r.attempts - r.delivered));
  res.notes["http_client"] =
      "tools/sender.h (wrk not found), " + std::to_string(c.http_connections) + " connections";
  Log("sender: %.0f requests/s", res.Get("http_rps"));
}

// The steady row's baseline: what one synced append costs on this disk at
// this moment. Appends 1.1 KB (about a delivery's WAL record) and calls
// fdatasync `count` times, one every millisecond, and returns each call's
// time in seconds. Each 2xx of the steady run waits for its group's sync, so
// a stall here holds the answers queued behind it.
std::vector<double> DiskSyncProbe(const fs::path& file, int count) {
  const int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) Die("disk sync probe: cannot create " + file.string());
  const std::string record(1100, 'x');
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(count));
  auto next = SteadyClock::now();
  for (int i = 0; i < count; ++i) {
    std::this_thread::sleep_until(next);
    next += std::chrono::milliseconds(1);
    const auto start = SteadyClock::now();
    if (::write(fd, record.data(), record.size()) != static_cast<ssize_t>(record.size()) ||
        ::fdatasync(fd) != 0) {
      ::close(fd);
      Die("disk sync probe: write or fdatasync failed on " + file.string());
    }
    seconds.push_back(std::chrono::duration<double>(SteadyClock::now() - start).count());
  }
  ::close(fd);
  std::error_code ec;
  fs::remove(file, ec);
  return seconds;
}

void SteadyLatency(Context& ctx) {
  Results& res = ctx.results;
  const Config& c = ctx.config;
  const std::vector<sim::Outgoing> outgoing =
      Outgoing(ctx, static_cast<uint64_t>(c.steady_rate * c.steady_seconds));
  const fs::path input = c.scratch / "steady.ndjson";
  {
    std::ofstream out(input, std::ios::binary);
    for (const sim::Outgoing& o : outgoing) {
      if (o.delivery.body.find('\n') != std::string::npos) Die("steady: a body spans lines");
      out << o.delivery.body << '\n';
    }
    if (!out) Die("cannot write " + input.string());
  }
  const fs::path dir = Server::CopyOfTemplate(ctx, "http-steady");
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.0f", c.steady_rate);
  int code = 0;
  const std::string out =
      RunCommand("'" + c.self_exe + "' --child steady --child-dir '" + dir.string() +
                     "' --child-input '" + input.string() + "' --child-rate " + rate +
                     " --child-connections " + std::to_string(c.http_connections),
                 &code);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::remove(input, ec);
  // Every field of the child's RESULT line, or the run dies: a missing
  // latency must never read as 0 ms.
  auto field = [&](const std::string& key) {
    const std::optional<double> v = ResultField(out, key);
    if (code != 0 || !v) Die("steady child (exit " + std::to_string(code) + "): " + out);
    return *v;
  };
  const double attempts = field("attempts"), delivered = field("delivered");
  const double seconds = field("seconds");
  if (seconds <= 0) Die("steady child: no time measured: " + out);
  res.Set("steady_rate_target", c.steady_rate);
  res.Set("steady_rate_achieved", attempts / seconds);
  for (const char* q : {"p50", "p99", "p999", "max"}) {
    res.Set(std::string("steady_") + q + "_ms", field(std::string(q) + "_us") / 1e3);
  }
  res.Set("steady_deliveries", static_cast<double>(outgoing.size()));
  res.Set("steady_errors", static_cast<double>(outgoing.size()) - delivered);
  res.notes["steady_process"] = "receiver and sender in a child process of their own";
  Log("steady %.0f/s (%.0f achieved): p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms", c.steady_rate,
      res.Get("steady_rate_achieved"), res.Get("steady_p50_ms"), res.Get("steady_p99_ms"),
      res.Get("steady_p999_ms"));
  // Right after, on the same disk: 3,000 synced appends (3 s), fewer in
  // --quick runs.
  RecordLatencies(res, "disk_sync", DiskSyncProbe(c.scratch / "sync-probe", c.quick ? 200 : 3000));
  Log("disk: fdatasync of a 1.1 KB append, one a millisecond: p50 %.2f ms, p99 %.2f ms, max "
      "%.2f ms",
      res.Get("disk_sync_p50_ms"), res.Get("disk_sync_p99_ms"), res.Get("disk_sync_max_ms"));
}

double SelfRssMib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024;
  }
  return 0;
}

// 10,000 idle keep-alive connections (each served once) held by a child
// process, the server's RSS growth, and signed requests on other
// connections at 1000/s while they are held.
void IdleConnections(Context& ctx) {
  Results& res = ctx.results;
  const Config& c = ctx.config;
  const uint64_t n = c.idle_connections;
  const double rate = 1000;
  const uint64_t signed_count = 3000;  // 3 s at the rate
  std::vector<sim::Outgoing> outgoing = Outgoing(ctx, 2 * signed_count);
  if (outgoing.size() < 2 * signed_count) Die("idle connections: pool too small");
  std::vector<sim::Outgoing> warm(outgoing.begin(), outgoing.begin() + signed_count);
  std::vector<sim::Outgoing> during(outgoing.begin() + signed_count, outgoing.end());
  Server server(ctx, "http-idle", c.http_connections);
  const sim::SenderOptions so = SignedSender(server.port(), 8, rate);
  // The same traffic once before, so that the reading compares a server that
  // has served (its workers' stacks, the store's caches) with itself.
  (void)sim::Send(warm, so);
  const double before = SelfRssMib();
  char hold[32];
  std::snprintf(hold, sizeof hold, "%.0f", 10.0 + static_cast<double>(n) / 2000);
  const std::string cmd = "'" + c.self_exe + "' --child idle --child-port " +
                          std::to_string(server.port()) + " --child-events " + std::to_string(n) +
                          " --child-hold-seconds " + hold;
  FILE* child = ::popen(cmd.c_str(), "r");
  if (child == nullptr) Die("cannot start the idle-connection child");
  char line[512];
  std::string held_line, open_line;
  if (std::fgets(line, sizeof line, child) != nullptr) held_line = line;
  const double held_rss = SelfRssMib();
  sim::SendReport r = sim::Send(during, so);
  const double after_rss = SelfRssMib();
  if (std::fgets(line, sizeof line, child) != nullptr) open_line = line;
  ::pclose(child);
  if (!ResultField(held_line, "held") || !ResultField(open_line, "still_open")) {
    Die("idle-connection child: " + held_line + open_line);
  }
  res.Set("idle_connections_target", static_cast<double>(n));
  res.Set("idle_held", *ResultField(held_line, "held"));
  res.Set("idle_answered", *ResultField(held_line, "answered"));
  res.Set("idle_open_seconds", *ResultField(held_line, "open_seconds"));
  res.Set("idle_still_open", *ResultField(open_line, "still_open"));
  // Those not open: answered unasked (an HTTP-layer refusal), closed, reset.
  res.Set("idle_closed_answered", ResultField(open_line, "closed_answered").value_or(0));
  res.Set("idle_closed_eof", ResultField(open_line, "closed_eof").value_or(0));
  res.Set("idle_closed_error", ResultField(open_line, "closed_error").value_or(0));
  if (res.Get("idle_still_open") < res.Get("idle_held"))
    Log("idle: not open: %s", open_line.c_str());
  res.Set("idle_rss_before_mib", before);
  res.Set("idle_rss_growth_mib", held_rss - before);
  res.Set("idle_rss_growth_after_signed_mib", after_rss - before);
  res.Set("idle_signed_sent", static_cast<double>(during.size()));
  res.Set("idle_signed_ok", static_cast<double>(r.attempts_by_status[200]));
  res.Set("idle_signed_p99_ms", sim::Quantile(r.latencies, 0.99) * 1e3);
  Log("idle: %.0f held (%.0f answered, %.0f still open after the hold), server RSS %.1f -> %.1f "
      "MiB (+%.1f), +%.1f after %zu signed at %.0f/s: %" PRIu64 " answered 200, p99 %.2f ms",
      res.Get("idle_held"), res.Get("idle_answered"), res.Get("idle_still_open"), before, held_rss,
      held_rss - before, after_rss - before, during.size(), rate, r.attempts_by_status[200],
      res.Get("idle_signed_p99_ms"));
}

}  // namespace

int ChildSteady(const std::string& dir, const std::string& input, double rate, int connections) {
  std::vector<sim::Outgoing> outgoing;
  {
    std::ifstream in(input, std::ios::binary);
    std::string body;
    while (std::getline(in, body)) {
      const std::string id = EventIdOf(body);
      outgoing.push_back(sim::Outgoing{Delivery{{{"X-RR-Event-Id", id}}, std::move(body)}});
    }
    if (outgoing.empty()) Die("steady child: no deliveries in " + input);
  }
  Server server(dir, connections);
  const sim::SenderOptions so = SignedSender(server.port(), connections, rate);
  std::optional<ProfileScope> profile(std::in_place, "steady");
  sim::SendReport r = sim::Send(outgoing, so);
  profile.reset();
  std::printf("RESULT attempts=%" PRIu64 " delivered=%" PRIu64
              " seconds=%.6f p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f\n",
              static_cast<uint64_t>(r.attempts), static_cast<uint64_t>(r.delivered), r.seconds,
              sim::Quantile(r.latencies, 0.5) * 1e6, sim::Quantile(r.latencies, 0.99) * 1e6,
              sim::Quantile(r.latencies, 0.999) * 1e6, sim::Quantile(r.latencies, 1.0) * 1e6);
  return 0;
}

void RunHttpFigures(Context& ctx) {
  if (!ctx.config.Runs("http")) return;
  if (HaveWrk(ctx.config.wrk)) {
    WrkThroughput(ctx, "http", Durability::kSync);
    WrkThroughput(ctx, "http_buffered", Durability::kBuffered);
    FrontEndCeiling(ctx);
  } else {
    Log("wrk not found (%s): using the project's sender for throughput", ctx.config.wrk.c_str());
    SenderThroughput(ctx);
  }
  SteadyLatency(ctx);
  IdleConnections(ctx);
}

}  // namespace eventfold::benchdrv
