#include "tools/read_views.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "core/json_writer.h"
#include "core/refused_json.h"

namespace eventfold::cli {

Result<std::string> StatusView(Store& store) {
  const StoreStats stats = store.Stats();
  // Projections by entity type and state.
  Result<ProjectionCounts> counts = store.maintenance().CountProjections();
  if (!counts.ok()) return counts.status();
  JsonWriter w;
  w.BeginObject()
      .Key("profile")
      .BeginObject()
      .Key("name")
      .String(stats.profile_name)
      .Key("fingerprint")
      .String(stats.profile_fingerprint)
      .Key("stale")
      .Bool(stats.profile_stale);
  if (stats.profile_stale) w.Key("requested_fingerprint").String(stats.requested_fingerprint);
  w.EndObject()
      .Key("generation")
      .Uint(stats.generation)
      .Key("log_generation")
      .Uint(stats.log_generation)
      .Key("last_seq")
      .Uint(stats.last_seq)
      .Key("projections")
      .Uint(counts->projections)
      .Key("entities")
      .BeginObject();
  for (const auto& [entity, by_state] : counts->by_entity) {
    w.Key(entity).BeginObject();
    for (const auto& [state, n] : by_state) w.Key(state).Uint(n);
    w.EndObject();
  }
  w.EndObject().Key("unrouted").Uint(stats.unrouted).Key("refused").Uint(stats.refused);
  // Only when closed, as requested_fingerprint only when stale: a healthy
  // store's status reads as before.
  if (!stats.quarantine_closed.empty()) w.Key("quarantine_closed").String(stats.quarantine_closed);
  w.Key("approximate_bytes").Uint(stats.approximate_bytes).EndObject();
  return w.str() + "\n";
}

std::string RefusedLine(const RefusedDelivery& r) {
  JsonWriter w;
  w.BeginObject().Key("seq").Uint(r.seq).Key("received_at").String(FormatTimestamp(r.received_at));
  WriteRefusedMembers(&w, r);
  w.EndObject();
  return w.str() + "\n";
}

Result<std::string> SubscriptionsView(Store& store, Clock* clock) {
  ChangeFeed& feed = store.feed();
  const uint64_t last = feed.LastSeq();
  const int64_t now = clock->NowMicros();
  std::string out;
  Status inner;
  Status st = feed.ListSubscriptions([&](const std::string& name, uint64_t checkpoint) {
    // Lag in time: how long the oldest change not yet finished has waited.
    double lag_seconds = 0;
    if (last > checkpoint) {
      std::vector<Change> next;
      inner = feed.Read(checkpoint, 1, AppendTo<Change>(&next));
      if (!inner.ok()) return false;
      if (!next.empty()) {
        lag_seconds = std::max<int64_t>(0, now - next.front().changed_at) / 1e6;
      }
    }
    uint64_t parked = 0, marked = 0;
    inner = feed.ListParked(name, [&](const ParkedChange& p) {
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
    out += w.str();
    out += '\n';
    return true;
  });
  if (st.ok()) st = inner;
  if (!st.ok()) return st;
  return out;
}

std::string FeedTrimmedNote(uint64_t from, uint64_t first_seq) {
  from = std::max<uint64_t>(from, 1);  // `--from 0` reads from the first seq, 1
  if (first_seq <= from) return "";
  const uint64_t last = first_seq - 1;
  const std::string gone =
      from == last ? "change " + std::to_string(from) + " was"
                   : "changes " + std::to_string(from) + ".." + std::to_string(last) + " were";
  return "feed: " + gone + " trimmed by gc; starting at " + std::to_string(first_seq);
}

std::string BackupSummaryLine(const char* what, const BackupSummary& s, const std::string& where) {
  JsonWriter w;
  w.BeginObject()
      .Key(what)
      .String(where)
      .Key("records")
      .Uint(s.records)
      .Key("bytes")
      .Uint(s.bytes)
      .Key("verified")
      .Bool(true)
      .Key("seconds")
      .Double(s.seconds)
      .EndObject();
  return w.str() + "\n";
}

std::string NoProjectionText(Store& store, const std::string& entity, const std::string& id) {
  const std::shared_ptr<const Profile> snapshot = store.profile();
  const Profile& profile = *snapshot;
  std::ostringstream out;
  if (!profile.FindEntity(entity)) {
    out << "profile \"" << profile.name() << "\" has no entity \"" << entity << "\"";
  } else {
    out << "no events for " << entity << "/" << id;
  }
  // An unrouted event names no entity; one that mentions the id as a JSON
  // string, with a type of this entity ("receipt.issued") or one the
  // profile does not know, is most likely this entity's.
  const std::string quoted = "\"" + id + "\"";
  std::map<std::string, uint64_t> types;
  uint64_t n = 0;
  Status st = store.maintenance().ListUnrouted(nullptr, [&](const UnroutedEvent& e) {
    if (e.body.find(quoted) != std::string::npos &&
        (e.type.starts_with(entity + ".") || !profile.Find(e.type))) {
      ++types[e.type];
      ++n;
    }
    return true;
  });
  if (!st.ok() || n == 0) return out.str();
  out << "\nbut " << n << " stored event" << (n == 1 ? "" : "s") << " naming \"" << id << "\" "
      << (n == 1 ? "is" : "are") << " unrouted under profile \"" << profile.name() << "\" (";
  const char* sep = "";
  for (const auto& [type, count] : types) {
    out << sep << type << " " << count;
    sep = ", ";
  }
  out << "): `eventfold unrouted --list` shows them; a replay with a profile that routes them "
         "projects them";
  return out.str();
}

void PrintReasonLines(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) std::cerr << "eventfold: " << line << "\n";
}

}  // namespace eventfold::cli
