// eventfold subscriptions --data DIR : every subscription's checkpoint, lag
// and dead letters, one JSON object a line.

#include <iostream>

#include "core/json_writer.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

int Subscriptions(const std::string& dir) {
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false);
  if (!store) return kExitError;
  const uint64_t last = store->feed().LastSeq();
  const int64_t now = SystemClock()->NowMicros();
  Status inner;
  size_t count = 0;
  Status st = store->feed().ListSubscriptions([&](const std::string& name, uint64_t checkpoint) {
    ++count;
    // Lag in time: how long the oldest change not yet finished has waited.
    double lag_seconds = 0;
    if (last > checkpoint) {
      std::vector<Change> next;
      inner = store->feed().Read(checkpoint, 1, AppendTo<Change>(&next));
      if (!inner.ok()) return false;
      if (!next.empty()) {
        lag_seconds = std::max<int64_t>(0, now - next.front().changed_at) / 1e6;
      }
    }
    uint64_t parked = 0, marked = 0;
    inner = store->feed().ListParked(name, [&](const ParkedChange& p) {
      ++parked;
      if (p.redrive) ++marked;
      return true;
    });
    if (!inner.ok()) return false;
    JsonWriter w;
    w.BeginObject()
        .Key("name")
        .String(name)
        .Key("checkpoint")
        .Uint(checkpoint)
        .Key("last_seq")
        .Uint(last)
        .Key("lag_changes")
        .Uint(last > checkpoint ? last - checkpoint : 0)
        .Key("lag_seconds")
        .Double(lag_seconds)
        .Key("parked")
        .Uint(parked)
        .Key("redrive_pending")
        .Uint(marked)
        .EndObject();
    std::cout << w.str() << "\n";
    return true;
  });
  if (st.ok()) st = inner;
  if (!st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
  }
  if (count == 0) {
    std::cerr << "eventfold: no subscriptions in this store (a subscriber's first checkpoint "
                 "creates one)\n";
  }
  return kExitOk;
}

}  // namespace

void AddSubscriptionsCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "subscriptions", "every subscription's checkpoint, lag and dead letters, as NDJSON");
  auto dir = std::make_shared<std::string>();
  AddDataOption(cmd, dir.get());
  cmd->callback([=] { *action = [=] { return Subscriptions(*dir); }; });
}

}  // namespace eventfold::cli
