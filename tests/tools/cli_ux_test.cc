// End-to-end tests of issue 15 through the real `eventfold` binary: nothing
// accepted is invisible (profile mismatch, unrouted events, profile
// switches), `feed --follow` beside ingest, parent directories, and the
// newcomer's command line (help, --pretty, empty lists said so).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/rfc3339.h"
#include "eventfold/clock.h"
#include "eventfold/store.h"
#include "tests/common/run_cli.h"

#ifndef EVENTFOLD_CLI
#error "EVENTFOLD_CLI must name the eventfold binary"
#endif
#ifndef EVENTFOLD_PROFILES_DIR
#error "EVENTFOLD_PROFILES_DIR must name the repository's profiles/"
#endif

namespace {

namespace fs = std::filesystem;

using eventfold::test_util::CliResult;
using eventfold::test_util::Lines;
using eventfold::test_util::ReadFile;
using eventfold::test_util::WriteFile;

const std::string kPayments = std::string(EVENTFOLD_PROFILES_DIR) + "/payments.json";

std::string Receipt(const std::string& event_id, const std::string& type,
                    const std::string& receipt_id) {
  return R"({"event_id":")" + event_id + R"(","type":")" + type +
         R"(","occurred_at":"2026-11-29T10:00:00Z","data":{"receipt_id":")" + receipt_id + R"("}})";
}

const std::string kPayment =
    R"({"event_id":"evt_pay","type":"payment_intent.created","occurred_at":"2026-11-29T10:00:00Z",)"
    R"("data":{"object":{"id":"pi_1"}}})";

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class cli_ux : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    root_ = (fs::temp_directory_path() /
             ("eventfold-ux-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                .string();
    fs::remove_all(root_);
    fs::create_directories(root_);
    data_ = root_ + "/data";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  CliResult Run(const std::vector<std::string>& args) {
    CliResult r = eventfold::test_util::RunCli(EVENTFOLD_CLI, args, root_ + "/cli");
    if (!r.started) ADD_FAILURE() << r.err;
    return r;
  }

  // Starts `eventfold ARGS` with no stdin and its stdout and stderr written
  // to the two files; its pid, or -1 when it could not start.
  static pid_t Spawn(const std::vector<std::string>& args, const std::string& out_path,
                     const std::string& err_path) {
    return eventfold::test_util::SpawnCli(EVENTFOLD_CLI, args, "/dev/null", out_path, err_path);
  }

  std::string File(const std::string& name, const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    const std::string path = root_ + "/" + name;
    WriteFile(path, text);
    return path;
  }

  // Two receipts under the built-in receiptroller profile.
  void IngestReceipts() {
    CliResult r = Run({"ingest", "--data", data_,
                       File("receipts.ndjson", {Receipt("evt_1", "receipt.issued", "rcp_1"),
                                                Receipt("evt_2", "receipt.issued", "rcp_2"),
                                                Receipt("evt_3", "receipt.refunded", "rcp_2")})});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  std::string root_, data_;
};

// Issue 15, case 1: `ingest --profile` on a store with another profile used
// to store the events under the store's profile without a word.
TEST_F(cli_ux, IngestWithAnotherProfileRefusesAndNamesTheReplayCommand) {
  IngestReceipts();
  const std::string pay = File("pay.ndjson", {kPayment});
  CliResult r = Run({"ingest", "--data", data_, "--profile", kPayments, pay});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Contains(r.err, "eventfold replay --data " + data_ + " --profile " + kPayments))
      << r.err;
  EXPECT_TRUE(Contains(r.err, "receiptroller")) << r.err;
  // Nothing was stored: the unrouted count stays 0.
  CliResult status = Run({"status", "--data", data_});
  EXPECT_TRUE(Contains(status.out, "\"unrouted\":0,")) << status.out;
  // A new store takes the profile.
  const std::string fresh = root_ + "/fresh";
  CliResult created = Run({"ingest", "--data", fresh, "--profile", kPayments, pay});
  EXPECT_EQ(created.exit_code, 0) << created.err;
  EXPECT_EQ(Run({"show", "--data", fresh, "payment_intent", "pi_1"}).exit_code, 0);
}

// Issue 15, case 2: an event of an unknown type was accepted and then in no
// output but replay's summary.
TEST_F(cli_ux, UnroutedEventsAreCountedListedAndExplained) {
  const std::string f = File("typo.ndjson", {Receipt("evt_1", "receipt.issued", "rcp_1"),
                                             Receipt("evt_t", "receipt.teleported", "rcp_9"),
                                             Receipt("evt_u", "receipt.teleported", "rcp_1")});
  CliResult ingest = Run({"ingest", "--data", data_, f});
  EXPECT_EQ(ingest.exit_code, 0) << ingest.err;
  EXPECT_EQ(ingest.out,
            "{\"accepted\":3,\"duplicate\":0,\"conflict\":0,\"invalid\":0,\"unauthorized\":0,"
            "\"unrouted\":2}\n");
  EXPECT_TRUE(Contains(ingest.err, "2 accepted events are unrouted")) << ingest.err;

  CliResult status = Run({"status", "--data", data_});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(Contains(status.out, "\"unrouted\":2,")) << status.out;

  CliResult counts = Run({"unrouted", "--data", data_});
  EXPECT_EQ(counts.exit_code, 0) << counts.err;
  EXPECT_EQ(
      counts.out,
      "{\"profile\":\"receiptroller\",\"unrouted\":2,\"types\":{\"receipt.teleported\":2}}\n");
  CliResult list = Run({"unrouted", "--data", data_, "--list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  const std::vector<std::string> lines = Lines(list.out);
  ASSERT_EQ(lines.size(), 2u) << list.out;
  EXPECT_TRUE(lines[0].starts_with(R"({"seq":2,"event_id":"evt_t","type":"receipt.teleported",)"))
      << lines[0];
  EXPECT_TRUE(Contains(lines[0], "receiptroller")) << "the reason names the profile";

  // An id whose only events are unrouted: show and log say so.
  for (const char* cmd : {"show", "log"}) {
    CliResult r = Run({cmd, "--data", data_, "receipt", "rcp_9"});
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_EQ(r.out, "") << cmd;
    EXPECT_TRUE(Contains(r.err, "1 stored event naming \"rcp_9\" is unrouted")) << r.err;
    EXPECT_TRUE(Contains(r.err, "receipt.teleported 1")) << r.err;
  }
  // A real miss says only that.
  CliResult miss = Run({"show", "--data", data_, "receipt", "rcp_404"});
  EXPECT_EQ(miss.exit_code, 1);
  EXPECT_FALSE(Contains(miss.err, "unrouted")) << miss.err;
}

// Issue 15, case 3: a profile switch dropped every projection, exit 0.
TEST_F(cli_ux, ReplayProfileSwitchHasADryRunAndIsRefusedWhenItUnroutesEvents) {
  IngestReceipts();
  const std::string before = Run({"list", "--data", data_}).out;
  ASSERT_FALSE(before.empty());

  CliResult dry = Run({"replay", "--data", data_, "--profile", kPayments, "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(dry.out,
            "{\"dry_run\":true,\"from\":\"receiptroller\",\"to\":\"payments\","
            "\"entities_before\":{\"receipt\":2},\"entities_after\":{},"
            "\"projections_dropped\":{\"receipt\":2},\"projections_added\":{},"
            "\"projections_changed\":{},"
            "\"state_changes\":{\"receipt\":{\"issued -> (none)\":1,\"refunded -> (none)\":1}},"
            "\"unrouted_now\":0,\"unrouted_after\":3,\"newly_unrouted\":3,"
            "\"newly_unrouted_types\":{\"receipt.issued\":2,\"receipt.refunded\":1},"
            "\"newly_routed\":0}\n");
  EXPECT_EQ(Run({"list", "--data", data_}).out, before) << "a dry run changes nothing";

  CliResult refused = Run({"replay", "--data", data_, "--profile", kPayments});
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_EQ(refused.out, "");
  EXPECT_TRUE(
      Contains(refused.err,
               "would leave 3 stored events unrouted that are routed today "
               "(receipt.issued 2, receipt.refunded 1), and drop 2 projections (receipt 2)"))
      << refused.err;
  EXPECT_EQ(Run({"list", "--data", data_}).out, before) << "a refused switch changes nothing";

  CliResult forced = Run({"replay", "--data", data_, "--profile", kPayments, "--force", "--quiet"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_TRUE(Contains(forced.out, "\"unrouted\":3")) << forced.out;
  CliResult show = Run({"show", "--data", data_, "receipt", "rcp_1"});
  EXPECT_EQ(show.exit_code, 1);
  EXPECT_TRUE(Contains(show.err, "profile \"payments\" has no entity \"receipt\"")) << show.err;
  EXPECT_TRUE(Contains(show.err, "is unrouted under profile \"payments\"")) << show.err;
}

// The dry run of a switch that keeps the entity types but routes other
// events: the projections that change state, and the events that become
// unrouted (receipt.refunded) or routed (receipt.teleported).
TEST_F(cli_ux, ReplayDryRunNamesTheProjectionsThatChangeState) {
  const std::string f = File("r.ndjson", {Receipt("evt_1", "receipt.issued", "rcp_1"),
                                          Receipt("evt_2", "receipt.issued", "rcp_2"),
                                          Receipt("evt_3", "receipt.refunded", "rcp_2"),
                                          Receipt("evt_t", "receipt.teleported", "rcp_1")});
  ASSERT_EQ(Run({"ingest", "--data", data_, f}).exit_code, 0);
  const std::string profile = root_ + "/teleport.json";
  WriteFile(profile, R"({"name":"teleport","entities":[{"name":"receipt","key":"data.receipt_id",
    "transitions":[{"type":"receipt.issued","from":["none"],"to":"issued"},
                   {"type":"receipt.teleported","from":["issued"],"to":"teleported"}]}]})");
  const std::string before = Run({"list", "--data", data_}).out;
  CliResult dry = Run({"replay", "--data", data_, "--profile", profile, "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(dry.out,
            "{\"dry_run\":true,\"from\":\"receiptroller\",\"to\":\"teleport\","
            "\"entities_before\":{\"receipt\":2},\"entities_after\":{\"receipt\":2},"
            "\"projections_dropped\":{},\"projections_added\":{},"
            "\"projections_changed\":{\"receipt\":2},"
            "\"state_changes\":{\"receipt\":{\"issued -> teleported\":1,\"refunded -> issued\":1}},"
            "\"unrouted_now\":1,\"unrouted_after\":1,\"newly_unrouted\":1,"
            "\"newly_unrouted_types\":{\"receipt.refunded\":1},\"newly_routed\":1}\n");
  EXPECT_EQ(Run({"list", "--data", data_}).out, before) << "a dry run changes nothing";
  EXPECT_FALSE(fs::exists(data_ + ".verify")) << "the rebuild aside is removed";
  CliResult refused = Run({"replay", "--data", data_, "--profile", profile});
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_TRUE(Contains(refused.err,
                       "would leave 1 stored event unrouted that is routed today "
                       "(receipt.refunded 1);"))
      << refused.err;
}

// Issue 15, case 4: `feed --follow` held the store's lock, so nothing could
// ingest while it followed.
TEST_F(cli_ux, FeedFollowLetsIngestRunAndPrintsWhatItStores) {
  IngestReceipts();
  const std::string out_path = root_ + "/feed.out", err_path = root_ + "/feed.err";
  const pid_t pid = Spawn({"feed", "--data", data_, "--follow"}, out_path, err_path);
  ASSERT_GT(pid, 0);
  // Waits (bounded) until the follower's output has `lines` lines.
  auto wait_for_lines = [&](size_t lines) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (Lines(ReadFile(out_path)).size() < lines &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Lines(ReadFile(out_path)).size();
  };
  // Two changes: rcp_1, and rcp_2 (issued and refunded in one batch).
  EXPECT_EQ(wait_for_lines(2), 2u) << ReadFile(err_path);
  // While it follows, ingest opens the store and writes.
  // The follower holds the store only while it reads, so an ingest gets in
  // between; on a loaded machine its own 3 s busy wait may not be enough,
  // so the test retries it (bounded): before, no attempt could ever succeed.
  const std::string more_file = File("more.ndjson", {Receipt("evt_4", "receipt.issued", "rcp_4")});
  CliResult more = Run({"ingest", "--data", data_, more_file});
  for (int attempt = 0; attempt < 20 && more.exit_code == 2 && Contains(more.err, "Busy");
       ++attempt) {
    more = Run({"ingest", "--data", data_, more_file});
  }
  EXPECT_EQ(more.exit_code, 0) << more.err;
  EXPECT_EQ(wait_for_lines(3), 3u) << ReadFile(err_path);
  EXPECT_TRUE(Contains(ReadFile(out_path), "rcp_4"));
  kill(pid, SIGTERM);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(err_path);
}

// Whether every line of `err` begins with an RFC 3339 UTC time, to the
// millisecond, within [from, to] on the system clock (the command's clock),
// and then "eventfold: ".
::testing::AssertionResult TimedLines(const std::string& err, int64_t from, int64_t to) {
  const std::vector<std::string> lines = Lines(err);
  if (lines.empty()) return ::testing::AssertionFailure() << "nothing printed";
  for (const std::string& line : lines) {
    const size_t space = line.find(' ');
    const std::string time = line.substr(0, space);
    eventfold::Result<int64_t> at = eventfold::ParseRfc3339(time);
    if (space == std::string::npos || time.size() != 24 || time.back() != 'Z' || !at.ok() ||
        *at < from / 1000 * 1000 || *at > to || line.compare(space + 1, 11, "eventfold: ") != 0) {
      return ::testing::AssertionFailure() << "not a line timed within the run: " << line;
    }
  }
  return ::testing::AssertionSuccess();
}

// A fold worker whose cluster does not answer (here: nothing listens on
// the port) says so at its first failure, and a stop signal ends its wait
// for the cluster at once rather than after --start-timeout. Each line it
// prints is timed.
TEST_F(cli_ux, FoldSaysTheClusterDoesNotAnswerAndStopsOnASignal) {
  const std::string nowhere = "nats://127.0.0.1:1";
  const int64_t before = eventfold::SystemClock()->NowMicros();
  CliResult once =
      Run({"fold", "--cluster", nowhere, "--data", root_ + "/fold", "--start-timeout", "0"});
  EXPECT_EQ(once.exit_code, 2) << once.err;
  EXPECT_TRUE(Contains(once.err, "connecting to " + nowhere)) << once.err;
  EXPECT_FALSE(Contains(once.err, "trying again")) << once.err;
  EXPECT_TRUE(TimedLines(once.err, before, eventfold::SystemClock()->NowMicros()));

  const std::string err_path = root_ + "/fold.err";
  // A timeout far beyond the waits below: only the signal can end it.
  const pid_t pid =
      Spawn({"fold", "--cluster", nowhere, "--data", root_ + "/fold", "--start-timeout", "600"},
            "/dev/null", err_path);
  ASSERT_GT(pid, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!Contains(ReadFile(err_path), "trying again for up to 600 s") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(Contains(ReadFile(err_path), "connecting to " + nowhere)) << ReadFile(err_path);
  kill(pid, SIGTERM);
  int status = 0;
  bool exited = false;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(exited = waitpid(pid, &status, WNOHANG) == pid) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(exited) << "still waiting for the cluster 60 s after SIGTERM";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2);
  EXPECT_TRUE(Contains(ReadFile(err_path), "stopped before the cluster answered"))
      << ReadFile(err_path);
  EXPECT_TRUE(TimedLines(ReadFile(err_path), before, eventfold::SystemClock()->NowMicros()));
}

// Issue 15, case 5: a store under missing parent directories.
TEST_F(cli_ux, IngestCreatesMissingParentDirectories) {
  const std::string deep = root_ + "/a/b/c/webhooks";
  CliResult r = Run({"ingest", "--data", deep,
                     File("one.ndjson", {Receipt("evt_1", "receipt.issued", "rcp_1")})});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Run({"show", "--data", deep, "receipt", "rcp_1"}).exit_code, 0);
}

TEST_F(cli_ux, NoCommandOrHelpPrintsTheCommandList) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{}, {"help"}}) {
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (const char* cmd : {"ingest", "show", "list", "log", "replay", "feed", "unrouted", "gc"}) {
      EXPECT_TRUE(Contains(r.out, cmd)) << cmd << " missing from:\n" << r.out;
    }
  }
}

TEST_F(cli_ux, ShowAndLogPretty) {
  IngestReceipts();
  CliResult show = Run({"show", "--data", data_, "receipt", "rcp_1", "--pretty"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(show.out.starts_with("{\n  \"entity\": \"receipt\",\n  \"id\": \"rcp_1\",\n"))
      << show.out;
  EXPECT_TRUE(Contains(show.out, "\"rejected\": [],\n")) << show.out;
  CliResult log = Run({"log", "--data", data_, "receipt", "rcp_2", "--pretty"});
  EXPECT_EQ(log.exit_code, 0) << log.err;
  EXPECT_TRUE(Contains(log.out, "\n  \"arrival\": [\n    {\n")) << log.out;
}

TEST_F(cli_ux, EmptySubscriptionsAndDeadLettersSaySo) {
  IngestReceipts();
  CliResult subs = Run({"subscriptions", "--data", data_});
  EXPECT_EQ(subs.exit_code, 0) << subs.err;
  EXPECT_EQ(subs.out, "");
  EXPECT_TRUE(Contains(subs.err, "no subscriptions")) << subs.err;
}

TEST_F(cli_ux, GcEchoesItsSettingsUnrounded) {
  IngestReceipts();
  CliResult r =
      Run({"gc", "--data", data_, "--compact-after-days", "0.0001", "--tombstone-days", "35.25"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, R"("compact_after_days":0.0001,"tombstone_days":35.25,)")) << r.out;
}

// "Not found" is exit 1 in every command (README, "The command line"):
// an entity type the profile lacks, an id with no events, an unknown
// subscription, a backup that is not there.
TEST_F(cli_ux, NotFoundIsExitOneInEveryCommand) {
  IngestReceipts();
  const std::vector<std::vector<std::string>> misses = {
      {"show", "--data", data_, "receipt", "rcp_404"},
      {"log", "--data", data_, "receipt", "rcp_404"},
      {"show", "--data", data_, "invoice", "inv_1"},
      {"list", "--data", data_, "invoice"},
      {"replay", "--data", data_, "--entity", "receipt", "--id", "rcp_404", "--quiet"},
      {"replay", "--data", data_, "--entity", "invoice", "--quiet"},
      {"dlq", "list", "--data", data_, "--subscription", "nope"},
      {"restore", root_ + "/no-such-backup", "--data", root_ + "/restored"},
  };
  for (const std::vector<std::string>& args : misses) {
    std::string cmd;
    for (const std::string& a : args) cmd += a + " ";
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.err;
    EXPECT_EQ(r.out, "") << cmd;
    EXPECT_FALSE(r.err.empty()) << cmd << ": a miss is named on stderr";
  }
}

// Output that does not reach its file is a failure (exit 2, named), not a
// success with less output; an empty --data is a usage error, never the
// root directory; `demo --fresh` deletes only the store's own files; and
// an input that is a directory, or that cannot be opened, is named as such.
TEST_F(cli_ux, LostOutputEmptyPathsAndForeignFilesAreRefused) {
  IngestReceipts();
  for (const std::vector<std::string>& args : {std::vector<std::string>{"list", "--data", data_},
                                               std::vector<std::string>{"status", "--data", data_},
                                               std::vector<std::string>{"feed", "--data", data_}}) {
    const pid_t pid = Spawn(args, "/dev/full", root_ + "/full.err");
    ASSERT_GT(pid, 0);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2) << args[0];
    EXPECT_TRUE(Contains(ReadFile(root_ + "/full.err"), "writing the command's output failed"))
        << args[0];
  }
  for (const char* cmd : {"list", "status", "ingest", "demo"}) {
    CliResult r = Run({cmd, "--data", ""});
    EXPECT_EQ(r.exit_code, 2) << cmd << ": " << r.err;
    EXPECT_TRUE(Contains(r.err, "empty path")) << cmd << ": " << r.err;
  }
  CliResult dir_input = Run({"ingest", "--data", data_, root_});
  EXPECT_EQ(dir_input.exit_code, 2) << dir_input.out;
  EXPECT_TRUE(Contains(dir_input.err, "is a directory")) << dir_input.err;
  // A file that cannot be opened is named with the system's reason.
  CliResult missing = Run({"ingest", "--data", data_, root_ + "/no-such.ndjson"});
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_TRUE(Contains(missing.err, "cannot read " + root_ + "/no-such.ndjson: No such file"))
      << missing.err;

  WriteFile(data_ + "/notes.txt", "mine");
  CliResult fresh = Run({"demo", "--data", data_, "--fresh", "--receipts", "3", "--products", "1"});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_EQ(ReadFile(data_ + "/notes.txt"), "mine");
  CliResult gone = Run({"show", "--data", data_, "receipt", "rcp_1"});
  EXPECT_EQ(gone.exit_code, 1) << "the old store's receipts went with it: " << gone.out;
}

// Like --data, a backup's OUT and a restore's --data get their missing
// parent directories; a restore refused for a damaged backup makes none.
TEST_F(cli_ux, BackupAndRestoreCreateMissingParents) {
  IngestReceipts();
  const std::string out = root_ + "/bk/2026/12";
  CliResult backup = Run({"backup", "--data", data_, out});
  ASSERT_EQ(backup.exit_code, 0) << backup.err;
  const std::string restored = root_ + "/new/a/store";
  CliResult restore = Run({"restore", "--data", restored, out});
  ASSERT_EQ(restore.exit_code, 0) << restore.err;
  CliResult show = Run({"show", "--data", restored, "receipt", "rcp_1"});
  EXPECT_EQ(show.exit_code, 0) << show.err;

  // A backup that does not verify: nothing is made where it would go.
  WriteFile(out + "/CURRENT", "MANIFEST-999999\n");
  CliResult bad = Run({"restore", "--data", root_ + "/other/b/store", out});
  EXPECT_NE(bad.exit_code, 0) << bad.out;
  EXPECT_FALSE(std::filesystem::exists(root_ + "/other")) << bad.err;
}

// `list ""` (a shell variable left unset) is a usage error, not a listing
// of every entity; `list` with no ENTITY lists them all.
TEST_F(cli_ux, ListOfAnEmptyEntityIsAUsageError) {
  IngestReceipts();
  for (const std::vector<std::string>& where :
       {std::vector<std::string>{"--data", data_},
        std::vector<std::string>{"--server", "http://127.0.0.1:1"}}) {
    std::vector<std::string> args = {"list", where[0], where[1], ""};
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << where[0] << ": " << r.err;
    EXPECT_TRUE(Contains(r.err, "ENTITY is empty")) << r.err;
    EXPECT_EQ(r.out, "") << where[0];
  }
  CliResult all = Run({"list", "--data", data_});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  EXPECT_TRUE(Contains(all.out, "rcp_2")) << all.out;
}

// A body limit of zero would refuse every delivery for good: serve refuses
// it, naming the flag, before it creates anything.
TEST_F(cli_ux, ServeRefusesABodyLimitOfZero) {
  CliResult r = Run({"serve", "--data", root_ + "/zero", "--listen", "127.0.0.1:0",
                     "--allow-unsigned", "--max-body", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, "--max-body: must be at least 1")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(root_ + "/zero"));
}

// --server takes http://HOST:PORT and nothing else, refused before any
// request (an https:// URL used to abort the command inside the client).
TEST_F(cli_ux, ServerUrlsOtherThanHttpHostPortAreUsageErrors) {
  for (const std::string url :
       {"https://127.0.0.1:8081", "http://127.0.0.1:8081/v1", "http://127.0.0.1:99999",
        "http://127.0.0.1", "127.0.0.1:8081", "http://user@127.0.0.1:8081", ""}) {
    CliResult r = Run({"show", "--server", url, "receipt", "rcp_1"});
    EXPECT_EQ(r.exit_code, 2) << url << ": " << r.err;
    EXPECT_TRUE(Contains(r.err, "wants http://HOST:PORT")) << url << ": " << r.err;
    EXPECT_EQ(r.out, "") << url;
  }
  // A well-formed address with nobody there: named as such.
  CliResult r = Run({"status", "--server", "http://127.0.0.1:1/"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, "cannot connect")) << r.err;
}

// A store's quarantine is a LevelDB database without a store's profile
// record: `--data DIR/quarantine` (one directory too deep) opened it as an
// empty store, even for `status`, wrote a store's metadata into it and
// moved its refusals into a quarantine of its own below it, so `refused
// --data DIR` listed none of them and `check --data DIR` failed; `demo
// --fresh` deleted it. Each command now refuses it, naming the store.
TEST_F(cli_ux, AStoresQuarantineIsNotOpenedAsAStore) {
  const std::string events = File(
      "events.ndjson", {Receipt("evt_1", "receipt.issued", "rcp_1"), "{\"not\":\"an event\"}"});
  CliResult r = Run({"ingest", "--data", data_, events});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  ASSERT_EQ(Lines(Run({"refused", "--data", data_}).out).size(), 1u);
  const std::string quarantine = data_ + "/quarantine";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"status", "--data", quarantine},
           {"list", "--data", quarantine + "/"},
           {"ingest", "--data", quarantine, events},
           {"repair", "--data", quarantine},
           {"demo", "--fresh", "--data", quarantine, "--receipts", "1", "--products", "1"}}) {
    r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.out << r.err;
    EXPECT_TRUE(Contains(r.err, "is the quarantine database of the store at " + data_))
        << args[0] << ": " << r.err;
    EXPECT_FALSE(fs::exists(quarantine + "/quarantine")) << args[0];
  }
  r = Run({"refused", "--data", data_});
  EXPECT_EQ(Lines(r.out).size(), 1u) << r.out << r.err;
  r = Run({"check", "--data", data_});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// CLI11 reads integers with strtoll's base 0: `feed --from 010` started at
// seq 8 (octal), and `dlq drop --seq 010` would have dropped dead letter 8.
// Every integer option reads decimal: leading zeros are dropped, and a
// 0x/0b prefix is a usage error naming the option.
TEST_F(cli_ux, IntegerOptionsAreDecimal) {
  std::vector<std::string> lines;
  for (int i = 1; i <= 12; ++i) {
    lines.push_back(
        Receipt("evt_" + std::to_string(i), "receipt.issued", "rcp_" + std::to_string(i)));
  }
  ASSERT_EQ(Run({"ingest", "--data", data_, File("events.ndjson", lines)}).exit_code, 0);
  CliResult r = Run({"feed", "--data", data_, "--from", "010"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(Lines(r.out).size(), 3u) << r.out;
  EXPECT_TRUE(Lines(r.out)[0].starts_with(R"({"seq":10,)")) << r.out;
  r = Run({"feed", "--data", data_, "--from", "00"});
  EXPECT_EQ(Lines(r.out).size(), 12u) << r.out << r.err;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"feed", "--data", data_, "--from", "0x10"},
                                             {"gc", "--data", data_, "--feed-grace", "0b1"},
                                             {"replay", "--data", data_, "--threads", "0400"}}) {
    r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args[3] << " " << args[4] << ": " << r.out << r.err;
    EXPECT_TRUE(Contains(r.err, args[3] + ": ")) << r.err;
  }
}

// An empty OUT or BACKUP is a usage error, as an empty --data is (it was
// a storage error, exit 1, once the command ran).
TEST_F(cli_ux, AnEmptyBackupOrRestorePathIsAUsageError) {
  CliResult r = Run({"backup", "--data", data_, ""});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "OUT wants a directory, got an empty path")) << r.err;
  r = Run({"restore", "--data", data_, ""});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(Contains(r.err, "BACKUP wants a directory, got an empty path")) << r.err;
  EXPECT_FALSE(fs::exists(data_)) << "a refused command created the store";
}

// A signature tolerance too large for an int64 was taken as the largest
// one, so a 1970 timestamp verified; a negative one was refused only once
// the command ran. Both are usage errors naming the flag.
TEST_F(cli_ux, ATimestampToleranceOutOfRangeIsAUsageError) {
  const std::string secret = "whsec_0123456789abcdef0123456789abcdef";
  for (const std::string command : {"serve", "ingest"}) {
    for (const std::string value : {"99999999999999999999", "-1"}) {
      CliResult r = Run({command, "--data", data_, "--secret", secret, "--tolerance", value});
      EXPECT_EQ(r.exit_code, 2) << command << " " << value << ": " << r.out << r.err;
      EXPECT_TRUE(Contains(r.err, "--tolerance: ")) << command << ": " << r.err;
      EXPECT_TRUE(Contains(r.err, value[0] == '-' ? "must be at least 0" : "out of range"))
          << command << ": " << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(data_)) << "a refused command created the store";
}

// A server that reads the request and closes the connection without an
// answer (a `serve` whose SIGTERM drain ran out while a backup was being
// written) is told as a closed connection, not as a wait of 60 s, or of
// six hours for a backup, that never happened; and a backup's caller is
// told that the copy may have been finished all the same.
TEST_F(cli_ux, AConnectionClosedBeforeItsAnswerIsToldAsClosed) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  std::thread closer([listener] {
    for (int i = 0; i < 2; ++i) {
      const int c = ::accept(listener, nullptr, nullptr);
      if (c < 0) return;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      ::close(c);
    }
  });
  CliResult status = Run({"status", "--server", url});
  CliResult backup = Run({"backup", "--server", url, root_ + "/bk"});
  closer.join();
  ::close(listener);
  EXPECT_EQ(status.exit_code, 2) << status.err;
  EXPECT_TRUE(Contains(status.err, "the connection was closed after ")) << status.err;
  EXPECT_FALSE(Contains(status.err, "within")) << status.err;
  EXPECT_EQ(backup.exit_code, 2) << backup.err;
  EXPECT_TRUE(Contains(backup.err, "the connection was closed after ")) << backup.err;
  EXPECT_TRUE(Contains(backup.err, "may have finished the backup")) << backup.err;
}

// Invalid cluster arguments are usage errors (exit 2), named and refused
// while parsing, before anything connects: `cluster init` exited 1 for
// them, the code docs/CLUSTER.md keeps for a refused change of partitions
// or profile. Nothing listens at the URL, so any connection attempt would
// be named on stderr.
TEST_F(cli_ux, InvalidClusterArgumentsAreUsageErrorsBeforeConnecting) {
  const std::string nowhere = "nats://127.0.0.1:1";
  struct Case {
    std::vector<std::string> args;
    std::string said;
  };
  for (const Case& c : std::vector<Case>{
           {{"cluster", "init", "--partitions", "0"},
            "--partitions: must be within 1..4096, got 0"},
           {{"cluster", "init", "--partitions", "4097"}, "--partitions: must be within 1..4096"},
           {{"cluster", "init", "--replicas", "6"}, "--replicas: must be within 1..5, got 6"},
           {{"cluster", "init", "--lease-ttl-ms", "0"}, "--lease-ttl-ms: must be at least 1000"},
           {{"cluster", "init", "--retention-days", "0"}, "--retention-days: must be within 1.."},
           {{"cluster", "init", "--stream", "bad.name"},
            "--stream: \"bad.name\" may hold only letters, digits, '_' and '-'"},
           {{"cluster", "status", "--stream", "bad.name"}, "--stream: \"bad.name\" may hold"},
           {{"refused", "--stream", "bad.name"}, "--stream: \"bad.name\" may hold"},
           {{"fold", "--data", root_ + "/fold", "--start-timeout", "0", "--stream", ""},
            "--stream: must be 1 to 64 characters"},
           {{"fold", "--data", root_ + "/fold", "--start-timeout", "0", "--standbys", "-1"},
            "--standbys: must not be negative, got -1"},
       }) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--cluster", nowhere});
    if (args[0] != "fold") args.insert(args.end(), {"--timeout-ms", "200"});
    std::string joined;
    for (const std::string& a : args) joined += a + " ";
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << joined << "\n" << r.err;
    EXPECT_TRUE(Contains(r.err, c.said)) << joined << "\n" << r.err;
    EXPECT_FALSE(Contains(r.err, "connecting to")) << joined << "\n" << r.err;
    EXPECT_EQ(r.out, "") << joined;
  }
  EXPECT_FALSE(std::filesystem::exists(root_ + "/fold"));
}

// `refused` reads one source: --data, --server or --cluster. Given two, it
// read one and ignored the other without a word; now that is a usage error
// naming both, and the cluster's own flags want --cluster.
TEST_F(cli_ux, RefusedWithTwoSourcesIsAUsageError) {
  IngestReceipts();
  const std::string nowhere = "nats://127.0.0.1:1";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> said;  // each in the message (CLI11 names either flag first)
  };
  for (const Case& c : std::vector<Case>{
           {{"refused", "--cluster", nowhere, "--data", data_},
            {"excludes", "--cluster", "--data"}},
           {{"refused", "--cluster", nowhere, "--server", "http://127.0.0.1:1"},
            {"excludes", "--cluster", "--server"}},
           {{"refused", "--data", data_, "--stream", "other"}, {"--stream requires --cluster"}},
           {{"refused", "--data", data_, "--timeout-ms", "10"},
            {"--timeout-ms requires --cluster"}},
       }) {
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    CliResult r = Run(c.args);
    EXPECT_EQ(r.exit_code, 2) << joined << "\n" << r.err;
    for (const std::string& part : c.said) {
      EXPECT_TRUE(Contains(r.err, part)) << joined << "\n" << r.err;
    }
    EXPECT_EQ(r.out, "") << joined;
  }
  CliResult alone = Run({"refused", "--data", data_});
  EXPECT_EQ(alone.exit_code, 0) << alone.err;
}

// `restore` takes a backup and nothing else. A store's quarantine
// directory (a LevelDB database of its own) was restored and reported
// verified, an empty store without the events; a store another process
// has open was copied while it changed. Both are refused, named, the first
// as refused input (exit 1), the second as busy (exit 2, naming `eventfold
// backup`), and neither writes --data.
TEST_F(cli_ux, RestoreRefusesAQuarantineDirectoryAndAnOpenStore) {
  IngestReceipts();
  CliResult bad = Run({"ingest", "--data", data_, File("bad.ndjson", {"not json"})});
  ASSERT_EQ(bad.exit_code, 1) << bad.err;
  const std::string quarantine = data_ + "/quarantine";
  ASSERT_TRUE(fs::exists(quarantine + "/CURRENT"));
  const std::string into = root_ + "/restored";
  CliResult q = Run({"restore", "--data", into, quarantine});
  EXPECT_EQ(q.exit_code, 1) << q.err;
  EXPECT_EQ(q.out, "");
  EXPECT_TRUE(Contains(q.err, quarantine + " is not a backup")) << q.err;
  EXPECT_TRUE(Contains(q.err, "the quarantine database of the store or backup at " + data_ +
                                  "; restore that directory"))
      << q.err;
  EXPECT_FALSE(fs::exists(into));

  eventfold::Result<std::unique_ptr<eventfold::Store>> open =
      eventfold::Store::Open(data_, eventfold::Options());
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  CliResult busy = Run({"restore", "--data", into, data_});
  EXPECT_EQ(busy.exit_code, 2) << busy.err;
  EXPECT_EQ(busy.out, "");
  EXPECT_TRUE(Contains(busy.err, "restoring from " + data_ + ": a store has it open")) << busy.err;
  EXPECT_TRUE(Contains(busy.err, "copy a live store with `eventfold backup`")) << busy.err;
  EXPECT_FALSE(fs::exists(into));
}

TEST_F(cli_ux, BadJsonIsRefusedInOurWords) {
  CliResult r = Run({"ingest", "--data", data_,
                     File("bad.ndjson", {R"({"event_id":"evt_1","type":tru})",
                                         R"({"event_id":"evt_2","type":"x.y","data":{"a":1)"})});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  for (const std::string& line : Lines(r.err)) {
    EXPECT_TRUE(Contains(line, "body: not valid JSON: ")) << line;
    EXPECT_FALSE(Contains(line, "JSON element")) << line;
  }
  EXPECT_EQ(Lines(r.err).size(), 2u) << r.err;
}

// `eventfold dlq frob` said "A subcommand is required" and `eventfold frob`
// "The following argument was not expected", neither calling frob a
// command. An unknown command at any level is a usage error naming it and
// the commands there are.
TEST_F(cli_ux, AnUnknownCommandIsAUsageErrorNamingIt) {
  CliResult r = Run({"dlq", "frob", "--data", data_});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Contains(r.err,
                       "eventfold dlq: unknown command 'frob'; the commands are: list, "
                       "retry, drop\n"))
      << r.err;
  r = Run({"frob"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err,
                       "eventfold: unknown command 'frob'; the commands are: help, "
                       "ingest, show,"))
      << r.err;
  r = Run({"cluster", "frob"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err,
                       "eventfold cluster: unknown command 'frob'; the commands are: "
                       "init, status\n"))
      << r.err;
  // A group without its command says which it takes.
  r = Run({"dlq"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, "eventfold dlq: a command is needed: list, retry, drop\n")) << r.err;
  // Known commands and --help are CLI11's as before.
  r = Run({"dlq", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "retry")) << r.out;
  r = Run({"dlq", "list", "--data", data_, "--subscription", "s"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, "no store at")) << r.err;
}

// A --secret-file holding no secret (every line blank or a comment) left
// `ingest` verifying against no secret at all, and `serve` asking for a
// --secret-file it had been given. It is refused, naming the file.
TEST_F(cli_ux, ASecretFileWithoutASecretIsRefusedNamingIt) {
  const std::string file = File("secrets", {"", "# rotated out", "   "});
  const std::string events = File("one.ndjson", {Receipt("evt_1", "receipt.issued", "rcp_1")});
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"ingest", "--data", data_, "--secret-file", file, events},
           {"serve", "--data", data_, "--listen", "127.0.0.1:0", "--secret-file", file}}) {
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.out << r.err;
    EXPECT_TRUE(Contains(r.err, "secret file " + file +
                                    " holds no secret: each of its lines is blank or a # comment"))
        << args[0] << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(data_)) << "a refused command created the store";
}

// A fold worker that fails at start (here: no cluster answers) left behind
// the --data directory it had made, and its parents. They go when they are
// still empty; a directory that was there before stays.
TEST_F(cli_ux, AFoldWorkerThatFailsAtStartRemovesTheDirectoriesItMade) {
  const std::string nowhere = "nats://127.0.0.1:1";
  CliResult r =
      Run({"fold", "--cluster", nowhere, "--data", root_ + "/new/fold", "--start-timeout", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(root_ + "/new")) << r.err;
  fs::create_directories(root_ + "/kept");
  r = Run({"fold", "--cluster", nowhere, "--data", root_ + "/kept", "--start-timeout", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(fs::is_directory(root_ + "/kept"));
}

// `feed --from 1e3` said CLI11's "Could not convert"; an integer option's
// value that is no decimal integer is a usage error naming the option.
TEST_F(cli_ux, AnIntegerOptionSaysItWantsADecimalInteger) {
  for (const std::string value : {"1e3", "1.5", "ten", ""}) {
    CliResult r = Run({"feed", "--data", data_, "--from", value});
    EXPECT_EQ(r.exit_code, 2) << value << ": " << r.err;
    EXPECT_TRUE(Contains(r.err, "--from: must be a decimal integer, got \"" + value + "\""))
        << value << ": " << r.err;
    EXPECT_FALSE(Contains(r.err, "Could not convert")) << r.err;
  }
}

// The demo's report said "1 products": a count of one is singular.
TEST_F(cli_ux, TheDemoCountsOneInTheSingular) {
  CliResult r = Run({"demo", "--data", data_, "--receipts", "1", "--products", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "(1 receipt, 1 product, ")) << r.out;
  EXPECT_FALSE(Contains(r.out, " 1 products")) << r.out;
  EXPECT_FALSE(Contains(r.out, " 1 receipts")) << r.out;
}

}  // namespace
