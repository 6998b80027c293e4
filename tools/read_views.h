// The text of the CLI's read commands, produced from a Store: shared by the
// commands run with --data and by the admin read API (tools/admin_api.h), so
// `eventfold status --server URL` prints the same bytes as `--data DIR`.
//
// Each function returns whole lines, newline-terminated. Thread-safety: as
// the Store's (any thread).

#ifndef EVENTFOLD_TOOLS_READ_VIEWS_H_
#define EVENTFOLD_TOOLS_READ_VIEWS_H_

#include <cstdint>
#include <string>

#include "eventfold/backup.h"
#include "eventfold/clock.h"
#include "eventfold/store.h"

namespace eventfold::cli {

// `eventfold status`: one JSON object summarizing the store (it scans every
// projection to count them by entity and state); a List error otherwise.
[[nodiscard]] Result<std::string> StatusView(Store& store);

// `eventfold refused`: one refused delivery as its JSON line.
std::string RefusedLine(const RefusedDelivery& r);

// `eventfold subscriptions`: every subscription's checkpoint, lag and dead
// letters, one JSON object a line; lag in time is measured against `clock`.
[[nodiscard]] Result<std::string> SubscriptionsView(Store& store, Clock* clock);

// `eventfold show` and `log` of an entity with no projection: why, one
// reason a line (no trailing newline): the profile has no such entity type,
// or no events name it; and when stored events naming the id are unrouted,
// a line saying so. The command prints each line after "eventfold: ".
std::string NoProjectionText(Store& store, const std::string& entity, const std::string& id);

// Prints each line of `text` to stderr after "eventfold: ", as the commands
// print a reason (NoProjectionText's, or the admin API's error text).
void PrintReasonLines(const std::string& text);

// What `eventfold subscriptions` says on stderr when there are none.
inline constexpr const char* kNoSubscriptionsNote =
    "no subscriptions in this store (a subscriber's first checkpoint creates one)";

// What `eventfold feed` says on stderr (after "eventfold: ") when the first
// change it reads, `first_seq`, comes after `from`, the first seq it was
// asked for: gc trimmed the changes between (the feed has no other gaps).
// Empty when none is missing. Shared so that --data and --server say it
// alike, once, before the first change.
std::string FeedTrimmedNote(uint64_t from, uint64_t first_seq);

// `eventfold backup` and `restore`: the summary line of a verified copy;
// `what` is "backup" or "restore", `where` the directory written.
std::string BackupSummaryLine(const char* what, const BackupSummary& s, const std::string& where);

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_READ_VIEWS_H_
