// eventfold fold --cluster URLS --data DIR [--worker-id ID] : a fold worker
// (docs/CLUSTER.md) until SIGTERM or SIGINT, then its leases are given back.

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <ctime>
#include <iostream>

#include "eventfold/cluster.h"
#include "tools/cli_common.h"
#include "tools/cluster_flags.h"

namespace eventfold::cli {
namespace {

struct FoldArgs {
  std::string urls, stream = "eventfold", dir;
  FoldWorkerOptions options;
  double start_timeout_s = 30;  // how long to keep trying while the cluster does not answer
};

std::string Join(const std::vector<int>& v) {
  std::string out;
  for (int k : v) out += (out.empty() ? "" : ",") + std::to_string(k);
  return out.empty() ? "none" : out;
}

// FoldWorker::Start, tried again 250 ms apart while the cluster does not
// answer (a node restarting, or started after this worker), for up to
// `timeout_s`. The retries are here rather than in Start (its own
// start_timeout_ms is set to 0: one attempt) so that the operator is told
// at once what is wrong, and a stop signal ends the wait at once instead of
// after the whole timeout. Sets *stopped when a signal ended it.
Result<std::unique_ptr<FoldWorker>> StartWorker(const ClusterOptions& cluster,
                                                FoldWorkerOptions options, double timeout_s,
                                                const sigset_t& stop_signals, bool* stopped) {
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
      std::cerr << "eventfold: " << worker.status().message() << "; trying again for up to "
                << timeout_s << " s (--start-timeout; SIGINT or SIGTERM stops)" << std::endl;
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
  bool stopped = false;
  Result<std::unique_ptr<FoldWorker>> worker =
      StartWorker(*cluster, options, a.start_timeout_s, stop_signals, &stopped);
  if (stopped) {
    std::cerr << "eventfold: stopped before the cluster answered\n";
    return kExitError;
  }
  if (!worker.ok()) {
    std::cerr << "eventfold: " << worker.status().ToString() << "\n";
    return kExitError;
  }
  std::cerr << "eventfold: folding into " << a.dir << std::endl;
  // Report ownership changes once a second until a stop signal.
  std::vector<int> owned, standing_by;
  std::string error;
  bool failing = false;
  while (true) {
    const timespec second{1, 0};
    const int sig = sigtimedwait(&stop_signals, nullptr, &second);
    if (sig == SIGINT || sig == SIGTERM) break;
    std::vector<int> now = (*worker)->Owned(), warm = (*worker)->Standbys();
    if (now != owned || warm != standing_by) {
      owned = now;
      standing_by = warm;
      std::cerr << "eventfold: owns partitions " << Join(owned) << "; standby for "
                << Join(standing_by) << std::endl;
    }
    // A failure is printed when it is new, or when it comes back after a
    // recovery; a recovery is printed once.
    const bool now_failing = (*worker)->Failing();
    if (std::string e = (*worker)->LastError(); e != error || (now_failing && !failing)) {
      error = e;
      if (!error.empty()) std::cerr << "eventfold: " << error << std::endl;
    }
    if (failing && !now_failing) {
      std::cerr << "eventfold: folding again: the last round had no failure" << std::endl;
    }
    failing = now_failing;
  }
  std::cerr << "eventfold: stopping; giving partitions back" << std::endl;
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
  cmd->add_option("--stream", a->stream, "intake stream name")->capture_default_str();
  cmd->add_option("--worker-id", a->options.worker_id,
                  "name in the lease bucket (default host-pid)");
  cmd->add_option("--batch", a->options.fetch_batch, "messages per fetch and IngestBatch")
      ->capture_default_str();
  cmd->add_option("--standbys", a->options.standbys,
                  "warm copies wanted per partition (at most live workers - 1; 0: none)")
      ->capture_default_str();
  cmd->add_option("--start-timeout", a->start_timeout_s,
                  "seconds to keep trying while the cluster does not answer at start (0: once)")
      ->check(NotNegative())
      ->capture_default_str();
  cmd->callback([=] { *action = [=] { return Fold(*a); }; });
}

}  // namespace eventfold::cli
