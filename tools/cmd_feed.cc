// eventfold feed --data DIR [--from SEQ] [--follow] : the change feed, NDJSON.
// Given a fold worker's directory (docs/CLUSTER.md) it prints each partition
// store's feed in turn, each line naming its partition.

#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "tools/cli_common.h"
#include "tools/remote_read.h"

namespace eventfold::cli {
namespace {

std::atomic<bool> stop_following{false};

void StopFollowing(int) { stop_following.store(true); }

// --follow without a server: how often the store is reopened for news.
constexpr auto kFollowPoll = std::chrono::milliseconds(200);

// Prints the changes after `*after`, advancing it; false on a read error.
// With a `partition_dir`, each line names that partition (WithPartition).
bool PrintNew(Store* store, uint64_t* after, const std::string& partition_dir = "") {
  constexpr size_t kPage = 1000;
  while (true) {
    std::vector<Change> page;
    Status st = store->feed().Read(*after, kPage, AppendTo<Change>(&page));
    if (!st.ok()) {
      std::cerr << "eventfold: " << st.ToString() << "\n";
      return false;
    }
    std::string out;
    for (const Change& c : page) {
      out +=
          partition_dir.empty() ? ChangeToJson(c) : WithPartition(partition_dir, ChangeToJson(c));
      out += '\n';
      *after = c.seq;
    }
    std::cout << out << std::flush;
    if (page.size() < kPage) return true;
  }
}

// --follow holds the store only while it reads: open, print what is new,
// close, wait, reopen. Ingest (another `eventfold ingest`) can then write
// between reads. A receiver (`serve`) keeps the store open for good, so
// beside one the feed is followed through its read API instead.
int Follow(const std::string& dir, uint64_t after) {
  signal(SIGINT, StopFollowing);
  signal(SIGTERM, StopFollowing);
  Options options;
  options.create_if_missing = false;
  bool said_busy = false;
  while (!stop_following.load()) {
    {  // the store is closed at the end of this block, before the wait
      Result<std::unique_ptr<Store>> store = Store::Open(dir, options);
      if (store.ok()) {
        said_busy = false;
        if (!PrintNew(store->get(), &after)) return kExitError;
      } else if (!store.status().IsBusy()) {
        std::cerr << "eventfold: " << store.status().ToString() << "\n";
        return kExitError;
      } else if (!said_busy) {  // a writer has it now; try again shortly
        std::cerr << "eventfold: store busy (a writer holds it); retrying. Beside a running "
                     "receiver, follow its feed with --server\n";
        said_busy = true;
      }
    }
    std::this_thread::sleep_for(kFollowPoll);
  }
  return kExitOk;
}

// Every current partition store's feed from `after` on, partition by
// partition: seq numbers are per partition store.
int WorkerFeed(const std::vector<std::string>& partitions, uint64_t after) {
  for (const std::string& d : partitions) {
    std::unique_ptr<Store> store = OpenStore(d, /*create=*/false);
    if (!store) return kExitError;
    uint64_t cursor = after;
    if (!PrintNew(store.get(), &cursor, d)) return kExitError;
  }
  return kExitOk;
}

int Feed(const std::string& dir, uint64_t from, bool follow) {
  const uint64_t after = from > 0 ? from - 1 : 0;
  if (std::vector<std::string> partitions = PartitionStoreDirs(dir); !partitions.empty()) {
    if (follow) {
      std::cerr << "eventfold: --follow: " << dir
                << " is a fold worker's directory; its partitions' subscriptions run in the "
                   "worker (FoldWorkerOptions::subscriptions)\n";
      return kExitError;
    }
    return WorkerFeed(partitions, after);
  }
  if (follow) {
    if (!std::filesystem::exists(std::filesystem::path(dir) / "CURRENT")) {
      std::cerr << "eventfold: no store at " << dir << " (ingest creates one)\n";
      return kExitError;
    }
    return Follow(dir, after);
  }
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false);
  if (!store) return kExitError;
  uint64_t cursor = after;
  return PrintNew(store.get(), &cursor) ? kExitOk : kExitError;
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
  cmd->add_flag("--follow", *follow,
                "keep printing new changes until SIGINT/SIGTERM; without --server it reopens "
                "the store between reads, so `ingest` can run meanwhile; beside a running "
                "`serve` (which holds the store) it works only through --server");
  cmd->callback([=] {
    *action = [=] {
      return server->empty() ? Feed(*dir, *from, *follow) : RemoteFeed(*server, *from, *follow);
    };
  });
}

}  // namespace eventfold::cli
