// `eventfold subscriptions`, `eventfold dlq list|retry|drop` and
// `eventfold gc` end to end through the real binary, on a store whose
// subscriptions ran in this process.

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "eventfold/subscription.h"
#include "tests/common/run_cli.h"
#include "tests/feed/feed_test_util.h"

#ifndef EVENTFOLD_CLI
#error "EVENTFOLD_CLI must name the eventfold binary"
#endif

namespace eventfold::feed_test {
namespace {

using storage_test::Issued;
using storage_test::Refunded;
using storage_test::ScratchDir;

using test_util::CliResult;
using test_util::Lines;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class FeedCliTest : public ::testing::Test {
 protected:
  CliResult Run(const std::vector<std::string>& args) {
    CliResult r = test_util::RunCli(EVENTFOLD_CLI, args, dir_.path());
    if (!r.started) ADD_FAILURE() << r.err;
    return r;
  }

  std::unique_ptr<Store> Open() {
    Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Options());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  ScratchDir dir_;
};

TEST_F(FeedCliTest, SubscriptionsDeadLettersAndGc) {
  ManualClock clock(kT0);
  std::vector<uint64_t> handled;
  {
    std::unique_ptr<Store> store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_EQ(store->Ingest(Issued("e1", "r1")).outcome, Outcome::kAccepted);    // 1
    ASSERT_EQ(store->Ingest(Issued("e2", "r2")).outcome, Outcome::kAccepted);    // 2
    ASSERT_EQ(store->Ingest(Refunded("e3", "r1")).outcome, Outcome::kAccepted);  // 3
    SubscriptionOptions o;
    o.name = "mail";
    o.threads = 0;
    o.clock = &clock;
    o.max_attempts = 2;
    auto mail = Subscription::Start(store.get(), o, [&](const Change& c) {
      return c.id == "r1" ? Status::Unavailable("smtp down") : Status::OK();
    });
    ASSERT_TRUE(mail.ok()) << mail.status().ToString();
    ASSERT_TRUE((*mail)->RunUntilIdle().ok());
    clock.Advance(kSecond);
    ASSERT_TRUE((*mail)->RunUntilIdle().ok());
    o.name = "audit";
    auto audit = Subscription::Start(store.get(), o, [](const Change&) { return Status::OK(); });
    ASSERT_TRUE(audit.ok());
    ASSERT_TRUE((*audit)->RunUntilIdle().ok());
  }

  CliResult r = Run({"subscriptions", "--data", dir_.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_TRUE(Has(lines[0], R"("name":"audit","checkpoint":3,"last_seq":3,"lag_changes":0,)"))
      << lines[0];
  EXPECT_TRUE(Has(lines[0], R"("lag_seconds":0.000,"parked":0,"redrive_pending":0})")) << lines[0];
  EXPECT_TRUE(Has(lines[1], R"("name":"mail","checkpoint":3,)")) << lines[1];
  EXPECT_TRUE(Has(lines[1], R"("parked":2,"redrive_pending":0})")) << lines[1];

  r = Run({"dlq", "list", "--data", dir_.path(), "--subscription", "mail"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_TRUE(
      Has(lines[0], R"({"subscription":"mail","change":{"seq":1,"entity":"receipt","id":"r1")"))
      << lines[0];
  EXPECT_TRUE(Has(lines[0], R"("attempts":[{"at":"2026-11-18T)")) << lines[0];
  EXPECT_TRUE(Has(lines[0], R"("error":"smtp down"},{"at":)")) << lines[0];
  EXPECT_TRUE(Has(lines[0], R"("redrive":false})")) << lines[0];
  EXPECT_TRUE(Has(lines[1], R"("seq":3,)")) << lines[1];
  EXPECT_TRUE(Has(lines[1], R"("attempts":[],"redrive":false})")) << lines[1];

  // A subscription without dead letters: nothing on stdout, said on stderr.
  r = Run({"dlq", "list", "--data", dir_.path(), "--subscription", "audit"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Has(r.err, "no dead letters in subscription audit")) << r.err;

  r = Run({"dlq", "list", "--data", dir_.path(), "--subscription", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Has(r.err, "no subscription \"nope\"")) << r.err;
  r = Run({"dlq", "retry", "--data", dir_.path(), "--subscription", "mail", "--seq", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.out;  // seq 2 was handled, not parked
  r = Run({"dlq", "drop", "--data", dir_.path(), "--subscription", "mail"});
  EXPECT_EQ(r.exit_code, 2);  // --seq or --all, never by accident
  EXPECT_TRUE(Has(r.err, "--seq N or --all")) << r.err;

  // Retry by the later dead letter: the whole entity, in order.
  r = Run({"dlq", "retry", "--data", dir_.path(), "--subscription", "mail", "--seq", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"marked\":2}\n");
  r = Run({"subscriptions", "--data", dir_.path()});
  EXPECT_TRUE(Has(r.out, R"("parked":2,"redrive_pending":2})")) << r.out;
  {
    std::unique_ptr<Store> store = Open();
    SubscriptionOptions o;
    o.name = "mail";
    o.threads = 0;
    o.clock = &clock;
    auto mail = Subscription::Start(store.get(), o, [&](const Change& c) {
      handled.push_back(c.seq);
      return Status::OK();
    });
    ASSERT_TRUE(mail.ok());
    ASSERT_TRUE((*mail)->RunUntilIdle().ok());
    EXPECT_EQ(handled, (std::vector<uint64_t>{1, 3}));
    ASSERT_EQ(store->Ingest(Issued("e4", "r3")).outcome, Outcome::kAccepted);  // 4
  }
  r = Run({"dlq", "list", "--data", dir_.path(), "--subscription", "mail"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  r = Run({"subscriptions", "--data", dir_.path()});
  lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(Has(lines[1], R"("name":"mail","checkpoint":3,"last_seq":4,"lag_changes":1,)"))
      << lines[1];

  // gc: below both checkpoints (3), never the newest; then the feed starts there.
  r = Run({"gc", "--data", dir_.path(), "--feed-grace", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Has(r.out, R"({"feed_trimmed":2,"feed_first_seq":3,"feed_last_seq":4,)"
                         R"("min_checkpoint":3,"subscriptions":2,"feed_grace":1,"bytes_before":)"))
      << r.out;
  r = Run({"feed", "--data", dir_.path()});
  lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_TRUE(Has(lines[0], R"({"seq":3,)")) << lines[0];

  // Drop one dead letter, then all.
  {
    std::unique_ptr<Store> store = Open();
    Change c;
    c.seq = 4;
    c.entity = "receipt";
    c.id = "r3";
    ASSERT_TRUE(store->feed().Park(ParkedChange{"audit", c, {}, false}).ok());
    c.seq = 3;
    c.id = "r1";
    ASSERT_TRUE(store->feed().Park(ParkedChange{"audit", c, {}, false}).ok());
  }
  r = Run({"dlq", "drop", "--data", dir_.path(), "--subscription", "audit", "--seq", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"dropped\":1}\n");
  r = Run({"dlq", "drop", "--data", dir_.path(), "--subscription", "audit", "--seq", "4"});
  EXPECT_EQ(r.exit_code, 1);
  r = Run({"dlq", "drop", "--data", dir_.path(), "--subscription", "audit", "--all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"dropped\":1}\n");
}

// A change's seq starts at 1. `--seq 0` was taken for no --seq at all (so
// `dlq retry --seq 0` marked every dead letter of the subscription), and
// `--seq -1` for 2^64 - 1 (not found, exit 1): both are usage errors now,
// named by the flag, and nothing is marked or dropped.
TEST_F(FeedCliTest, DlqSeqBelowOneIsAUsageError) {
  ManualClock clock(kT0);
  {
    std::unique_ptr<Store> store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_EQ(store->Ingest(Issued("e1", "r1")).outcome, Outcome::kAccepted);  // 1
    ASSERT_EQ(store->Ingest(Issued("e2", "r2")).outcome, Outcome::kAccepted);  // 2
    SubscriptionOptions o;
    o.name = "mail";
    o.threads = 0;
    o.clock = &clock;
    o.max_attempts = 1;
    auto mail = Subscription::Start(store.get(), o,
                                    [](const Change&) { return Status::Unavailable("smtp down"); });
    ASSERT_TRUE(mail.ok()) << mail.status().ToString();
    ASSERT_TRUE((*mail)->RunUntilIdle().ok());
  }
  CliResult r = Run({"subscriptions", "--data", dir_.path()});
  ASSERT_TRUE(Has(r.out, R"("parked":2,"redrive_pending":0})")) << r.out;

  for (const std::string verb : {"list", "retry", "drop"}) {
    for (const std::string seq : {"0", "-1"}) {
      r = Run({"dlq", verb, "--data", dir_.path(), "--subscription", "mail", "--seq", seq});
      EXPECT_EQ(r.exit_code, 2) << verb << " --seq " << seq << ": " << r.out << r.err;
      EXPECT_TRUE(Has(r.err, "--seq")) << verb << " --seq " << seq << ": " << r.err;
      EXPECT_EQ(r.out, "") << verb << " --seq " << seq;
    }
  }
  r = Run({"subscriptions", "--data", dir_.path()});
  EXPECT_TRUE(Has(r.out, R"("parked":2,"redrive_pending":0})")) << r.out;
}

TEST_F(FeedCliTest, GcCompactsOldTerminalEntities) {
  // Arrival times come from the store's Clock: these arrived ten days ago.
  constexpr int64_t kDay = 24 * 3600 * kSecond;
  ManualClock past(SystemClock()->NowMicros() - 10 * kDay);
  {
    Options o;
    o.clock = &past;
    Result<std::unique_ptr<Store>> store = Store::Open(dir_.path(), o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_EQ((*store)->Ingest(Issued("e1", "r1")).outcome, Outcome::kAccepted);
    ASSERT_EQ((*store)->Ingest(Refunded("e2", "r1")).outcome, Outcome::kAccepted);
    ASSERT_EQ((*store)->Ingest(Issued("e3", "r2")).outcome, Outcome::kAccepted);
  }
  CliResult r = Run({"gc", "--data", dir_.path(), "--tombstone-days", "30"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Has(r.err, "at least 35 days")) << r.err;
  // Each refusal names the flag and its reason; none runs a pass.
  for (const auto& [flag, value, reason] : std::vector<std::array<std::string, 3>>{
           {"--tombstone-days", "nan", "--tombstone-days: not a number of days"},
           {"--tombstone-days", "1e308", "--tombstone-days 1e+308: more than 365000 days"},
           {"--tombstone-days", "106740000", "more than 365000 days"},
           {"--compact-after-days", "inf", "--compact-after-days inf: more than 365000 days"},
           {"--compact-after-days", "-1", "--compact-after-days -1: must not be negative"},
           {"--compact-after-days", "1e-300", "under a microsecond"},
           {"--feed-grace", "-1", "--feed-grace: must not be negative"}}) {
    r = Run({"gc", "--data", dir_.path(), flag, value});
    EXPECT_NE(r.exit_code, 0) << flag << " " << value;
    EXPECT_TRUE(Has(r.err, reason)) << flag << " " << value << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }

  r = Run({"gc", "--data", dir_.path(), "--compact-after-days", "7"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Has(r.out,
                  R"("compact_after_days":7,"tombstone_days":35,"entities_compacted":1,)"
                  R"("events_compacted":2,)"
                  R"("entities_kept_recent":0,"tombstones_written":2,"tombstones_expired":0,)"
                  R"("conflicts_dropped":0,)"))
      << r.out;
  r = Run({"check", "--data", dir_.path()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Has(r.out, R"("tombstones":2,"compacted":1,)")) << r.out;
  r = Run({"show", "--data", dir_.path(), "receipt", "r1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Has(r.out, R"("state":"refunded")")) << r.out;
  // log says what was compacted, and exits 0 with the events that remain.
  r = Run({"log", "--data", dir_.path(), "receipt", "r1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Has(r.out, R"({"entity":"receipt","id":"r1","compacted":{"events":2,"at":")"))
      << r.out;
  EXPECT_TRUE(Has(r.out, R"("snapshot":{"entity":"receipt","id":"r1","state":"refunded",)"))
      << r.out;
  EXPECT_TRUE(Has(r.out, R"("arrival":[],"fold":[]})")) << r.out;

  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Ingest(Refunded("e2", "r1")).outcome, Outcome::kDuplicate);
  EXPECT_EQ(store->Ingest(Refunded("e1", "r1")).outcome, Outcome::kConflict);
}

}  // namespace
}  // namespace eventfold::feed_test
