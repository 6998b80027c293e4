// eventfold fold --cluster URLS --data DIR [--worker-id ID] : a fold worker
// (docs/CLUSTER.md) until SIGTERM or SIGINT, then its leases are given back.

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <sstream>

#include "eventfold/cluster.h"
#include "tools/cli_common.h"
#include "tools/cluster_flags.h"
#include "tools/fold_log.h"

namespace eventfold::cli {
namespace {

struct FoldArgs {
  std::string urls, stream = "eventfold", dir;
  FoldWorkerOptions options;
  double start_timeout_s = 30;  // how long to keep trying while the cluster does not answer
};

// FoldWorker::Start, tried again 250 ms apart while the cluster does not
// answer (a node restarting, or started after this worker), for up to
// `timeout_s`. The retries are here rather than in Start (its own
// start_timeout_ms is set to 0: one attempt) so that the operator is told
// at once what is wrong, and a stop signal ends the wait at once instead of
// after the whole timeout. Sets *stopped when a signal ended it.
Result<std::unique_ptr<FoldWorker>> StartWorker(const ClusterOptions& cluster,
                                                FoldWorkerOptions options, double timeout_s,
                                                const sigset_t& stop_signals, FoldLog* log,
                                                bool* stopped) {
  options.start_timeout_ms = 0;
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  bool told = false;
  while (true) {
    Result<std::unique_ptr<FoldWorker>> worker = FoldWorker::Start(cluster, options);
    if (worker.ok() || worker.status().code() != Status::Code::kUnavailable ||
        std::chrono::steady_clock::now() >= until) {
      return worker;
    }
    if (!told) {
      std::ostringstream text;
      text << worker.status().message() << "; trying again for up to " << timeout_s
           << " s (--start-timeout; SIGINT or SIGTERM stops)";
      log->Print(text.str());
      told = true;
    }
    const timespec quarter{0, 250 * 1000 * 1000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &quarter);
    if (sig == SIGINT || sig == SIGTERM) {
      *stopped = true;
      return worker;
    }
  }
}

int Fold(const FoldArgs& a) {
  std::optional<ClusterOptions> cluster = ClusterFromFlags(a.urls, a.stream);
  if (!cluster) return kExitError;
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  FoldWorkerOptions options = a.options;
  options.data_dir = a.dir;
  // Every line is timed by the worker's own clock.
  FoldLog log(options.clock != nullptr ? options.clock : SystemClock(), &std::cerr);
  bool stopped = false;
  Result<std::unique_ptr<FoldWorker>> worker =
      StartWorker(*cluster, options, a.start_timeout_s, stop_signals, &log, &stopped);
  if (stopped) {
    log.Print("stopped before the cluster answered");
    return kExitError;
  }
  if (!worker.ok()) {
    log.Print(worker.status().ToString());
    return kExitError;
  }
  log.Print("folding into " + a.dir);
  // Report what changed once a second until a stop signal.
  while (true) {
    const timespec second{1, 0};
    const int sig = sigtimedwait(&stop_signals, nullptr, &second);
    if (sig == SIGINT || sig == SIGTERM) break;
    log.Observe(**worker);
    if ((*worker)->Halted()) {
      // Observe printed why; the partitions are the other process's.
      log.Print("stopped: another worker runs with this --worker-id");
      (*worker)->Stop();
      return kExitError;
    }
  }
  log.Print("stopping; giving partitions back");
  (*worker)->Stop();
  return kExitOk;
}

}  // namespace

void AddFoldCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "fold", "cluster mode: fold owned partitions from JetStream into stores under --data");
  auto a = std::make_shared<FoldArgs>();
  AddDataOption(cmd, &a->dir);
  cmd->add_option("--cluster", a->urls, "comma-separated nats:// URLs")->required();
  cmd->add_option("--stream", a->stream, "intake stream name")
      ->check(StreamNameCheck())
      ->capture_default_str();
  cmd->add_option("--worker-id", a->options.worker_id,
                  "name in the lease bucket (default host-pid)");
  cmd->add_option("--batch", a->options.fetch_batch, "messages per fetch and IngestBatch")
      ->capture_default_str();
  cmd->add_option("--batch-bytes", a->options.fetch_max_bytes,
                  "bytes per fetch and IngestBatch, at most (raised to twice the servers' "
                  "max_payload)")
      ->capture_default_str();
  cmd->add_option("--standbys", a->options.standbys,
                  "warm copies wanted per partition (at most live workers - 1; 0: none)")
      ->check(NotNegative())
      ->capture_default_str();
  cmd->add_option("--start-timeout", a->start_timeout_s,
                  "seconds to keep trying while the cluster does not answer at start (0: once)")
      ->check(NotNegative())
      ->capture_default_str();
  cmd->callback([=] { *action = [=] { return Fold(*a); }; });
}

}  // namespace eventfold::cli
