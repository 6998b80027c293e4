// eventfold feed --data DIR [--from SEQ] [--follow] : the change feed, NDJSON.
// Given a fold worker's directory (docs/CLUSTER.md) it prints each partition
// store's feed in turn, each line naming its partition.

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "tools/cli_common.h"
#include "tools/ndjson_out.h"
#include "tools/read_views.h"
#include "tools/remote_read.h"
#include "tools/store_waits.h"

namespace eventfold::cli {
namespace {

std::atomic<bool> stop_following{false};

void StopFollowing(int) { stop_following.store(true); }

// Says once, before the first change is printed, when gc trimmed changes
// the reader asked for (FeedTrimmedNote): the feed would otherwise begin
// later than asked without a word. `where` names a partition store.
class TrimmedNote {
 public:
  explicit TrimmedNote(uint64_t after, std::string where = "")
      : from_(after + 1), where_(std::move(where)) {}

  void Before(const Change& c) {
    if (told_) return;
    told_ = true;
    const std::string note = FeedTrimmedNote(from_, c.seq);
    if (!note.empty()) PrintReasonLines(where_ + note);
  }

 private:
  const uint64_t from_;
  const std::string where_;
  bool told_ = false;
};

// Prints the changes after `*after`, advancing it; false on a read error.
// With a `partition_dir`, each line names that partition (WithPartition).
bool PrintNew(Store* store, uint64_t* after, const std::string& partition_dir = "") {
  NdjsonOut out;
  TrimmedNote note(*after, partition_dir.empty()
                               ? ""
                               : std::filesystem::path(partition_dir).filename().string() + ": ");
  Status st = ReadNewChanges(store, after, [&](const Change& c) {
    note.Before(c);
    out.Line(partition_dir.empty() ? ChangeToJson(c)
                                   : WithPartition(partition_dir, ChangeToJson(c)));
  });
  out.Flush();
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return false;
  }
  return true;
}

// --follow holds the store only while it reads (tools/store_waits.h), so
// ingest (another `eventfold ingest`) can write between reads. A receiver
// (`serve`) keeps the store open for good, so beside one the feed is
// followed through its read API instead. A stop signal is seen between
// reads, within one poll.
int Follow(const std::string& dir, uint64_t after) {
  signal(SIGINT, StopFollowing);
  signal(SIGTERM, StopFollowing);
  FollowOptions options;
  auto note = std::make_shared<TrimmedNote>(after);
  options.on_change = [note](const Change& c) {
    note->Before(c);
    std::cout << ChangeToJson(c) << "\n" << std::flush;
  };
  options.on_busy = [] {
    std::cerr << "eventfold: store busy (a writer holds it); retrying. Beside a running "
                 "receiver, follow its feed with --server\n";
  };
  options.stop = [] { return stop_following.load(); };
  Status st = FollowFeed(dir, after, options);
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
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
    if (!HasStore(dir)) {
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
  cmd->add_option("--from", *from, "first change seq to print")
      ->capture_default_str()
      ->check(NotNegative());
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
