// FoldLog: the lines `eventfold fold` prints on stderr (docs/CLUSTER.md,
// "What it prints"), each "<time> eventfold: <text>". The time is the
// Clock's (FoldWorkerOptions::clock, the worker's own), in RFC 3339 UTC to
// the millisecond, so that a worker's log can be read beside the cluster's
// and other workers' logs, and a test can pin it with a ManualClock.
//
// Thread-safety: one thread uses a FoldLog.

#ifndef EVENTFOLD_TOOLS_FOLD_LOG_H_
#define EVENTFOLD_TOOLS_FOLD_LOG_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "eventfold/cluster.h"

namespace eventfold::cli {

// "2026-12-07T14:03:12.345Z": the instant `micros` (since the Unix epoch),
// UTC, to the millisecond (the rest cut off).
std::string LogTime(int64_t micros);

class FoldLog {
 public:
  // Prints to `*out`, timed by `clock`; both outlive the FoldLog.
  FoldLog(Clock* clock, std::ostream* out) : clock_(clock), out_(out) {}

  // One line, flushed: an operator reads stderr as it comes.
  void Print(std::string_view text);

  // Looks at `worker` (once a second) and prints what changed since the
  // last look: the partitions it owns and keeps warm, then each of its
  // reports (FoldWorker::TakeReports: failures when new or back, notes,
  // "folding again"), in order. The reports' times are the look's.
  void Observe(FoldWorker& worker);

 private:
  Clock* const clock_;
  std::ostream* const out_;
  std::vector<int> owned_, standing_by_;  // as last printed
};

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_FOLD_LOG_H_
