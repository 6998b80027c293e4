#include "tools/sender.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <queue>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "core/signature.h"
#include "core/start_thread.h"
#include "core/thread_annotations.h"

namespace eventfold::sim {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Attempt {
  SteadyClock::time_point due;
  size_t index;
  int number;  // 1 = first delivery attempt
  bool operator>(const Attempt& o) const { return due > o.due; }
};

bool Retryable(int status) { return status == 0 || status == 429 || status >= 500; }

class Run {
 public:
  Run(const std::vector<Outgoing>& outgoing, const SenderOptions& options)
      : outgoing_(outgoing), options_(options), rng_(options.seed) {
    report_.final_status.assign(outgoing.size(), 0);
    for (size_t i = 0; i < outgoing.size(); ++i) {
      auto due = start_;
      if (options.rate_per_second > 0) {
        due += std::chrono::duration_cast<SteadyClock::duration>(
            std::chrono::duration<double>(static_cast<double>(i) / options.rate_per_second));
      }
      queue_.push(Attempt{due, i, 1});
    }
    pending_ = outgoing.size();
  }

  SendReport Go() {
    // One connection is the caller's own thread; a thread the system
    // refuses is one connection fewer, never a lost delivery.
    std::vector<std::thread> workers;
    for (int i = 1; i < options_.connections; ++i) {
      std::thread worker;
      if (!StartThread(&worker, "a sender connection", [this] { Work(); }).ok()) break;
      workers.push_back(std::move(worker));
    }
    Work();
    for (auto& t : workers) t.join();
    MutexLock lock(&mu_);  // uncontended: the workers are done
    report_.seconds = std::chrono::duration<double>(SteadyClock::now() - start_).count();
    return std::move(report_);
  }

 private:
  void Work() {
    httplib::Client client(options_.host, options_.port);
    client.set_keep_alive(true);
    client.set_tcp_nodelay(true);  // headers and body go out without Nagle's wait
    const auto timeout = std::chrono::duration<double>(options_.timeout_seconds);
    client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    client.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    while (true) {
      Attempt a;
      {
        MutexLock lock(&mu_);
        while (true) {
          if (pending_ == 0) return;
          if (!queue_.empty() && queue_.top().due <= SteadyClock::now()) break;
          if (queue_.empty() || timekeeper_) {
            cv_.wait(lock.native());
          } else {
            // One idle thread waits for the next attempt's time; the others
            // sleep until handed that role. Every connection waiting with a
            // timeout woke them all at each due time, a herd of wake-ups per
            // request on the cores the receiver under test runs on.
            timekeeper_ = true;
            cv_.wait_until(lock.native(), queue_.top().due);
            timekeeper_ = false;
          }
        }
        a = queue_.top();
        queue_.pop();
        if (!queue_.empty()) cv_.notify_one();  // an idle thread watches the next one
      }
      Deliver(client, a);
    }
  }

  void Deliver(httplib::Client& client, const Attempt& a) {
    const Outgoing& o = outgoing_[a.index];
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    httplib::Headers headers;
    for (const auto& [k, v] : o.delivery.headers) headers.emplace(k, v);
    switch (o.tamper) {
      case Tamper::kNone:
        headers.emplace("X-RR-Signature", SignRr(options_.secret, now, o.delivery.body));
        break;
      case Tamper::kForged:
        headers.emplace("X-RR-Signature",
                        SignRr("not-the-receivers-secret-at-all", now, o.delivery.body));
        break;
      case Tamper::kStale:
        headers.emplace("X-RR-Signature", SignRr(options_.secret, now - 3600, o.delivery.body));
        break;
    }
    // Paced sends measure from the scheduled time, so a stalled receiver
    // shows in the latencies instead of silently slowing the schedule.
    const auto sent = options_.rate_per_second > 0 ? a.due : SteadyClock::now();
    auto res = client.Post(options_.path, headers, o.delivery.body, "application/json");
    const double latency = std::chrono::duration<double>(SteadyClock::now() - sent).count();
    int status = res ? res->status : 0;

    MutexLock lock(&mu_);
    ++report_.attempts;
    ++report_.attempts_by_status[status];
    if (res) report_.latencies.push_back(latency);
    if (status >= 200 && status < 300 && o.lose_first_ack && a.number == 1) {
      ++report_.lost_acks;
      status = 0;  // the answer "never arrived": retry like a timeout
    }
    const bool retry =
        Retryable(status) && a.number <= static_cast<int>(options_.backoff_seconds.size());
    if (retry) {
      ++report_.retries;
      std::uniform_real_distribution<double> jitter(1 - options_.jitter, 1 + options_.jitter);
      const double delay =
          options_.backoff_seconds[a.number - 1] * jitter(rng_) * options_.time_scale;
      queue_.push(Attempt{SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                   std::chrono::duration<double>(delay)),
                          a.index, a.number + 1});
      cv_.notify_all();  // it may be due before what the timekeeper waits for
    } else {
      report_.final_status[a.index] = status;
      if (status >= 200 && status < 300) {
        ++report_.delivered;
      } else {
        ++report_.dead_letters;
      }
      if (--pending_ == 0) cv_.notify_all();  // everyone leaves
    }
  }

  // The schedule's start, and the report's: timed from anywhere later, a
  // run whose threads started late would report less than its schedule
  // took (the last first attempt is due (n - 1) / rate after this).
  const SteadyClock::time_point start_ = SteadyClock::now();
  const std::vector<Outgoing>& outgoing_;
  const SenderOptions& options_;
  Mutex mu_;
  std::condition_variable cv_;
  std::mt19937_64 rng_ GUARDED_BY(mu_);
  std::priority_queue<Attempt, std::vector<Attempt>, std::greater<>> queue_ GUARDED_BY(mu_);
  size_t pending_ GUARDED_BY(mu_) = 0;
  bool timekeeper_ GUARDED_BY(mu_) = false;  // an idle thread waits for the top attempt's time
  SendReport report_ GUARDED_BY(mu_);
};

}  // namespace

SendReport Send(const std::vector<Outgoing>& outgoing, const SenderOptions& options) {
  return Run(outgoing, options).Go();
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i =
      std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())));
  return values[i];
}

}  // namespace eventfold::sim
