// Quarantine: the deliveries a store refused (400, 401, 409, 413), kept for
// operators because the sender will not retry them. Reached through
// Store::quarantine(); valid while its Store lives.
//
// Best effort by design: keeping a refused delivery never delays or fails an
// acknowledgement, so a write here is not synced and the oldest entries are
// dropped past Options::quarantine_max_entries.
//
// Thread-safety: every method may be called from any thread.

#ifndef EVENTFOLD_QUARANTINE_H_
#define EVENTFOLD_QUARANTINE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "eventfold/ingest.h"
#include "eventfold/status.h"

namespace eventfold {

// A refused delivery, as kept in the quarantine.
struct RefusedDelivery {
  uint64_t seq = 0;         // quarantine order
  int64_t received_at = 0;  // microseconds since the epoch
  Outcome outcome = Outcome::kInvalid;
  int status = 0;           // HTTP status answered
  std::string reason;       // field and reason
  Headers headers;          // without credentials or signatures
  std::string body_prefix;  // the first kQuarantineBodyBytes of the body
  uint64_t body_bytes = 0;  // the whole body's size
};

inline constexpr size_t kQuarantineBodyBytes = 1024;
// Of a refused delivery's headers the quarantine keeps only those an
// operator needs to trace it (content-type, content-length,
// content-encoding, transfer-encoding, user-agent, host, x-forwarded-for,
// x-real-ip, x-request-id, x-rr-event-id, webhook-id, webhook-timestamp):
// at most kQuarantineHeaderCount of them, each value cut to
// kQuarantineHeaderValueBytes.
inline constexpr size_t kQuarantineHeaderCount = 16;
inline constexpr size_t kQuarantineHeaderValueBytes = 256;

class Quarantine {
 public:
  virtual ~Quarantine() = default;

  // Keeps a refused delivery (best effort: not synced). Ingest quarantines
  // its own refusals; a receiver adds those it refuses before ingest (401,
  // 413). The store sets seq, received_at (from its Clock) and status,
  // removes credential headers, and cuts body_prefix to
  // kQuarantineBodyBytes; body_bytes 0 means body_prefix's full size.
  // A Store's quarantine queues it for a writer thread of its own and
  // returns OK; a refusal it cannot keep (over the rate or queue limit, or
  // its database unavailable) is dropped and counted in
  // Counters::quarantine_dropped, and the store stays usable.
  virtual Status Add(RefusedDelivery refused) = 0;

  // Calls `fn` for each quarantined delivery, oldest first, until it
  // returns false. An error status when the quarantine cannot be read.
  virtual Status List(const std::function<bool(const RefusedDelivery&)>& fn) = 0;

  // List() from the delivery after quarantine seq `after_seq`: it seeks
  // there, so a page costs what it returns. Fails as List() does.
  virtual Status ListAfter(uint64_t after_seq,
                           const std::function<bool(const RefusedDelivery&)>& fn) = 0;
};

}  // namespace eventfold

#endif  // EVENTFOLD_QUARANTINE_H_
