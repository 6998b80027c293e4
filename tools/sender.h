// A simulated webhook sender over real HTTP, behaving like ReceiptRoller
// (docs/SPEC.md §1): signs every attempt anew (X-RR-Signature), retries on 5xx, 429,
// timeouts and connection errors with exponential backoff — at most 7
// retries over about 32 hours, on a compressed clock — and gives up (dead
// letter) on any other non-2xx. It can also forge or stale-date signatures
// and lose acknowledgements (so a stored event is sent again).
//
// Used by `eventfold demo` and the HTTP benchmarks. Thread-safe per call:
// Send() runs one connection on the calling thread and each other on a
// thread of its own (a thread the system refuses is one connection fewer),
// and returns when every delivery is settled.

#ifndef EVENTFOLD_TOOLS_SENDER_H_
#define EVENTFOLD_TOOLS_SENDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "eventfold/ingest.h"

namespace eventfold::sim {

enum class Tamper {
  kNone,
  kForged,  // signed with a secret the receiver does not know
  kStale,   // signed an hour ago: outside any sane tolerance
};

struct Outgoing {
  Delivery delivery;  // headers (e.g. X-RR-Event-Id) and raw body
  Tamper tamper = Tamper::kNone;
  bool lose_first_ack = false;  // treat the first 2xx as lost: send again
};

struct SenderOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string path = "/webhooks/receiptroller";
  std::string secret;   // signs X-RR-Signature
  int connections = 8;  // concurrent keep-alive connections
  // Delay before retry k, in sender seconds: ReceiptRoller's ~32 h schedule.
  std::vector<double> backoff_seconds = {60, 300, 1800, 7200, 18000, 36000, 50400};
  double time_scale = 1e-5;     // real seconds per sender second
  double jitter = 0.1;          // +/- share of each delay
  double timeout_seconds = 10;  // no answer within this is a failure
  double rate_per_second = 0;   // 0: as fast as possible; else paced sends
  uint64_t seed = 1;
};

struct SendReport {
  std::map<int, uint64_t> attempts_by_status;  // 0 = no answer / connection error
  uint64_t attempts = 0;
  uint64_t retries = 0;
  uint64_t lost_acks = 0;         // 2xx answers the sender pretended to miss
  uint64_t delivered = 0;         // settled with a 2xx
  uint64_t dead_letters = 0;      // settled without one
  std::vector<double> latencies;  // seconds, every answered attempt
  std::vector<int> final_status;  // per delivery, as settled
  double seconds = 0;             // wall time of the whole send
};

SendReport Send(const std::vector<Outgoing>& outgoing, const SenderOptions& options);

// The q-quantile (0..1) of `values` (sorted copy); 0 when empty.
double Quantile(std::vector<double> values, double q);

}  // namespace eventfold::sim

#endif  // EVENTFOLD_TOOLS_SENDER_H_
