// eventfold feed --data DIR [--from SEQ] [--follow] : the change feed, NDJSON.

#include <signal.h>

#include <atomic>
#include <iostream>

#include "tools/cli_common.h"
#include "tools/remote_read.h"

namespace eventfold::cli {
namespace {

std::atomic<bool> stop_following{false};

void StopFollowing(int) { stop_following.store(true); }

int Feed(const std::string& dir, uint64_t from, bool follow) {
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false);
  if (!store) return kExitError;
  if (follow) {
    signal(SIGINT, StopFollowing);
    signal(SIGTERM, StopFollowing);
  }
  uint64_t after = from > 0 ? from - 1 : 0;
  constexpr size_t kPage = 1000;
  while (true) {
    std::vector<Change> page;
    Status st = store->feed().Read(after, kPage, AppendTo<Change>(&page));
    if (!st.ok()) {
      std::cerr << "eventfold: " << st.ToString() << "\n";
      return kExitError;
    }
    std::string out;
    for (const Change& c : page) {
      out += ChangeToJson(c);
      out += '\n';
      after = c.seq;
    }
    std::cout << out << std::flush;
    if (page.size() == kPage) continue;
    if (!follow || stop_following.load()) return kExitOk;
    // Wakes for new changes, and at least every 200 ms to notice a signal.
    store->feed().WaitForChanges(after, 200000);
    if (stop_following.load()) return kExitOk;
  }
}

}  // namespace

void AddFeedCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand("feed", "print the change feed as NDJSON");
  auto dir = std::make_shared<std::string>();
  auto from = std::make_shared<uint64_t>(1);
  auto follow = std::make_shared<bool>(false);
  auto server = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  AddServerOption(cmd, server.get());
  cmd->add_option("--from", *from, "first change seq to print")->capture_default_str();
  cmd->add_flag("--follow", *follow, "keep printing new changes until SIGINT/SIGTERM");
  cmd->callback([=] {
    *action = [=] {
      return server->empty() ? Feed(*dir, *from, *follow) : RemoteFeed(*server, *from, *follow);
    };
  });
}

}  // namespace eventfold::cli
