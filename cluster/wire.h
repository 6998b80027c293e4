// The intake message format shared by receivers (which publish) and fold
// workers (which rebuild the Delivery a Store ingests).
//
// The message data is the delivery's body, verbatim. NATS headers carry
// when the receiver took it (Eventfold-Received-At, microseconds since the
// epoch) and the delivery headers the fold reads (SPEC §2's event-id headers,
// X-RR-Event-Id and webhook-id); signatures were checked by the receiver
// and are not forwarded. Pure functions.

#ifndef EVENTFOLD_CLUSTER_WIRE_H_
#define EVENTFOLD_CLUSTER_WIRE_H_

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "eventfold/ingest.h"

namespace eventfold::cluster {

inline constexpr const char* kReceivedAtHeader = "Eventfold-Received-At";

// The delivery headers forwarded to the fold, in their canonical spelling.
inline constexpr const char* kForwardedHeaders[] = {"X-RR-Event-Id", "webhook-id"};

using WireHeaderList = std::vector<std::pair<std::string, std::string>>;

// The NATS headers of an intake message for `headers` taken at `received_at`.
inline WireHeaderList WireHeaders(const Headers& headers, int64_t received_at) {
  WireHeaderList out;
  out.emplace_back(kReceivedAtHeader, std::to_string(received_at));
  for (const char* name : kForwardedHeaders) {
    if (auto v = FindHeader(headers, name)) out.emplace_back(name, std::string(*v));
  }
  return out;
}

// The receiver's time from an Eventfold-Received-At value; 0 (the store
// then uses its own clock) when it is not a positive decimal integer.
inline int64_t ParseReceivedAt(std::string_view value) {
  int64_t at = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), at);
  if (ec != std::errc() || end != value.data() + value.size() || at < 0) return 0;
  return at;
}

}  // namespace eventfold::cluster

#endif  // EVENTFOLD_CLUSTER_WIRE_H_
