// eventfold gc --data DIR [--feed-grace N] [--compact-after-days D]
// [--tombstone-days T] : one retention pass (Store::Gc). Trims the change
// feed below every subscription's checkpoint (keeping N more); with D > 0
// compacts entities in a terminal state whose newest event arrived D or more
// days ago, leaving a dedup tombstone per dropped event for T days (at least
// 35); expires tombstones past their time; then compacts the store so the
// space comes back, and reports what it kept and dropped (docs/RETENTION.md).

#include <charconv>
#include <cmath>
#include <iostream>

#include "core/json_writer.h"
#include "tools/cli_common.h"

namespace eventfold::cli {
namespace {

constexpr double kDayMicros = 24.0 * 3600 * 1e6;
// The store's ceiling on a tombstone time (GcOptions), in days: 365,000.
constexpr double kMaxDays = static_cast<double>(GcOptions::kMaxTombstoneMicros) / kDayMicros;

// A setting echoed as given: the shortest text that reads back as `v`
// (JsonWriter::Double rounds to three decimals, fine for seconds).
std::string Exact(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  return ec == std::errc() ? std::string(buf, end) : "null";
}

// What is wrong with a day count given as `flag` ("" when nothing): it must
// be a finite number in [0, 365000], and one above 0 at least a
// microsecond, which is what the store counts in.
std::string DaysProblem(const std::string& flag, double days) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof(text), days);  // shortest
  const std::string given =
      "eventfold: gc: " + flag + " " + std::string(text, ec == std::errc() ? end : text) + ": ";
  if (std::isnan(days)) return "eventfold: gc: " + flag + ": not a number of days";
  if (days < 0) return given + "must not be negative";
  if (days > kMaxDays) return given + "more than 365000 days (a thousand years)";
  if (days > 0 && std::llround(days * kDayMicros) == 0) {
    return given + "under a microsecond (0 is the way to say none)";
  }
  return "";
}

int Gc(const std::string& dir, uint64_t grace, double compact_after_days, double tombstone_days) {
  for (const std::string& problem : {DaysProblem("--compact-after-days", compact_after_days),
                                     DaysProblem("--tombstone-days", tombstone_days)}) {
    if (problem.empty()) continue;
    std::cerr << problem << "\n";
    return kExitError;
  }
  std::unique_ptr<Store> store = OpenStore(dir, /*create=*/false);
  if (!store) return kExitError;
  GcOptions o;
  o.feed_grace = grace;
  o.compact_after_micros = std::llround(compact_after_days * kDayMicros);
  o.tombstone_micros = std::llround(tombstone_days * kDayMicros);
  o.compact_storage = true;
  Result<GcSummary> gc = store->maintenance().Gc(o);
  if (!gc.ok()) {
    std::cerr << "eventfold: " << gc.status().ToString() << "\n";
    return kExitError;
  }
  const FeedTrimSummary& trim = gc->feed;
  if (trim.subscriptions == 0) {
    std::cerr << "eventfold: no subscription yet: the feed is kept for the first one\n";
  }
  JsonWriter w;
  w.BeginObject()
      .Key("feed_trimmed")
      .Uint(trim.trimmed)
      .Key("feed_first_seq")
      .Uint(trim.first_seq)
      .Key("feed_last_seq")
      .Uint(trim.last_seq)
      .Key("min_checkpoint")
      .Uint(trim.min_checkpoint)
      .Key("subscriptions")
      .Uint(trim.subscriptions)
      .Key("feed_grace")
      .Uint(grace)
      .Key("bytes_before")
      .Uint(gc->bytes_before)
      .Key("bytes_after")
      .Uint(gc->bytes_after)
      .Key("compact_after_days")
      .Raw(Exact(compact_after_days))
      .Key("tombstone_days")
      .Raw(Exact(tombstone_days))
      .Key("entities_compacted")
      .Uint(gc->entities_compacted)
      .Key("events_compacted")
      .Uint(gc->events_compacted)
      .Key("entities_kept_recent")
      .Uint(gc->entities_kept_recent)
      .Key("tombstones_written")
      .Uint(gc->tombstones_written)
      .Key("tombstones_expired")
      .Uint(gc->tombstones_expired)
      .Key("conflicts_dropped")
      .Uint(gc->conflicts_dropped)
      .Key("seconds")
      .Double(gc->seconds)
      .EndObject();
  std::cout << w.str() << "\n";
  return kExitOk;
}

}  // namespace

void AddGcCommand(CLI::App* app, Action* action) {
  auto* cmd = app->add_subcommand(
      "gc",
      "retention: trim the change feed, compact old terminal entities (opt-in), expire "
      "dedup tombstones, then compact the store");
  auto dir = std::make_shared<std::string>();
  auto grace = std::make_shared<uint64_t>(0);
  auto compact_after = std::make_shared<double>(0);
  auto tombstone = std::make_shared<double>(35);
  AddDataOption(cmd, dir.get());
  cmd->add_option("--feed-grace", *grace,
                  "changes to keep below the lowest subscription checkpoint")
      ->check(NotNegative())
      ->capture_default_str();
  cmd->add_option("--compact-after-days", *compact_after,
                  "compact entities in a terminal state whose newest event arrived this many "
                  "days ago or more; 0: keep every event")
      ->capture_default_str();
  cmd->add_option("--tombstone-days", *tombstone,
                  "days a compacted event's dedup tombstone is kept (at least 35)")
      ->capture_default_str();
  cmd->callback([=] { *action = [=] { return Gc(*dir, *grace, *compact_after, *tombstone); }; });
}

}  // namespace eventfold::cli
