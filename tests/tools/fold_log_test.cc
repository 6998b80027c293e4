// What `eventfold fold` prints (tools/fold_log.h): each line carries the
// time on the worker's Clock, and what the worker says is printed when it
// changes, a note once, a failure when it is new or comes back, and a
// recovery once. Driven by a ManualClock and a worker whose answers the
// test sets.

#include "tools/fold_log.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
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
  std::string LastError() const override { return last_error; }
  bool Failing() const override { return failing; }
  uint64_t SubscriptionBacklog() const override { return 0; }

  std::vector<int> owned, standbys;
  std::string last_error;
  bool failing = false;
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

TEST(FoldLog, ANoteIsPrintedOnceAndNoRecoveryFollowsIt) {
  ManualClock clock;
  std::ostringstream out;
  FoldLog log(&clock, &out);
  FakeWorker worker;
  worker.owned = {0, 1};
  log.Observe(worker);
  worker.owned = {1};
  worker.last_error =
      "partition 0 given up: renewing its lease: key p.0 at revision 18 expired or was deleted";
  log.Observe(worker);
  log.Observe(worker);
  EXPECT_EQ(Texts(out.str()),
            (std::vector<std::string>{
                "eventfold: owns partitions 0,1; standby for none",
                "eventfold: owns partitions 1; standby for none",
                "eventfold: partition 0 given up: renewing its lease: key p.0 at revision 18 "
                "expired or was deleted"}));
}

TEST(FoldLog, AFailureIsPrintedWhenNewOrBackAndARecoveryOnce) {
  ManualClock clock;
  std::ostringstream out;
  FoldLog log(&clock, &out);
  FakeWorker worker;
  worker.failing = true;
  worker.last_error = "Unavailable: fetching partition 0: Timeout";
  log.Observe(worker);
  log.Observe(worker);  // the same failure goes on: printed once
  worker.failing = false;
  log.Observe(worker);
  log.Observe(worker);
  worker.failing = true;  // back, with the same text
  log.Observe(worker);
  worker.failing = false;
  log.Observe(worker);
  EXPECT_EQ(Texts(out.str()),
            (std::vector<std::string>{"eventfold: Unavailable: fetching partition 0: Timeout",
                                      "eventfold: folding again: the last round had no failure",
                                      "eventfold: Unavailable: fetching partition 0: Timeout",
                                      "eventfold: folding again: the last round had no failure"}));
}

}  // namespace
}  // namespace eventfold::cli
