// NDJSON ingest lines: a bare event body, or an envelope
// {"headers":{"Name":"value",...},"body":"<raw body>"} carrying the exact
// bytes and headers a sender delivered (docs/SPEC.md §5.2). Thread-safe.

#ifndef EVENTFOLD_CORE_ENVELOPE_H_
#define EVENTFOLD_CORE_ENVELOPE_H_

#include <string_view>

#include "eventfold/ingest.h"
#include "eventfold/status.h"

namespace eventfold {

// A line is an envelope when it is a JSON object with a string "body" and no
// "event_id". Anything else is taken as a bare body (and refused, if it is
// not one, by decoding). Fails only for an envelope whose headers are not an
// object of strings.
Result<Delivery> ParseNdjsonLine(std::string_view line);
// The same, taking the line's bytes: a bare body becomes the delivery's
// body without a copy. On failure `line` is left as it was (the caller may
// keep it, e.g. in the quarantine).
Result<Delivery> ParseNdjsonLine(std::string&& line);

// True when the line was an envelope (for --secret, which requires one).
bool IsEnvelope(std::string_view line);

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_ENVELOPE_H_
