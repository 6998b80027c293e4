#include "core/refused_json.h"

#include <string>

#include "core/field_values.h"

namespace eventfold {
namespace {

// Whether the name of headers[i] came earlier (in any case).
bool SeenBefore(const Headers& headers, size_t i) {
  for (size_t j = 0; j < i; ++j) {
    if (EqualsIgnoringCase(headers[j].first, headers[i].first)) return true;
  }
  return false;
}

}  // namespace

void WriteRefusedMembers(JsonWriter* w, const RefusedDelivery& r) {
  w->Key("status")
      .Int(r.status)
      .Key("outcome")
      .String(OutcomeName(r.outcome))
      .Key("reason")
      .String(r.reason)
      .Key("headers")
      .BeginObject();
  // A name sent twice (two X-Forwarded-For lines) is one member whose value
  // joins them with ", ", as RFC 9110 §5.3 combines field lines: a JSON
  // object with a key twice is one most parsers read as its last alone.
  for (size_t i = 0; i < r.headers.size(); ++i) {
    const std::string& name = r.headers[i].first;
    if (SeenBefore(r.headers, i)) continue;
    std::string value = r.headers[i].second;
    for (size_t j = i + 1; j < r.headers.size(); ++j) {
      if (EqualsIgnoringCase(r.headers[j].first, name))
        value.append(", ").append(r.headers[j].second);
    }
    w->Key(name).String(value);
  }
  w->EndObject().Key("body_bytes").Uint(r.body_bytes).Key("body_prefix").String(r.body_prefix);
}

}  // namespace eventfold
