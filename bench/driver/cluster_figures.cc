// Cluster mode (docs/CLUSTER.md): signed HTTP → a receiver over a cluster
// sink → JetStream (3 local nats-server nodes, R=3) → 2 fold workers, all on
// this machine, beside the single-node `http` figures of the same run.
//
//   cluster_acks_per_s       the project's sender, unpaced, 64 connections:
//                            2xx answers per second (each one a JetStream
//                            publish acknowledged by a quorum)
//   cluster_p50_ms/p99_ms    ack latency of that run
//   cluster_steady_p50_ms/p99_ms  ack latency at a steady 1k/s (latency from
//                            each delivery's scheduled send time)
//   cluster_fold_lag_ms      end-to-end fold lag: from the last ack of the
//                            steady run until both workers have folded and
//                            acknowledged everything (polled every 20 ms)
//   cluster_steady_max_lag   the most messages not yet folded, sampled
//                            every 100 ms during the steady run
//
// Needs nats-server (scripts/bootstrap.sh installs it); skipped without it
// and in --quick runs unless asked for with --only cluster.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "bench/driver/driver.h"
#include "eventfold/cluster.h"
#include "eventfold/http_server.h"
#include "eventfold/receiver.h"
#include "tests/cluster/nats_cluster.h"
#include "tools/sender.h"

namespace eventfold::benchdrv {
namespace {

constexpr const char* kSecret = "eventfold-bench-signing-secret";
constexpr const char* kPath = "/webhooks/receiptroller";

void Skip(Context& ctx, const std::string& why) {
  Log("cluster: skipped: %s", why.c_str());
  ctx.results.notes["cluster"] = "skipped: " + why;
}

// Messages not yet folded and acknowledged over all partitions; -1 when the
// status cannot be read.
int64_t Lag(const ClusterOptions& cluster) {
  Result<ClusterStatus> st = ReadClusterStatus(cluster);
  if (!st.ok()) return -1;
  int64_t lag = 0;
  for (const PartitionStatus& p : st->partitions) {
    if (p.owner.empty()) return -1;
    lag += static_cast<int64_t>(p.lag);
  }
  return lag;
}

std::string EventIdOf(const std::string& body) {
  const std::string needle = "\"event_id\":\"";
  const size_t at = body.find(needle);
  if (at == std::string::npos) return "";
  const size_t start = at + needle.size();
  return body.substr(start, body.find('"', start) - start);
}

std::vector<sim::Outgoing> Slice(Context& ctx, size_t first, uint64_t n) {
  n = std::min<uint64_t>(n, ctx.pool.bodies.size() - first);
  std::vector<sim::Outgoing> out;
  for (uint64_t i = 0; i < n; ++i) {
    const std::string& body = ctx.pool.bodies[first + i];
    out.push_back(sim::Outgoing{Delivery{{{"X-RR-Event-Id", EventIdOf(body)}}, body}});
  }
  return out;
}

}  // namespace

void RunClusterFigures(Context& ctx) {
  const Config& c = ctx.config;
  if (!c.Runs("cluster")) return;
  if (c.quick && !c.only.count("cluster")) {
    Skip(ctx, "not in --quick runs (3 nats-server nodes); add --only cluster");
    return;
  }
  Results& res = ctx.results;
  test_util::NatsCluster nats;
  if (std::string err = nats.Start(); !err.empty()) {
    Skip(ctx, "no JetStream cluster: " + err.substr(0, 200));
    return;
  }
  ClusterOptions cluster;
  cluster.urls = {nats.Url(0), nats.Url(1), nats.Url(2)};
  cluster.stream = "bench";
  ClusterInitOptions init;
  init.partitions = 8;
  init.replicas = 3;
  if (Result<ClusterLayout> l = InitCluster(cluster, init, Profile::ReceiptRoller()); !l.ok()) {
    Skip(ctx, "cluster init: " + l.status().ToString());
    return;
  }
  ClusterSinkOptions sink_options;
  Result<std::unique_ptr<IngestSink>> sink = OpenClusterSink(cluster, sink_options);
  if (!sink.ok()) Die("cluster sink: " + sink.status().ToString());
  ReceiverOptions ro;
  ro.secrets = {kSecret};
  Result<std::unique_ptr<Receiver>> rx = Receiver::Make(sink->get(), ro);
  if (!rx.ok()) Die("receiver: " + rx.status().ToString());
  HttpServerOptions so;
  so.workers = c.http_connections + 8;
  HttpServer server(rx->get(), so);
  if (Status st = server.Start(); !st.ok()) Die("http server: " + st.ToString());
  std::vector<std::unique_ptr<FoldWorker>> workers;
  for (const char* id : {"a", "b"}) {
    FoldWorkerOptions fo;
    fo.data_dir = (c.scratch / ("cluster-" + std::string(id))).string();
    fo.worker_id = id;
    Result<std::unique_ptr<FoldWorker>> w = FoldWorker::Start(cluster, fo);
    if (!w.ok()) Die("fold worker: " + w.status().ToString());
    workers.push_back(std::move(*w));
  }

  sim::SenderOptions send;
  send.port = server.port();
  send.path = kPath;
  send.secret = kSecret;
  send.connections = c.http_connections;
  size_t next = c.prefill_events;

  // Throughput: unpaced, sized for about http_seconds at a few thousand/s.
  std::vector<sim::Outgoing> burst =
      Slice(ctx, next, static_cast<uint64_t>(3000 * std::max(1.0, c.http_seconds)));
  next += burst.size();
  sim::SendReport r = sim::Send(burst, send);
  res.Set("cluster_acks_per_s", static_cast<double>(r.delivered) / r.seconds);
  RecordLatencies(res, "cluster", r.latencies);
  res.Set("cluster_errors", static_cast<double>(r.attempts - r.delivered));
  const auto drained = [&](double limit_s) {
    const auto start = std::chrono::steady_clock::now();
    while (Lag(cluster) != 0) {
      if (std::chrono::steady_clock::now() - start > std::chrono::duration<double>(limit_s)) {
        return -1.0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  res.Set("cluster_burst_fold_catchup_s", drained(300));

  // Steady 1k/s: ack latency, the fold lag sampled while it runs, and the
  // time from the last ack until everything is folded.
  std::vector<sim::Outgoing> steady =
      Slice(ctx, next, static_cast<uint64_t>(c.steady_rate * c.steady_seconds));
  send.rate_per_second = c.steady_rate;
  std::atomic<bool> sending{true};
  std::atomic<int64_t> max_lag{0};
  std::thread sampler([&] {
    while (sending.load()) {
      const int64_t lag = Lag(cluster);
      if (lag > max_lag.load()) max_lag.store(lag);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  sim::SendReport s = sim::Send(steady, send);
  sending.store(false);
  sampler.join();
  res.Set("cluster_fold_lag_ms", drained(300) * 1e3);
  res.Set("cluster_steady_rate_achieved", static_cast<double>(s.attempts) / s.seconds);
  RecordLatencies(res, "cluster_steady", s.latencies);
  res.Set("cluster_steady_max_lag", static_cast<double>(max_lag.load()));
  res.Set("cluster_steady_errors", static_cast<double>(steady.size() - s.delivered));
  res.notes["cluster"] =
      "1 receiver (64 connections) -> 3 nats-server nodes R=3, 8 partitions -> "
      "2 fold workers, all on this machine";
  Log("cluster: %.0f acks/s (p50 %.2f ms, p99 %.2f ms); steady %.0f/s: p50 %.2f ms, p99 %.2f "
      "ms, max lag %.0f, fold lag %.0f ms",
      res.Get("cluster_acks_per_s"), res.Get("cluster_p50_ms"), res.Get("cluster_p99_ms"),
      c.steady_rate, res.Get("cluster_steady_p50_ms"), res.Get("cluster_steady_p99_ms"),
      res.Get("cluster_steady_max_lag"), res.Get("cluster_fold_lag_ms"));
  for (auto& w : workers) w->Stop();
  server.Stop();
}

}  // namespace eventfold::benchdrv
