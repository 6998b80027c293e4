#include <algorithm>

#include "core/json_writer.h"
#include "core/rfc3339.h"
#include "eventfold/projection.h"

namespace eventfold {
namespace {

void WriteLogged(const LoggedEvent& e, JsonWriter* w) {
  w->BeginObject()
      .Key("event_id")
      .String(e.event.event_id)
      .Key("type")
      .String(e.event.type)
      .Key("occurred_at")
      .String(FormatRfc3339(e.event.occurred_at))
      .Key("version")
      .OptionalInt(e.event.version)
      .Key("seq")
      .Uint(e.seq)
      .Key("received_at")
      .String(FormatRfc3339(e.received_at))
      .Key("verdict")
      .String(e.applied ? "applied" : "rejected");
  if (!e.applied) w->Key("reason").String(e.reason);
  w->EndObject();
}

}  // namespace

std::string FormatTimestamp(int64_t micros) { return FormatRfc3339(micros); }

std::string ProjectionToJson(const Projection& p) {
  JsonWriter w;
  w.BeginObject()
      .Key("entity")
      .String(p.entity)
      .Key("id")
      .String(p.id)
      .Key("state")
      .String(p.state)
      .Key("fields")
      .BeginObject();
  for (const Field& f : p.fields) w.Key(f.name).Raw(f.json);
  w.EndObject()
      .Key("version")
      .OptionalInt(p.version)
      .Key("applied")
      .Uint(p.applied)
      .Key("rejected")
      .BeginArray();
  for (const Rejection& r : p.rejected) {
    w.BeginObject()
        .Key("event_id")
        .String(r.event_id)
        .Key("type")
        .String(r.type)
        .Key("reason")
        .String(r.reason)
        .EndObject();
  }
  w.EndArray().Key("occurred_at");
  if (p.occurred_at) {
    w.String(FormatRfc3339(*p.occurred_at));
  } else {
    w.Null();
  }
  w.EndObject();
  return w.Take();
}

std::string EntityLogToJson(const EntityLog& log) {
  std::vector<const LoggedEvent*> arrival;
  for (const LoggedEvent& e : log.fold_order) arrival.push_back(&e);
  std::sort(arrival.begin(), arrival.end(),
            [](const LoggedEvent* a, const LoggedEvent* b) { return a->seq < b->seq; });
  JsonWriter w;
  w.BeginObject().Key("entity").String(log.ref.entity).Key("id").String(log.ref.id);
  if (log.compacted) {
    w.Key("compacted")
        .BeginObject()
        .Key("events")
        .Uint(log.compacted->events)
        .Key("at")
        .String(FormatTimestamp(log.compacted->compacted_at))
        .Key("snapshot")
        .Raw(ProjectionToJson(log.compacted->snapshot))
        .EndObject();
  }
  w.Key("arrival").BeginArray();
  for (const LoggedEvent* e : arrival) WriteLogged(*e, &w);
  w.EndArray().Key("fold").BeginArray();
  for (const LoggedEvent& e : log.fold_order) WriteLogged(e, &w);
  w.EndArray().EndObject();
  return w.Take();
}

}  // namespace eventfold
