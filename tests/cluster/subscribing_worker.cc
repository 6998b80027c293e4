// A fold worker process that embeds a subscription, for the cluster
// subscription test (cluster_subscription_test.cc): an application's
// `eventfold fold` with a ChangeHandler, which the test can SIGKILL.
//
//   subscribing_worker URLS DATA_DIR WORKER_ID HANDLED_FILE STATUS_FILE
//
// Every handled change is appended to HANDLED_FILE as one line
// "<partition> <seq> <entity> <id> <state> <event_id>,<event_id>..." with one
// write(2) on an O_APPEND descriptor, so a SIGKILL leaves whole lines. About
// every 100 ms STATUS_FILE is replaced (write, rename) by
// "owned=<k>,<k>... backlog=<n>": the partitions owned and the changes the
// subscription has not finished. SIGTERM or SIGINT stops the worker cleanly.

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>

#include "eventfold/cluster.h"

namespace {

using eventfold::Change;
using eventfold::Status;

void WriteStatus(const std::string& path, const eventfold::FoldWorker& worker) {
  std::string owned;
  for (int k : worker.Owned()) owned += (owned.empty() ? "" : ",") + std::to_string(k);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "owned=" << owned << " backlog=" << worker.SubscriptionBacklog() << "\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: subscribing_worker URLS DATA_DIR WORKER_ID HANDLED_FILE STATUS_FILE\n";
    return 2;
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const int fd = ::open(argv[4], O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) {
    std::perror(argv[4]);
    return 2;
  }
  eventfold::Result<std::vector<std::string>> urls = eventfold::ParseClusterUrls(argv[1]);
  if (!urls.ok()) {
    std::cerr << urls.status().ToString() << "\n";
    return 2;
  }
  eventfold::ClusterOptions cluster;
  cluster.urls = std::move(*urls);
  eventfold::FoldWorkerOptions options;
  options.data_dir = argv[2];
  options.worker_id = argv[3];
  eventfold::PartitionSubscription counter;
  counter.options.name = "counter";
  counter.options.threads = 2;
  counter.handler = [fd](int partition, const Change& c) {
    std::string line = std::to_string(partition) + " " + std::to_string(c.seq) + " " + c.entity +
                       " " + c.id + " " + c.state + " ";
    for (size_t i = 0; i < c.event_ids.size(); ++i) line += (i ? "," : "") + c.event_ids[i];
    line += "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return Status::IOError("appending to the handled file");
    }
    return Status::OK();
  };
  options.subscriptions.push_back(std::move(counter));
  eventfold::Result<std::unique_ptr<eventfold::FoldWorker>> worker =
      eventfold::FoldWorker::Start(cluster, options);
  if (!worker.ok()) {
    std::cerr << worker.status().ToString() << "\n";
    return 2;
  }
  std::cerr << "subscribing_worker " << options.worker_id << " started" << std::endl;
  while (true) {
    const timespec tick{0, 100'000'000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) break;
    WriteStatus(argv[5], **worker);
  }
  (*worker)->Stop();
  ::close(fd);
  return 0;
}
