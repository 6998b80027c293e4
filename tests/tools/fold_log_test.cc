// What `eventfold fold` prints (tools/fold_log.h): each line carries the
// time on the worker's Clock; ownership when it changes, then every report
// the worker kept since the last look, in order (which reports it keeps:
// tests/cluster/report_log_test.cc). Driven by a ManualClock and a worker
// whose answers the test sets.

#include "tools/fold_log.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/rfc3339.h"

namespace eventfold::cli {
namespace {

// A FoldWorker that answers what the test sets.
class FakeWorker final : public FoldWorker {
 public:
  std::vector<int> Owned() const override { return owned; }
  std::vector<int> Standbys() const override { return standbys; }
  uint64_t Folded() const override { return 0; }
  void Stop() override {}
  std::string LastError() const override { return reports.empty() ? "" : reports.back(); }
  bool Failing() const override { return false; }
  bool Halted() const override { return false; }
  std::vector<std::string> TakeReports() override { return std::exchange(reports, {}); }
  uint64_t SubscriptionBacklog() const override { return 0; }

  std::vector<int> owned, standbys;
  std::vector<std::string> reports;
};

int64_t At(const char* rfc3339) {
  Result<int64_t> at = ParseRfc3339(rfc3339);
  EXPECT_TRUE(at.ok()) << rfc3339;
  return at.ok() ? *at : 0;
}

TEST(FoldLog, EachLineCarriesTheClocksTimeInRfc3339Utc) {
  ManualClock clock(At("2026-12-07T14:03:12.345678Z"));
  std::ostringstream out;
  FoldLog log(&clock, &out);
  log.Print("folding into DIR");
  clock.Advance(1500 * 1000);
  FakeWorker worker;
  worker.owned = {0, 2};
  log.Observe(worker);
  EXPECT_EQ(out.str(),
            "2026-12-07T14:03:12.345Z eventfold: folding into DIR\n"
            "2026-12-07T14:03:13.845Z eventfold: owns partitions 0,2; standby for none\n");
}

TEST(FoldLog, TheTimeIsUtcCutToTheMillisecond) {
  EXPECT_EQ(LogTime(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(LogTime(999), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(LogTime(1000), "1970-01-01T00:00:00.001Z");
  EXPECT_EQ(LogTime(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(LogTime(At("2026-12-07T15:03:12.999999+01:00")), "2026-12-07T14:03:12.999Z");
}

// Lines without their time, for the tests of what is printed when.
std::vector<std::string> Texts(const std::string& printed) {
  std::vector<std::string> texts;
  std::istringstream in(printed);
  for (std::string line; std::getline(in, line);) {
    const size_t space = line.find(' ');
    EXPECT_EQ(line.substr(0, space).size(), LogTime(0).size()) << line;
    texts.push_back(line.substr(space + 1));
  }
  return texts;
}

// Every report of a look is printed, after the ownership it changed, in
// the order the worker made them; four partitions given up in one round
// are four lines. Nothing is printed twice.
TEST(FoldLog, EveryReportSinceTheLastLookIsPrintedInOrder) {
  ManualClock clock;
  std::ostringstream out;
  FoldLog log(&clock, &out);
  FakeWorker worker;
  worker.owned = {0, 1, 2, 3, 4};
  log.Observe(worker);
  worker.owned = {4};
  for (int k = 0; k < 4; ++k) {
    worker.reports.push_back("partition " + std::to_string(k) +
                             " given up: renewing its lease: key p." + std::to_string(k) +
                             " at revision 18 expired or was deleted");
  }
  log.Observe(worker);
  log.Observe(worker);
  worker.reports = {"Unavailable: fetching partition 4: Timeout",
                    "folding again: the last round had no failure"};
  log.Observe(worker);
  EXPECT_EQ(Texts(out.str()),
            (std::vector<std::string>{
                "eventfold: owns partitions 0,1,2,3,4; standby for none",
                "eventfold: owns partitions 4; standby for none",
                "eventfold: partition 0 given up: renewing its lease: key p.0 at revision 18 "
                "expired or was deleted",
                "eventfold: partition 1 given up: renewing its lease: key p.1 at revision 18 "
                "expired or was deleted",
                "eventfold: partition 2 given up: renewing its lease: key p.2 at revision 18 "
                "expired or was deleted",
                "eventfold: partition 3 given up: renewing its lease: key p.3 at revision 18 "
                "expired or was deleted",
                "eventfold: Unavailable: fetching partition 4: Timeout",
                "eventfold: folding again: the last round had no failure"}));
}

}  // namespace
}  // namespace eventfold::cli
