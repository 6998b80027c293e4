#include "core/json_writer.h"
#include "core/rfc3339.h"
#include "eventfold/feed.h"

namespace eventfold {

std::string ChangeToJson(const Change& c) {
  JsonWriter w;
  w.BeginObject()
      .Key("seq")
      .Uint(c.seq)
      .Key("entity")
      .String(c.entity)
      .Key("id")
      .String(c.id)
      .Key("state")
      .String(c.state)
      .Key("previous_state")
      .String(c.previous_state)
      .Key("event_ids")
      .BeginArray();
  for (const std::string& id : c.event_ids) w.String(id);
  w.EndArray().Key("changed_at").String(FormatRfc3339(c.changed_at)).EndObject();
  return w.Take();
}

std::string ParkedChangeToJson(const ParkedChange& p) {
  JsonWriter w;
  w.BeginObject()
      .Key("subscription")
      .String(p.subscription)
      .Key("change")
      .Raw(ChangeToJson(p.change))
      .Key("attempts")
      .BeginArray();
  for (const DeliveryAttempt& a : p.attempts) {
    w.BeginObject().Key("at").String(FormatRfc3339(a.at)).Key("error").String(a.error).EndObject();
  }
  w.EndArray().Key("redrive").Bool(p.redrive).EndObject();
  return w.Take();
}

}  // namespace eventfold
