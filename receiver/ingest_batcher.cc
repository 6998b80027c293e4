#include "receiver/ingest_batcher.h"

#include <utility>

#include "core/start_thread.h"

namespace eventfold::receiver {

IngestBatcher::IngestBatcher(Store* store, size_t threads, size_t max_batch)
    : store_(store), max_batch_(max_batch < 1 ? 1 : max_batch) {
  if (threads < 1) threads = 1;
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    std::thread thread;
    Status st = StartThread(&thread, "the receiver's store batcher", [this] { Run(); });
    if (!st.ok()) {
      // Fewer batchers only store more slowly; none at all answers every
      // delivery 503 (Submit), so its sender retries.
      if (threads_.empty()) not_started_ = st;
      break;
    }
    threads_.push_back(std::move(thread));
  }
}

IngestBatcher::~IngestBatcher() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void IngestBatcher::Submit(Delivery delivery, IngestSink::IngestCallback done) {
  if (!not_started_.ok()) {
    IngestResult refused;
    refused.outcome = Outcome::kStorageError;
    refused.message = not_started_.message();
    done(std::move(refused));
    return;
  }
  bool was_empty = false;
  {
    MutexLock lock(&mu_);
    was_empty = queue_.empty();
    queue_.push_back(Item{std::move(delivery), std::move(done)});
  }
  // A non-empty queue already has a batcher awake or about to take it: the
  // wake-up is paid once per group, not once per delivery.
  if (was_empty) cv_.notify_one();
}

void IngestBatcher::Run() {
  std::vector<Delivery> deliveries;
  std::vector<IngestSink::IngestCallback> callbacks;
  for (;;) {
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !stopping_) cv_.wait(lock.native());
      if (queue_.empty()) return;  // stopping, and nothing is left
      while (!queue_.empty() && deliveries.size() < max_batch_) {
        deliveries.push_back(std::move(queue_.front().delivery));
        callbacks.push_back(std::move(queue_.front().done));
        queue_.pop_front();
      }
      // More than one group is waiting: let another batcher stage the next
      // while this one writes.
      if (!queue_.empty()) cv_.notify_one();
    }
    std::vector<IngestResult> results = store_->IngestBatch(deliveries);
    for (size_t i = 0; i < callbacks.size(); ++i) callbacks[i](std::move(results[i]));
    deliveries.clear();
    callbacks.clear();
  }
}

}  // namespace eventfold::receiver
