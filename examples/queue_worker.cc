// A queue worker on eventfold: the receiver stores webhooks and answers at
// once; the business work runs in a subscription handler that retries
// internally, parks what keeps failing, and is redriven once fixed.
//
// Run: build/examples/eventfold-example-queue-worker [--data DIR]
//
// What it shows, in about half a second:
//   - ingests ReceiptRoller events; each is acknowledged (200) immediately,
//     whatever the handler does later;
//   - the handler "emails a receipt": for rcp_3 the mail server fails twice
//     and then works (two retries with backoff); for rcp_2 it always fails,
//     so after the last attempt that change is parked, and rcp_2's refund is
//     parked behind it (per-entity order) while other receipts flow on;
//   - the dead letters with every attempt; a redrive once the mail server is
//     fixed; the final checkpoint.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "eventfold/store.h"
#include "eventfold/subscription.h"

namespace {

using eventfold::Change;
using eventfold::Status;

std::string Receipt(const std::string& event_id, const std::string& type,
                    const std::string& receipt_id, const std::string& at) {
  return "{\"event_id\":\"" + event_id + "\",\"type\":\"" + type + "\",\"occurred_at\":\"" + at +
         "\",\"data\":{\"receipt_id\":\"" + receipt_id + "\",\"amount\":1500}}";
}

std::mutex print_mu;
const auto start_time = std::chrono::steady_clock::now();

template <typename... Args>
void Say(const char* format, Args... args) {
  std::lock_guard lock(print_mu);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_time)
          .count();
  std::printf("[%6.1f ms] ", ms);
  std::printf(format, args...);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

// Usage: eventfold-example-queue-worker [--data DIR]
// The store goes to DIR (created, parents too), or to a new directory under
// /tmp; either way it is kept, so `eventfold subscriptions --data DIR` and
// `eventfold dlq list --data DIR --subscription receipt-emails` can look at it.
int main(int argc, char** argv) {
  std::string dir;
  if (argc == 3 && std::string_view(argv[1]) == "--data") {
    dir = argv[2];
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: %s [--data DIR]\n", argv[0]);
    return 2;
  } else {
    char dir_template[] = "/tmp/eventfold-queue-worker-XXXXXX";
    if (!mkdtemp(dir_template)) {
      std::perror("mkdtemp");
      return 1;
    }
    dir = dir_template;
  }
  std::printf("store: %s (kept)\n", dir.c_str());
  int rc = 0;
  {
    eventfold::Options options;
    auto opened = eventfold::Store::Open(dir, options);
    if (!opened.ok()) {
      std::fprintf(stderr, "open: %s\n", opened.status().ToString().c_str());
      return 1;
    }
    eventfold::Store* store = opened->get();

    // The business step. It re-fetches the projection instead of trusting
    // the change (the store may have moved on since), and must be
    // idempotent: a change can come again after a crash.
    std::atomic<bool> mail_server_fixed{false};
    std::map<std::string, int> calls;  // per receipt; the handler runs on 2 threads
    std::mutex calls_mu;
    auto send_receipt_email = [&](const Change& change) -> Status {
      int call = 0;
      {
        std::lock_guard lock(calls_mu);
        call = ++calls[change.id];
      }
      auto projection = store->Get(change.entity, change.id);
      if (!projection.ok()) return projection.status();
      if (change.id == "rcp_2" && !mail_server_fixed) {
        Say("seq %llu %s/%s %s -> %s: attempt %d FAILED (mailbox rejected)",
            static_cast<unsigned long long>(change.seq), change.entity.c_str(), change.id.c_str(),
            change.previous_state.c_str(), change.state.c_str(), call);
        return Status::Unavailable("550 mailbox unavailable for rcp_2's customer");
      }
      if (change.id == "rcp_3" && call <= 2) {
        Say("seq %llu %s/%s: attempt %d FAILED (mail server timeout), will retry",
            static_cast<unsigned long long>(change.seq), change.entity.c_str(), change.id.c_str(),
            call);
        return Status::Unavailable("mail server timed out");
      }
      Say("seq %llu %s/%s %s -> %s: emailed (projection now %s)",
          static_cast<unsigned long long>(change.seq), change.entity.c_str(), change.id.c_str(),
          change.previous_state.c_str(), change.state.c_str(), projection->state.c_str());
      return Status::OK();
    };

    eventfold::SubscriptionOptions so;
    so.name = "receipt-emails";
    so.threads = 2;
    so.max_attempts = 4;                // then park
    so.initial_backoff_micros = 20000;  // 20 ms, 40 ms, 80 ms (real uses seconds)
    so.backoff_multiplier = 2;
    so.jitter = 0.2;
    auto sub = eventfold::Subscription::Start(store, so, send_receipt_email);
    if (!sub.ok()) {
      std::fprintf(stderr, "subscribe: %s\n", sub.status().ToString().c_str());
      return 1;
    }

    // The receiver side: every delivery is stored and answered at once.
    const std::string events[] = {
        Receipt("evt_1", "receipt.issued", "rcp_1", "2026-11-29T10:00:00Z"),
        Receipt("evt_2", "receipt.issued", "rcp_2", "2026-11-29T10:01:00Z"),
        Receipt("evt_3", "receipt.issued", "rcp_3", "2026-11-29T10:02:00Z"),
        Receipt("evt_4", "receipt.refunded", "rcp_1", "2026-11-29T10:03:00Z"),
        Receipt("evt_5", "receipt.issued", "rcp_4", "2026-11-29T10:04:00Z"),
        Receipt("evt_6", "receipt.refunded", "rcp_2", "2026-11-29T10:05:00Z"),
    };
    for (const std::string& body : events) {
      eventfold::IngestResult r = store->Ingest(body);
      Say("ingest %s -> HTTP %d %s", r.event_id.c_str(), r.http_status(), r.ResponseBody().c_str());
    }

    // Everything is finished (handled or parked) once the checkpoint
    // reaches the newest change.
    const uint64_t last = store->feed().LastSeq();
    if (!(*sub)->WaitForCheckpoint(last, 10'000'000)) {
      std::fprintf(stderr, "the worker did not catch up\n");
      rc = 1;
    }
    Say("checkpoint %llu of %llu: every change handled or parked",
        static_cast<unsigned long long>((*sub)->Stats().checkpoint),
        static_cast<unsigned long long>(last));

    Say("dead letters of %s:", so.name.c_str());
    Status st = store->feed().ListParked(so.name, [](const eventfold::ParkedChange& p) {
      std::printf("  %s\n", eventfold::ParkedChangeToJson(p).c_str());
      return true;
    });
    if (!st.ok()) rc = 1;

    // An operator fixes the mail server and redrives (from the command line:
    // eventfold dlq retry --subscription receipt-emails).
    mail_server_fixed = true;
    auto marked = (*sub)->Redrive();
    Say("mail server fixed; redriving %zu dead letter(s)", marked.ok() ? *marked : 0);
    for (int i = 0; i < 1000 && (*sub)->Stats().redriven < (marked.ok() ? *marked : 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    size_t left = 0;
    st = store->feed().ListParked(so.name, [&](const eventfold::ParkedChange&) {
      ++left;
      return true;
    });
    if (!st.ok() || left != 0) rc = 1;

    (*sub)->Stop();
    const eventfold::SubscriptionStats stats = (*sub)->Stats();
    Say("done: checkpoint %llu, %llu handled, %llu failed attempts, %llu parked, %llu redriven, "
        "%zu dead letters left",
        static_cast<unsigned long long>(stats.checkpoint),
        static_cast<unsigned long long>(stats.handled),
        static_cast<unsigned long long>(stats.failed),
        static_cast<unsigned long long>(stats.parked),
        static_cast<unsigned long long>(stats.redriven), left);
  }
  std::printf("look at it with: eventfold subscriptions --data %s\n", dir.c_str());
  return rc;
}
