// A simulated ReceiptRoller: generates realistic delivery histories — the
// events a shop's receipts, products and inventory produce, then delivered
// the way a webhook sender delivers them: retried (duplicates), shuffled,
// late, with a few impossible transitions and malformed bodies.
//
// Used by `eventfold demo`, the convergence tests and the benchmarks.
// Deterministic for a given seed. Not thread-safe per object; distinct
// calls are independent.

#ifndef EVENTFOLD_TOOLS_HISTORY_H_
#define EVENTFOLD_TOOLS_HISTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "eventfold/ingest.h"

namespace eventfold::sim {

struct HistoryOptions {
  uint64_t seed = 42;
  int receipts = 200;                       // each issued; some refunded
  int products = 50;                        // each created; some updated, some deleted
  int inventory_updates = 3;                // per product, with increasing versions
  double refund_rate = 0.25;                // share of receipts refunded
  double delete_rate = 0.2;                 // share of products deleted
  double duplicate_rate = 0.3;              // share of events delivered more than once
  double impossible_rate = 0.02;            // events that break the state machine
  int malformed = 5;                        // bodies that must be refused with 400
  int conflicts = 2;                        // reused event_ids with another identity
  int64_t start_micros = 1795000000000000;  // first occurred_at
  size_t target_body_bytes = 600;           // approximate size of a body
};

// What the sender did, for reports (`eventfold demo`) and tests.
struct HistoryStats {
  size_t receipts = 0;          // receipts issued (entities)
  size_t products = 0;          // products created (entities)
  size_t receipt_events = 0;    // receipt.* events, impossible ones included
  size_t product_events = 0;    // product.* events, impossible ones included
  size_t inventory_events = 0;  // inventory.updated events, stale ones included
  size_t impossible = 0;        // events made to break a state machine
  size_t retried = 0;           // events delivered more than once
  size_t retries = 0;           // deliveries beyond each event's first
  size_t with_header = 0;       // valid deliveries carrying X-RR-Event-Id
  size_t late = 0;              // events whose deliveries were moved to the end
};

struct History {
  // Every distinct valid event body, in the order the sender produced them.
  std::vector<std::string> events;
  // What arrives at the receiver: every event at least once, duplicates,
  // shuffled; plus malformed bodies and conflicting reuses of event ids.
  // Each conflicting reuse arrives after the first delivery of its original,
  // so ingesting `deliveries` in this order stores exactly `events`.
  std::vector<Delivery> deliveries;
  size_t malformed = 0;  // deliveries that must be refused as invalid
  size_t conflicts = 0;  // deliveries that must be refused as conflicts
  HistoryStats stats;
};

History GenerateHistory(const HistoryOptions& options);

// Shuffles `deliveries` with a seeded generator (a new arrival order).
// A plain permutation: a conflicting reuse of an event_id may then arrive
// before the original, and becomes the one stored (first one wins).
void Shuffle(std::vector<Delivery>* deliveries, uint64_t seed);

}  // namespace eventfold::sim

#endif  // EVENTFOLD_TOOLS_HISTORY_H_
