// eventfold gc --data DIR [--feed-grace N] : retention. Trims the change
// feed below every subscription's checkpoint (keeping N more) and compacts
// the store so the space comes back.

#include <iostream>

#include "core/json_writer.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

int Gc(const std::string& dir, uint64_t grace) {
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false);
  if (!store) return kExitError;
  const uint64_t before = store->ApproximateBytes();
  Result<FeedTrimSummary> trim = store->TrimFeed(grace);
  if (!trim.ok()) {
    std::cerr << "eventfold: " << trim.status().ToString() << "\n";
    return kExitError;
  }
  if (Status st = store->Compact(); !st.ok()) {
    std::cerr << "eventfold: " << st.ToString() << "\n";
    return kExitError;
  }
  if (trim->subscriptions == 0) {
    std::cerr << "eventfold: no subscription yet: the feed is kept for the first one\n";
  }
  JsonWriter w;
  w.BeginObject()
      .Key("feed_trimmed").Uint(trim->trimmed)
      .Key("feed_first_seq").Uint(trim->first_seq)
      .Key("feed_last_seq").Uint(trim->last_seq)
      .Key("min_checkpoint").Uint(trim->min_checkpoint)
      .Key("subscriptions").Uint(trim->subscriptions)
      .Key("feed_grace").Uint(grace)
      .Key("bytes_before").Uint(before)
      .Key("bytes_after").Uint(store->ApproximateBytes())
      .EndObject();
  std::cout << w.str() << "\n";
  return kExitOk;
}

}  // namespace

void AddGcCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "gc", "trim the change feed below every subscription's checkpoint, then compact");
  auto dir = std::make_shared<std::string>();
  auto grace = std::make_shared<uint64_t>(0);
  AddDataOption(cmd, dir.get());
  cmd->add_option("--feed-grace", *grace,
                  "changes to keep below the lowest subscription checkpoint")
      ->capture_default_str();
  cmd->callback([=] { *action = [=] { return Gc(*dir, *grace); }; });
}

}  // namespace eventfold::cli
