// ReportLog: what a fold worker has to say, kept for its log between reads
// (FoldWorker::TakeReports). A worker reports as things happen, several in
// one round (four partitions given up at once, a skip noted on two), and a
// log reads them whenever it looks: keeping only the latest text lost the
// rest.
//
// A failure that goes on is reported once, not every round: while rounds
// fail, a text already kept since the last round without a failure is not
// kept again (JetStream down fails every partition's fetch every round,
// each with its own text). After a failing round, the first round without
// a failure reports "folding again: the last round had no failure", and the
// same failures are kept again if they come back. Bounded: at most
// kMaxKept texts wait; past that the oldest go, and the first kept then
// says how many were dropped; at most kMaxRemembered texts are remembered
// for the dedup (past that, it starts over).
//
// Thread-safety: every method may be called from any thread.

#ifndef EVENTFOLD_CLUSTER_REPORT_LOG_H_
#define EVENTFOLD_CLUSTER_REPORT_LOG_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/thread_annotations.h"

namespace eventfold::cluster {

inline constexpr char kFoldingAgain[] = "folding again: the last round had no failure";

class ReportLog {
 public:
  static constexpr size_t kMaxKept = 100;
  static constexpr size_t kMaxRemembered = 1000;

  // Keeps `text`, unless it was kept since the last round without a
  // failure.
  void Report(std::string text) EXCLUDES(mu_);
  // Ends a round: `failed` says whether it had a failure.
  void RoundEnded(bool failed) EXCLUDES(mu_);
  // The texts kept since the last call, oldest first.
  std::vector<std::string> Take() EXCLUDES(mu_);

 private:
  void Keep(std::string text) REQUIRES(mu_);

  Mutex mu_;
  std::deque<std::string> kept_ GUARDED_BY(mu_);
  uint64_t dropped_ GUARDED_BY(mu_) = 0;  // since the last Take
  // Kept since the last round without a failure.
  std::unordered_set<std::string> seen_ GUARDED_BY(mu_);
  bool failing_ GUARDED_BY(mu_) = false;  // the last round failed
};

}  // namespace eventfold::cluster

#endif  // EVENTFOLD_CLUSTER_REPORT_LOG_H_
