// `eventfold serve --admin-listen` end to end: the real binary as a child
// process on ephemeral loopback ports, and the read commands with --server
// printing the same bytes (and exit codes) as with --data; the listener
// refusing to start without a token or on a non-loopback address; a wrong
// EVENTFOLD_TOKEN refused; `feed --follow --server` printing a new ingest;
// `backup --server` under a signing sender's load, restored and compared
// with the source at the backup's sequence.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/signature.h"
#include "eventfold/store.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/serve_process.h"

namespace eventfold {
namespace {

using test_util::CliResult;
using test_util::ServerProcess;
using test_util::TempDir;

const std::string kCli = EVENTFOLD_CLI;
const std::string kToken = "e2e-admin-token-0123456789";

class ServeAdminE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    test_util::WriteFile(
        events_,
        "{\"event_id\":\"e1\",\"type\":\"receipt.issued\",\"occurred_at\":"
        "\"2026-11-29T10:00:00Z\",\"data\":{\"receipt_id\":\"rcp_1\",\"amount\":1500}}\n"
        "{\"event_id\":\"e2\",\"type\":\"receipt.refunded\",\"occurred_at\":"
        "\"2026-11-29T11:00:00Z\",\"data\":{\"receipt_id\":\"rcp_1\"}}\n"
        "{\"event_id\":\"e3\",\"type\":\"receipt.issued\",\"occurred_at\":"
        "\"2026-11-29T12:00:00Z\",\"data\":{\"receipt_id\":\"rcp_2\",\"amount\":7}}\n"
        "{\"event_id\":\"e4\",\"type\":\"product.created\",\"occurred_at\":"
        "\"2026-11-29T12:00:00Z\",\"data\":{\"product_id\":\"p 1\"}}\n");
    CliResult r = Run({"ingest", "--data", data_, events_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    unsetenv("EVENTFOLD_ADMIN_TOKEN");
    unsetenv("EVENTFOLD_TOKEN");
  }
  void TearDown() override {
    unsetenv("EVENTFOLD_ADMIN_TOKEN");
    unsetenv("EVENTFOLD_TOKEN");
  }

  CliResult Run(const std::vector<std::string>& args) {
    return test_util::RunCli(kCli, args, scratch_.path() + "/run" + std::to_string(runs_++));
  }

  // Runs each of `commands` again with --server `url` (its token in
  // EVENTFOLD_TOKEN) and expects what it printed with --data (`local`):
  // the same stdout, stderr (a miss's reason, an empty listing's note) and
  // exit code.
  void ExpectTheSameThroughTheServer(const std::vector<std::vector<std::string>>& commands,
                                     const std::vector<CliResult>& local, const std::string& url) {
    setenv("EVENTFOLD_TOKEN", kToken.c_str(), 1);
    for (size_t i = 0; i < commands.size(); ++i) {
      std::vector<std::string> args = commands[i];
      args.insert(args.begin() + 1, {"--server", url});
      const CliResult remote = Run(args);
      const std::string what = commands[i][0] + " (command " + std::to_string(i) + ")";
      EXPECT_EQ(remote.out, local[i].out) << what << ": " << remote.err;
      EXPECT_EQ(remote.exit_code, local[i].exit_code) << what << ": " << remote.err;
      EXPECT_EQ(remote.err, local[i].err) << what;
    }
  }

  TempDir scratch_{"serve-admin-e2e"};
  const std::string data_ = scratch_.path() + "/data";
  const std::string events_ = scratch_.path() + "/events.ndjson";
  int runs_ = 0;
};

TEST_F(ServeAdminE2e, ReadCommandsPrintTheSameBytesWithServerAsWithData) {
  // Each read command's local output first: serve holds the store's lock.
  const std::vector<std::vector<std::string>> commands = {
      {"show", "receipt", "rcp_1"},
      {"show", "product", "p 1"},
      {"show", "receipt", "missing"},
      {"list"},
      {"list", "receipt"},
      {"show", "receipt", "rcp_1", "--pretty"},
      {"log", "receipt", "rcp_1"},
      {"log", "receipt", "rcp_1", "--pretty"},
      {"status"},
      {"refused"},
      {"feed"},
      {"feed", "--from", "3"},
      {"subscriptions"},
      {"show", "nosuch", "x"},
      {"log", "receipt", "missing"},
      {"list", "nosuch"},
      // Longer than any key (the admin listener would answer 414).
      {"show", "receipt", std::string(513, 'x')},
      {"log", "receipt", std::string(5000, '%')}};
  std::vector<CliResult> local;
  for (const auto& c : commands) {
    std::vector<std::string> args = c;
    args.insert(args.begin() + 1, {"--data", data_});
    local.push_back(Run(args));
  }
  ASSERT_EQ(local[0].exit_code, 0) << local[0].err;
  ASSERT_EQ(local[2].exit_code, 1);
  ASSERT_NE(local[5].out, local[0].out);  // --pretty indents
  for (size_t i = commands.size() - 2; i < commands.size(); ++i) {
    EXPECT_EQ(local[i].exit_code, 2);
    EXPECT_NE(local[i].err.find("id: longer than 512 bytes"), std::string::npos) << local[i].err;
  }

  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--allow-unsigned", "--admin-listen", "127.0.0.1:0"}));
  ASSERT_GT(serve.admin_port(), 0) << serve.log();
  const std::string url = "http://127.0.0.1:" + std::to_string(serve.admin_port());

  ExpectTheSameThroughTheServer(commands, local, url);

  // A wrong token is refused, and the command says so.
  setenv("EVENTFOLD_TOKEN", "not-the-token-at-all", 1);
  CliResult refused = Run({"show", "--server", url, "receipt", "rcp_1"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("401"), std::string::npos) << refused.err;

  EXPECT_EQ(serve.Stop(), 0) << serve.log();
}

// A feed read from a seq gc has trimmed began at the first change kept
// without a word. It says once on stderr which changes are gone, the same
// through --server as with --data; stdout holds the changes alone.
TEST_F(ServeAdminE2e, FeedFromATrimmedSeqSaysSoTheSameWithServerAsWithData) {
  {
    Result<std::unique_ptr<Store>> store = Store::Open(data_, Options());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_EQ((*store)->feed().LastSeq(), 3u);
    ASSERT_TRUE((*store)->feed().SetCheckpoint("mail", 2).ok());
    Result<FeedTrimSummary> trim = (*store)->maintenance().TrimFeed(0);
    ASSERT_TRUE(trim.ok()) << trim.status().ToString();
    ASSERT_EQ(trim->first_seq, 3u);
  }
  const std::vector<std::vector<std::string>> commands = {
      {"feed", "--from", "1"}, {"feed"}, {"feed", "--from", "2"}, {"feed", "--from", "3"}};
  const std::vector<std::string> says = {
      "eventfold: feed: changes 1..2 were trimmed by gc; starting at 3\n",
      "eventfold: feed: changes 1..2 were trimmed by gc; starting at 3\n",
      "eventfold: feed: change 2 was trimmed by gc; starting at 3\n", ""};
  std::vector<CliResult> local;
  for (size_t i = 0; i < commands.size(); ++i) {
    std::vector<std::string> args = commands[i];
    args.insert(args.begin() + 1, {"--data", data_});
    local.push_back(Run(args));
    EXPECT_EQ(local[i].exit_code, 0) << local[i].err;
    EXPECT_EQ(local[i].err, says[i]) << i;
    EXPECT_EQ(test_util::Lines(local[i].out).size(), 1u) << local[i].out;
    EXPECT_EQ(local[i].out.rfind(R"({"seq":3,)", 0), 0u) << local[i].out;
  }

  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--allow-unsigned", "--admin-listen", "127.0.0.1:0"}));
  ASSERT_GT(serve.admin_port(), 0) << serve.log();
  const std::string url = "http://127.0.0.1:" + std::to_string(serve.admin_port());
  ExpectTheSameThroughTheServer(commands, local, url);
  EXPECT_EQ(serve.Stop(), 0) << serve.log();
}

// A quarantine whose database is closed (here: its CURRENT file lost, so it
// stays closed until a repair) shows in `status`, the same with --server as
// with --data: refused deliveries are being dropped, and an operator who
// only reads the status must see it.
TEST_F(ServeAdminE2e, AClosedQuarantineShowsInStatusWithDataAndWithServer) {
  CliResult healthy = Run({"status", "--data", data_});
  ASSERT_EQ(healthy.exit_code, 0) << healthy.err;
  EXPECT_EQ(healthy.out.find("quarantine_closed"), std::string::npos) << healthy.out;

  ASSERT_TRUE(std::filesystem::remove(data_ + "/quarantine/CURRENT"));
  CliResult local = Run({"status", "--data", data_});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const size_t at = local.out.find("\"quarantine_closed\":\"");
  ASSERT_NE(at, std::string::npos) << local.out;
  EXPECT_NE(local.out.find("CURRENT", at), std::string::npos) << local.out;

  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--allow-unsigned", "--admin-listen", "127.0.0.1:0"}));
  ASSERT_GT(serve.admin_port(), 0) << serve.log();
  setenv("EVENTFOLD_TOKEN", kToken.c_str(), 1);
  CliResult remote =
      Run({"status", "--server", "http://127.0.0.1:" + std::to_string(serve.admin_port())});
  EXPECT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(remote.out, local.out);
  EXPECT_EQ(serve.Stop(), 0) << serve.log();
}

TEST_F(ServeAdminE2e, AdminListenerRefusesToStartWithoutAToken) {
  CliResult r = Run({"serve", "--data", data_, "--listen", "127.0.0.1:0", "--allow-unsigned",
                     "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("EVENTFOLD_ADMIN_TOKEN"), std::string::npos) << r.err;

  test_util::WriteFile(scratch_.path() + "/short", "short\n");
  r = Run({"serve", "--data", data_, "--listen", "127.0.0.1:0", "--allow-unsigned",
           "--admin-listen", "127.0.0.1:0", "--admin-token-file", scratch_.path() + "/short"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("at least 16 bytes"), std::string::npos) << r.err;
}

// A token file whose first line is empty was refused as shorter than 16
// bytes. The token is the file's first line (docs/RECEIVER.md; a token
// file skips no blank lines or comments, as a --secret-file does): what is
// on that line instead is said, and an empty EVENTFOLD_ADMIN_TOKEN too.
TEST_F(ServeAdminE2e, ATokenFileWithoutATokenOnItsFirstLineSaysWhatIsThere) {
  const std::string file = scratch_.path() + "/token";
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"\n" + kToken + "\n", "its first line is empty"},
           {" \t\r\n" + kToken + "\n", "its first line is empty"},
           {"", "the file is empty"},
           {"# admin token\n" + kToken + "\n", "its first line is a # comment"}}) {
    test_util::WriteFile(file, text);
    CliResult r = Run({"serve", "--data", data_, "--listen", "127.0.0.1:0", "--allow-unsigned",
                       "--admin-listen", "127.0.0.1:0", "--admin-token-file", file});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--admin-token-file " + file + ": " + says), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the token must be on the file's first line"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("at least 16 bytes"), std::string::npos) << r.err;
  }
  setenv("EVENTFOLD_ADMIN_TOKEN", "", 1);
  CliResult r = Run({"serve", "--data", data_, "--listen", "127.0.0.1:0", "--allow-unsigned",
                     "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("EVENTFOLD_ADMIN_TOKEN is empty"), std::string::npos) << r.err;
}

TEST_F(ServeAdminE2e, AdminListenerRefusesANonLoopbackAddressUnlessTold) {
  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  CliResult r = Run({"serve", "--data", data_, "--listen", "127.0.0.1:0", "--allow-unsigned",
                     "--admin-listen", "0.0.0.0:0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--admin-allow-remote"), std::string::npos) << r.err;
}

// `localhost` is loopback, as RECEIVER.md says: the admin listener takes it
// without --admin-allow-remote and listens on 127.0.0.1. And --server
// pointed at the receiver's port instead is told so.
TEST_F(ServeAdminE2e, LocalhostIsLoopbackAndTheReceiversPortIsNoReadApi) {
  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--allow-unsigned", "--admin-listen", "localhost:0"})) << serve.log();
  ASSERT_GT(serve.admin_port(), 0) << serve.log();
  setenv("EVENTFOLD_TOKEN", kToken.c_str(), 1);
  CliResult r =
      Run({"status", "--server", "http://localhost:" + std::to_string(serve.admin_port())});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // The receiver's own port is not the read API: said so, exit 2, where
  // its 404 used to read as a missing entity (exit 1).
  const std::string receiver = "http://127.0.0.1:" + std::to_string(serve.port());
  for (const char* cmd : {"show", "status"}) {
    std::vector<std::string> args = {cmd, "--server", receiver};
    if (std::string(cmd) == "show") args.insert(args.end(), {"receipt", "rcp_1"});
    CliResult wrong = Run(args);
    EXPECT_EQ(wrong.exit_code, 2) << cmd << ": " << wrong.err;
    EXPECT_NE(wrong.err.find("is not an eventfold admin listener"), std::string::npos) << wrong.err;
    EXPECT_EQ(wrong.out, "") << cmd;
  }
  EXPECT_EQ(serve.Stop(), 0) << serve.log();
}

TEST_F(ServeAdminE2e, ServesWithATokenFile) {
  test_util::WriteFile(scratch_.path() + "/token", kToken + "\n");
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--allow-unsigned", "--admin-listen", "127.0.0.1:0",
                           "--admin-token-file", scratch_.path() + "/token"}));
  ASSERT_GT(serve.admin_port(), 0) << serve.log();
  setenv("EVENTFOLD_TOKEN", kToken.c_str(), 1);
  CliResult r =
      Run({"status", "--server", "http://127.0.0.1:" + std::to_string(serve.admin_port())});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"last_seq\":4"), std::string::npos) << r.out;
  EXPECT_EQ(serve.Stop(), 0) << serve.log();
}

// `eventfold feed --server URL --follow`, its stdout to `out_path`.
pid_t SpawnFollower(const std::string& url, const std::string& out_path) {
  std::vector<std::string> args = {kCli, "feed", "--server", url, "--follow"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t follower = 0;
  if (posix_spawn(&follower, kCli.c_str(), &fa, nullptr, argv.data(), environ) != 0) follower = 0;
  posix_spawn_file_actions_destroy(&fa);
  return follower;
}

// Posts one unsigned receipt.issued for `receipt_id` to the receiver.
void PostIssued(const ServerProcess& serve, const std::string& event_id,
                const std::string& receipt_id) {
  httplib::Client client("127.0.0.1", serve.port());
  auto posted = client.Post("/hooks",
                            "{\"event_id\":\"" + event_id +
                                "\",\"type\":\"receipt.issued\",\"occurred_at\":"
                                "\"2026-11-29T13:00:00Z\",\"data\":{\"receipt_id\":\"" +
                                receipt_id + "\"}}",
                            "application/json");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 200) << posted->body;
}

// What the file at `path` holds once it contains `needle`, or after 20 s.
std::string WaitForText(const std::string& path, const std::string& needle) {
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    text = test_util::ReadFile(path);
    if (text.find(needle) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // bounded output poll
  }
  return text;
}

// A stop signal ends a follower with exit 0, as with --data, even while its
// long-poll waits.
void StopFollower(pid_t follower) {
  ::kill(follower, SIGTERM);
  int status = 0;
  ::waitpid(follower, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) : "");
}

TEST_F(ServeAdminE2e, FeedFollowWithServerPrintsANewIngest) {
  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--allow-unsigned", "--admin-listen", "127.0.0.1:0"}));
  ASSERT_GT(serve.admin_port(), 0) << serve.log();
  setenv("EVENTFOLD_TOKEN", kToken.c_str(), 1);
  const std::string out_path = scratch_.path() + "/follow.out";
  const pid_t follower =
      SpawnFollower("http://127.0.0.1:" + std::to_string(serve.admin_port()), out_path);
  ASSERT_GT(follower, 0);
  PostIssued(serve, "e9", "rcp_9");
  // The ingest above wrote seqs 1-3 (one change per entity per batch), so
  // the new change is seq 4.
  const std::string printed = WaitForText(out_path, "\"id\":\"rcp_9\"");
  StopFollower(follower);
  EXPECT_NE(printed.find("\"seq\":4,\"entity\":\"receipt\",\"id\":\"rcp_9\""), std::string::npos)
      << printed;
  EXPECT_EQ(test_util::Lines(printed).size(), 4u) << printed;
  EXPECT_EQ(serve.Stop(), 0) << serve.log();
}

// A follower through the server outlives a restart of the receiver (a
// deploy), as a follower of --data waits for a busy store: it says it is
// retrying, and goes on from where it was.
TEST_F(ServeAdminE2e, FeedFollowWithServerWaitsForARestartedReceiver) {
  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--allow-unsigned", "--admin-listen", "127.0.0.1:0"}));
  const int admin_port = serve.admin_port();
  ASSERT_GT(admin_port, 0) << serve.log();
  setenv("EVENTFOLD_TOKEN", kToken.c_str(), 1);
  const std::string out_path = scratch_.path() + "/follow.out";
  const pid_t follower = SpawnFollower("http://127.0.0.1:" + std::to_string(admin_port), out_path);
  ASSERT_GT(follower, 0);
  PostIssued(serve, "e8", "rcp_8");
  ASSERT_NE(WaitForText(out_path, "\"id\":\"rcp_8\"").find("rcp_8"), std::string::npos);

  ASSERT_EQ(serve.Stop(), 0) << serve.log();
  ASSERT_TRUE(serve.Start(
      {"--allow-unsigned", "--admin-listen", "127.0.0.1:" + std::to_string(admin_port)}))
      << serve.log();
  PostIssued(serve, "e9", "rcp_9");
  const std::string printed = WaitForText(out_path, "\"id\":\"rcp_9\"");
  StopFollower(follower);
  EXPECT_NE(printed.find("\"seq\":5,\"entity\":\"receipt\",\"id\":\"rcp_9\""), std::string::npos)
      << printed;
  EXPECT_EQ(test_util::Lines(printed).size(), 5u) << "each change once:\n" << printed;
  EXPECT_EQ(serve.Stop(), 0) << serve.log();
}

// The admin token from EVENTFOLD_ADMIN_TOKEN is taken without surrounding
// white space, as from a file (a header's value never carries it); one no
// header can carry is refused at start, naming its source.
TEST_F(ServeAdminE2e, AnAdminTokenIsTakenWithoutSurroundingSpaceAndMustFitAHeader) {
  setenv("EVENTFOLD_ADMIN_TOKEN", (" " + kToken + " \n").c_str(), 1);
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--allow-unsigned", "--admin-listen", "127.0.0.1:0"}));
  ASSERT_GT(serve.admin_port(), 0) << serve.log();
  const std::string url = "http://127.0.0.1:" + std::to_string(serve.admin_port());
  setenv("EVENTFOLD_TOKEN", kToken.c_str(), 1);
  CliResult r = Run({"status", "--server", url});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A token the header cannot carry is the caller's error (exit 2, as for a
  // wrong one), not a missing entity (exit 1).
  setenv("EVENTFOLD_TOKEN", (kToken + "\n").c_str(), 1);
  r = Run({"status", "--server", url});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(serve.Stop(), 0) << serve.log();

  setenv("EVENTFOLD_ADMIN_TOKEN", "admin token with spaces 0123", 1);
  r = Run({"serve", "--data", data_, "--listen", "127.0.0.1:0", "--allow-unsigned",
           "--admin-listen", "127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("EVENTFOLD_ADMIN_TOKEN: the admin token must be visible ASCII"),
            std::string::npos)
      << r.err;
}

// The first number after "KEY": in a JSON line (0 when absent).
uint64_t JsonUint(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  return at == std::string::npos ? 0
                                 : std::strtoull(json.c_str() + at + key.size() + 3, nullptr, 10);
}

std::unique_ptr<Store> OpenDir(const std::string& dir) {
  Options o;
  o.create_if_missing = false;
  Result<std::unique_ptr<Store>> s = Store::Open(dir, o);
  EXPECT_TRUE(s.ok()) << dir << ": " << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST_F(ServeAdminE2e, BackupThroughTheAdminApiUnderSignedLoadRestoresTheCut) {
  const std::string secret = "e2e-signing-secret-0123456789";
  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--secret", secret, "--admin-listen", "127.0.0.1:0"}));
  ASSERT_GT(serve.admin_port(), 0) << serve.log();
  const std::string admin = "http://127.0.0.1:" + std::to_string(serve.admin_port());
  setenv("EVENTFOLD_TOKEN", kToken.c_str(), 1);

  // A signing sender: receipts issued, every third refunded, and a few
  // unsigned deliveries (401, quarantined); each acknowledged body kept.
  std::mutex mu;
  std::map<std::string, std::string> bodies;  // event_id -> body, acknowledged
  std::atomic<int> acked{0};
  std::atomic<bool> failed{false};
  std::thread sender([&] {
    httplib::Client client("127.0.0.1", serve.port());
    client.set_read_timeout(std::chrono::seconds(30));
    for (int i = 0; i < 600 && !failed; ++i) {
      const std::string n = std::to_string(i);
      std::vector<std::pair<std::string, std::string>> sends = {
          {"b" + n, "{\"event_id\":\"b" + n +
                        "\",\"type\":\"receipt.issued\",\"occurred_at\":\"2026-11-30T10:00:00Z\","
                        "\"data\":{\"receipt_id\":\"rb_" +
                        n + "\",\"amount\":" + n + "}}"}};
      if (i % 3 == 0 && i > 0) {
        const std::string m = std::to_string(i - 3);
        sends.push_back({"r" + m, "{\"event_id\":\"r" + m +
                                      "\",\"type\":\"receipt.refunded\",\"occurred_at\":"
                                      "\"2026-11-30T11:00:00Z\",\"data\":{\"receipt_id\":\"rb_" +
                                      m + "\"}}"});
      }
      for (const auto& [id, body] : sends) {
        const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
        httplib::Headers h = {{"X-RR-Signature", SignRr(secret, now, body)}};
        httplib::Result res = client.Post("/hooks", h, body, "application/json");
        if (!res || res->status != 200) {
          failed = true;
          ADD_FAILURE() << id << ": "
                        << (res ? std::to_string(res->status) + " " + res->body
                                : httplib::to_string(res.error()));
          return;
        }
        std::lock_guard lock(mu);
        bodies[id] = body;
        ++acked;
      }
      if (i % 50 == 0) {
        httplib::Result res = client.Post("/hooks", httplib::Headers{}, "{}", "application/json");
        if (!res || res->status != 401) failed = true;
      }
    }
  });
  // The backup starts with the load under way and runs beside it.
  while (acked.load() < 100 && !failed) std::this_thread::yield();
  const std::string out = scratch_.path() + "/backup";
  CliResult b = Run({"backup", "--server", admin, out});
  sender.join();
  ASSERT_FALSE(failed.load());
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.out.find("\"verified\":true"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("\"backup\":\"" + out + "\""), std::string::npos) << b.out;
  std::printf("backup through the admin API during %d acknowledged deliveries: %s", acked.load(),
              b.out.c_str());

  // Refused targets, with the reason: not empty; not absolute; no token.
  CliResult again = Run({"backup", "--server", admin, out});
  EXPECT_EQ(again.exit_code, 1) << again.err;
  EXPECT_NE(again.err.find("409"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("not empty"), std::string::npos) << again.err;
  CliResult relative = Run({"backup", "--server", admin, "relative/dir"});
  EXPECT_EQ(relative.exit_code, 1) << relative.err;
  EXPECT_NE(relative.err.find("absolute"), std::string::npos) << relative.err;
  unsetenv("EVENTFOLD_TOKEN");
  CliResult untokened = Run({"backup", "--server", admin, scratch_.path() + "/nobackup"});
  EXPECT_EQ(untokened.exit_code, 2);
  EXPECT_NE(untokened.err.find("401"), std::string::npos) << untokened.err;
  EXPECT_EQ(serve.Stop(), 0) << serve.log();

  const std::string restored = scratch_.path() + "/restored";
  CliResult r = Run({"restore", out, "--data", restored});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(JsonUint(r.out, "records"), JsonUint(b.out, "records")) << r.out;

  std::unique_ptr<Store> source = OpenDir(data_);
  std::unique_ptr<Store> back = OpenDir(restored);
  ASSERT_TRUE(source && back);
  // The cut: the last change the backup holds.
  const uint64_t cut = back->feed().LastSeq();
  ASSERT_GT(cut, 4u) << "the backup holds changes of the load";
  std::printf("the backup holds changes 1..%llu of %llu\n", static_cast<unsigned long long>(cut),
              static_cast<unsigned long long>(source->feed().LastSeq()));
  // The feed: exactly the source's first `cut` changes.
  std::vector<Change> source_feed, back_feed;
  auto into = [](std::vector<Change>* v) {
    return [v](const Change& c) {
      v->push_back(c);
      return true;
    };
  };
  ASSERT_TRUE(source->feed().Read(0, SIZE_MAX, into(&source_feed)).ok());
  ASSERT_TRUE(back->feed().Read(0, SIZE_MAX, into(&back_feed)).ok());
  ASSERT_EQ(back_feed.size(), cut);
  ASSERT_GE(source_feed.size(), cut);
  EXPECT_TRUE(std::equal(back_feed.begin(), back_feed.end(), source_feed.begin()));
  // Projections: each entity no later change touched is as in the source;
  // no other entity exists on the restored store.
  std::set<std::pair<std::string, std::string>> before, later;
  for (size_t i = 0; i < source_feed.size(); ++i) {
    (i < cut ? before : later).insert({source_feed[i].entity, source_feed[i].id});
  }
  size_t compared = 0, restored_count = 0;
  for (const EntityType& t : back->profile()->entities()) {
    ASSERT_TRUE(back->List(t.name,
                           [&](const Projection& p) {
                             ++restored_count;
                             EXPECT_TRUE(before.count({p.entity, p.id})) << p.id;
                             if (later.count({p.entity, p.id})) return true;
                             Result<Projection> s = source->Get(p.entity, p.id);
                             EXPECT_TRUE(s.ok()) << p.id;
                             if (s.ok()) {
                               EXPECT_EQ(*s, p) << p.id;
                             }
                             ++compared;
                             return true;
                           })
                    .ok());
  }
  EXPECT_EQ(restored_count, before.size());
  EXPECT_GT(compared, 0u);
  // Dedup: a resend of every event the restored store holds is a duplicate
  // there; one it does not hold is new.
  std::set<std::string> held;
  for (const Change& c : back_feed) held.insert(c.event_ids.begin(), c.event_ids.end());
  ASSERT_FALSE(held.empty());
  for (const auto& [id, body] : bodies) {
    if (!held.count(id)) continue;
    EXPECT_EQ(back->Ingest(body).outcome, Outcome::kDuplicate) << id;
  }
  if (held.size() < bodies.size()) {
    for (const auto& [id, body] : bodies) {
      if (held.count(id)) continue;
      EXPECT_EQ(back->Ingest(body).outcome, Outcome::kAccepted) << id;
      break;
    }
  }
  // The refusals came along too, in the quarantine's own database.
  size_t refused = 0;
  ASSERT_TRUE(back->quarantine()
                  .List([&](const RefusedDelivery& d) {
                    EXPECT_EQ(d.status, 401);
                    ++refused;
                    return true;
                  })
                  .ok());
  EXPECT_GT(refused, 0u);
}

}  // namespace
}  // namespace eventfold
