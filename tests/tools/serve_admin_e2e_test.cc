// `eventfold serve --admin-listen` end to end: the real binary as a child
// process on ephemeral loopback ports, and the read commands with --server
// printing the same bytes (and exit codes) as with --data; the listener
// refusing to start without a token or on a non-loopback address; a wrong
// EVENTFOLD_TOKEN refused; `feed --follow --server` printing a new ingest.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

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

  TempDir scratch_{"serve-admin-e2e"};
  const std::string data_ = scratch_.path() + "/data";
  const std::string events_ = scratch_.path() + "/events.ndjson";
  int runs_ = 0;
};

TEST_F(ServeAdminE2e, ReadCommandsPrintTheSameBytesWithServerAsWithData) {
  // Each read command's local output first: serve holds the store's lock.
  const std::vector<std::vector<std::string>> commands = {{"show", "receipt", "rcp_1"},
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
                                                          {"subscriptions"}};
  std::vector<CliResult> local;
  for (const auto& c : commands) {
    std::vector<std::string> args = c;
    args.insert(args.begin() + 1, {"--data", data_});
    local.push_back(Run(args));
  }
  ASSERT_EQ(local[0].exit_code, 0) << local[0].err;
  ASSERT_EQ(local[2].exit_code, 1);
  ASSERT_NE(local[3].out, local[0].out);  // --pretty indents

  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--allow-unsigned", "--admin-listen", "127.0.0.1:0"}));
  ASSERT_GT(serve.admin_port(), 0) << serve.log();
  const std::string url = "http://127.0.0.1:" + std::to_string(serve.admin_port());

  setenv("EVENTFOLD_TOKEN", kToken.c_str(), 1);
  for (size_t i = 0; i < commands.size(); ++i) {
    std::vector<std::string> args = commands[i];
    args.insert(args.begin() + 1, {"--server", url});
    CliResult remote = Run(args);
    EXPECT_EQ(remote.out, local[i].out) << commands[i][0] << ": " << remote.err;
    EXPECT_EQ(remote.exit_code, local[i].exit_code) << commands[i][0] << ": " << remote.err;
  }

  // A wrong token is refused, and the command says so.
  setenv("EVENTFOLD_TOKEN", "not-the-token-at-all", 1);
  CliResult refused = Run({"show", "--server", url, "receipt", "rcp_1"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("401"), std::string::npos) << refused.err;

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

TEST_F(ServeAdminE2e, AdminListenerRefusesANonLoopbackAddressUnlessTold) {
  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  CliResult r = Run({"serve", "--data", data_, "--listen", "127.0.0.1:0", "--allow-unsigned",
                     "--admin-listen", "0.0.0.0:0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--admin-allow-remote"), std::string::npos) << r.err;
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

TEST_F(ServeAdminE2e, FeedFollowWithServerPrintsANewIngest) {
  setenv("EVENTFOLD_ADMIN_TOKEN", kToken.c_str(), 1);
  ServerProcess serve(kCli, data_, scratch_.path());
  ASSERT_TRUE(serve.Start({"--allow-unsigned", "--admin-listen", "127.0.0.1:0"}));
  ASSERT_GT(serve.admin_port(), 0) << serve.log();
  setenv("EVENTFOLD_TOKEN", kToken.c_str(), 1);

  // The follower, its stdout to a file.
  const std::string out_path = scratch_.path() + "/follow.out";
  std::vector<std::string> args = {kCli, "feed", "--server",
                                   "http://127.0.0.1:" + std::to_string(serve.admin_port()),
                                   "--follow"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t follower = 0;
  ASSERT_EQ(posix_spawn(&follower, kCli.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);

  httplib::Client client("127.0.0.1", serve.port());
  auto posted = client.Post("/hooks",
                            "{\"event_id\":\"e9\",\"type\":\"receipt.issued\",\"occurred_at\":"
                            "\"2026-11-29T13:00:00Z\",\"data\":{\"receipt_id\":\"rcp_9\"}}",
                            "application/json");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 200) << posted->body;

  // Bounded wait for the follower to print the new change: the ingest above
  // wrote seqs 1-3 (one change per entity per batch), so it is seq 4.
  std::string printed;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    printed = test_util::ReadFile(out_path);
    if (printed.find("\"id\":\"rcp_9\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // bounded output poll
  }
  ::kill(follower, SIGTERM);
  ::waitpid(follower, nullptr, 0);
  EXPECT_NE(printed.find("\"seq\":4,\"entity\":\"receipt\",\"id\":\"rcp_9\""), std::string::npos)
      << printed;
  EXPECT_EQ(test_util::Lines(printed).size(), 4u) << printed;
  EXPECT_EQ(serve.Stop(), 0) << serve.log();
}

}  // namespace
}  // namespace eventfold
