// Per-thread simdjson scratch: an On-Demand parser and a padded input
// buffer, reused from call to call so that parsing a document allocates
// nothing once a thread has seen its largest input.
//
// Both are thread-local buffers, not shared state: stores and tools on
// different threads never touch each other's. A caller must be done with a
// document (and every view into it) before it, or anything it calls,
// parses again on the same thread.

#ifndef EVENTFOLD_CORE_JSON_SCRATCH_H_
#define EVENTFOLD_CORE_JSON_SCRATCH_H_

#include <simdjson.h>

#include <string_view>

namespace eventfold {

// This thread's parser.
simdjson::ondemand::parser& ThreadJsonParser();

// `prefix` + `text` + `suffix` in this thread's buffer, with the padding
// simdjson reads past the end; valid until the next call on this thread.
simdjson::padded_string_view ThreadPadded(std::string_view prefix, std::string_view text,
                                          std::string_view suffix);

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_JSON_SCRATCH_H_
