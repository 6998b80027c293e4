// The SQL receiver pattern shared by the SQLite and PostgreSQL baselines:
// one transaction per delivery that INSERTs the event_id into a
// processed-ids table (ON CONFLICT DO NOTHING: a duplicate ends there),
// INSERTs the event into an events table (indexed by entity: the per-entity
// log) and UPSERTs the entity's projection. This header holds what both
// derive from a body, decoded with the same decoder eventfold uses, so that
// the two databases are handed the very same rows.

#ifndef EVENTFOLD_BENCH_DRIVER_SQL_PATTERN_H_
#define EVENTFOLD_BENCH_DRIVER_SQL_PATTERN_H_

#include <cstdint>
#include <string>

#include "core/decode.h"

namespace eventfold::benchdrv {

// One delivery's rows. `state` and `fields` are set when the event routes to
// an entity (decoded.entity); `fields` is the event's data as a JSON object,
// merged into the projection's fields by the UPSERT.
struct PatternRow {
  DecodedEvent decoded;
  const std::string* state = nullptr;  // the transition's target state
  std::string fields;
};

// Decodes `body` under the ReceiptRoller profile into `row`; false when the
// body does not decode (the pattern then answers an error).
bool MakePatternRow(const std::string& body, PatternRow* row);

// Microseconds since the epoch (processed_at, received_at, updated_at).
int64_t NowMicros();

}  // namespace eventfold::benchdrv

#endif  // EVENTFOLD_BENCH_DRIVER_SQL_PATTERN_H_
