// Which request headers a kept refusal holds: the store's quarantine and
// cluster mode's refused stream keep the same ones, so that `eventfold
// refused` prints the same whichever kept the refusal. Pure functions.

#ifndef EVENTFOLD_CORE_QUARANTINE_HEADERS_H_
#define EVENTFOLD_CORE_QUARANTINE_HEADERS_H_

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "eventfold/ingest.h"
#include "eventfold/quarantine.h"

namespace eventfold {

// Headers kept with a refused delivery (lower case): what traces it to its
// sender and what it claimed to be. Anything else, credentials under any
// name included, is dropped: an allowlist, not a denylist.
inline constexpr std::array<std::string_view, 12> kQuarantineHeaders = {
    "content-type", "content-length", "content-encoding", "transfer-encoding",
    "user-agent",   "host",           "x-forwarded-for",  "x-real-ip",
    "x-request-id", "x-rr-event-id",  "webhook-id",       "webhook-timestamp"};

// True when a header of this name (in any case) is kept.
inline bool IsQuarantineHeader(std::string_view name) {
  if (name.size() > 32) return false;
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::find(kQuarantineHeaders.begin(), kQuarantineHeaders.end(), lower) !=
         kQuarantineHeaders.end();
}

// Keeps the allowlisted headers in their order, at most
// kQuarantineHeaderCount, each value cut to kQuarantineHeaderValueBytes;
// returns how many were dropped.
inline uint64_t TrimQuarantineHeaders(Headers* headers) {
  Headers kept;
  uint64_t dropped = 0;
  for (auto& [name, value] : *headers) {
    if (!IsQuarantineHeader(name) || kept.size() == kQuarantineHeaderCount) {
      ++dropped;
      continue;
    }
    if (value.size() > kQuarantineHeaderValueBytes) value.resize(kQuarantineHeaderValueBytes);
    kept.emplace_back(std::move(name), std::move(value));
  }
  *headers = std::move(kept);
  return dropped;
}

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_QUARANTINE_HEADERS_H_
