// RFC 3339 (core/rfc3339): any text is parsed or refused with a reason, and
// every accepted instant formats back to text that parses to the same
// instant, at UTC and at a fuzzed offset.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/rfc3339.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = eventfold::ParseRfc3339(text);
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) __builtin_trap();
    return 0;
  }
  const auto utc = eventfold::ParseRfc3339(eventfold::FormatRfc3339(*parsed));
  if (!utc.ok() || *utc != *parsed) __builtin_trap();
  // At an offset within ±23:59 (taken from the input so it varies with it),
  // for instants whose local time cannot leave the years 0000-9999.
  constexpr int64_t kYear0001 = -62135596800LL * 1000000;
  constexpr int64_t kYear9999 = 253370764800LL * 1000000;
  if (*parsed > kYear0001 && *parsed < kYear9999) {
    const int offset = size == 0 ? 0 : static_cast<int>(data[0] * 11 % 2879) - 1439;
    const auto local = eventfold::ParseRfc3339(eventfold::FormatRfc3339(*parsed, offset));
    if (!local.ok() || *local != *parsed) __builtin_trap();
  }
  return 0;
}
