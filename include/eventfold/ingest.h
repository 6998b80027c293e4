// Deliveries and ingest outcomes.
//
// A Delivery is what a webhook sender sent: header pairs and the raw body
// bytes. Ingesting it yields an IngestResult: the outcome, the HTTP status a
// receiver must answer (docs/SPEC.md §3) and a message that, for every refusal, names
// the field and the reason.
//
// Plain value types; no internal synchronization.

#ifndef EVENTFOLD_INGEST_H_
#define EVENTFOLD_INGEST_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eventfold/event.h"

namespace eventfold {

// Header name/value pairs as received; names compare case-insensitively.
using Headers = std::vector<std::pair<std::string, std::string>>;

// The value of header `name` (case-insensitive), or nullopt.
std::optional<std::string_view> FindHeader(const Headers& headers, std::string_view name);

struct Delivery {
  Headers headers;
  std::string body;
  // When a receiver took the delivery, microseconds since the epoch; stored
  // as the event's received_at. 0 (default): the store's clock at ingest.
  // Cluster mode sets it to the publishing receiver's time, so a partition
  // store records when the delivery arrived, not when it was folded.
  int64_t received_at = 0;
};

// Stored in records and metrics: never renumber, only append.
enum class Outcome : uint8_t {
  kAccepted = 0,      // new event durably stored
  kDuplicate = 1,     // same event_id already stored with the same identity
  kConflict = 2,      // same event_id, different type/occurred_at/entity
  kInvalid = 3,       // malformed body or headers
  kUnauthorized = 4,  // signature missing or invalid
  kTooLarge = 5,      // body over the size limit
  kOverloaded = 6,    // ingest queue full
  kStorageError = 7,  // I/O error, disk full, store closing
  // A new outcome goes here, and kOutcomeCount below names it.
};

// The number of Outcome values (0..kOutcomeCount-1), for arrays indexed by
// outcome; derived from the last enumerator so a table cannot fall behind.
inline constexpr size_t kOutcomeCount = static_cast<size_t>(Outcome::kStorageError) + 1;

// "accepted", "duplicate", "conflict", ...
std::string_view OutcomeName(Outcome outcome);

// The HTTP status docs/SPEC.md §3 assigns to an outcome.
int HttpStatus(Outcome outcome);

struct [[nodiscard]] IngestResult {
  Outcome outcome = Outcome::kInvalid;
  std::string message;              // empty on acceptance; otherwise field and reason
  std::string event_id;             // when the body had a readable one
  std::optional<EntityRef> entity;  // when routed under the store's profile

  int http_status() const { return HttpStatus(outcome); }
  // Small JSON answer for a receiver: {"status":"accepted"} or
  // {"status":"invalid","error":"occurred_at: ..."}.
  std::string ResponseBody() const;
};

}  // namespace eventfold

#endif  // EVENTFOLD_INGEST_H_
