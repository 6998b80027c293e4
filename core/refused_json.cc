#include "core/refused_json.h"

namespace eventfold {

void WriteRefusedMembers(JsonWriter* w, const RefusedDelivery& r) {
  w->Key("status")
      .Int(r.status)
      .Key("outcome")
      .String(OutcomeName(r.outcome))
      .Key("reason")
      .String(r.reason)
      .Key("headers")
      .BeginObject();
  for (const auto& [name, value] : r.headers) w->Key(name).String(value);
  w->EndObject().Key("body_bytes").Uint(r.body_bytes).Key("body_prefix").String(r.body_prefix);
}

}  // namespace eventfold
