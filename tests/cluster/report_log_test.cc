// ReportLog (cluster/report_log.h): which of a fold worker's reports reach
// its log. Every distinct report in order; a failure that goes on once; the
// same failure again after a round without a failure; "folding again" once
// after a failing round; at most kMaxKept between reads, saying how many
// were dropped.

#include "cluster/report_log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace eventfold::cluster {
namespace {

using Texts = std::vector<std::string>;

TEST(ReportLog, EveryReportIsKeptInOrderUntilTaken) {
  ReportLog log;
  for (int k = 0; k < 4; ++k) log.Report("partition " + std::to_string(k) + " given up");
  log.Report("partition 2: the consumer skipped 1 message(s)");
  log.RoundEnded(false);
  EXPECT_EQ(log.Take(),
            (Texts{"partition 0 given up", "partition 1 given up", "partition 2 given up",
                   "partition 3 given up", "partition 2: the consumer skipped 1 message(s)"}));
  EXPECT_EQ(log.Take(), Texts{});
}

TEST(ReportLog, AFailureThatGoesOnIsKeptOnceAndARecoveryOnce) {
  ReportLog log;
  const std::string down = "Unavailable: fetching partition 0: Timeout";
  const std::string also = "Unavailable: fetching partition 1: Timeout";
  for (int round = 0; round < 5; ++round) {
    log.Report(down);
    log.Report(also);  // two failures a round, each with its text
    log.RoundEnded(true);
  }
  log.RoundEnded(false);
  log.RoundEnded(false);
  log.Report(down);  // back, with the same text
  log.RoundEnded(true);
  log.RoundEnded(false);
  EXPECT_EQ(log.Take(), (Texts{down, also, kFoldingAgain, down, kFoldingAgain}));
}

// A note made in a round without a failure is no failure: no recovery
// follows it. The same note again later is kept again (a round without a
// failure came between).
TEST(ReportLog, ANoteIsNoFailure) {
  ReportLog log;
  const std::string lost = "partition 0 given up: renewing its lease: key p.0 expired";
  log.Report(lost);
  log.RoundEnded(false);
  log.RoundEnded(false);
  log.Report(lost);
  log.RoundEnded(false);
  EXPECT_EQ(log.Take(), (Texts{lost, lost}));
}

TEST(ReportLog, PastItsBoundTheOldestGoAndTheFirstKeptSaysHowMany) {
  ReportLog log;
  const size_t extra = 7;
  for (size_t i = 0; i < ReportLog::kMaxKept + extra; ++i) log.Report("r" + std::to_string(i));
  const Texts taken = log.Take();
  ASSERT_EQ(taken.size(), ReportLog::kMaxKept + 1);
  EXPECT_EQ(taken[0], "(7 earlier report(s) dropped: over 100 between two reads)");
  EXPECT_EQ(taken[1], "r" + std::to_string(extra));
  EXPECT_EQ(taken.back(), "r" + std::to_string(ReportLog::kMaxKept + extra - 1));
  EXPECT_EQ(log.Take(), Texts{});
}

}  // namespace
}  // namespace eventfold::cluster
