// RFC 3339 timestamps <-> int64 microseconds since the Unix epoch, UTC.
//
// Accepted: "YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|+hh:mm|-hh:mm)", 'T' and 'Z' in
// either case, leap second 60 (rolls into the next minute). Refused with a
// reason: any other shape, an invalid calendar date (2026-02-30), hours,
// minutes or offsets out of range, more than 9 fraction digits. Fraction
// digits past the sixth are truncated.

#ifndef EVENTFOLD_CORE_RFC3339_H_
#define EVENTFOLD_CORE_RFC3339_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "eventfold/status.h"

namespace eventfold {

// On failure the status message is the reason alone (no field name).
Result<int64_t> ParseRfc3339(std::string_view text);

// "YYYY-MM-DDTHH:MM:SS.ffffffZ", or with `offset_minutes` != 0 the same
// instant as local time at that offset: "...ffffff+07:00".
std::string FormatRfc3339(int64_t micros, int offset_minutes = 0);

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_RFC3339_H_
