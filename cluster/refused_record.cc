#include "cluster/refused_record.h"

#include <simdjson.h>

#include "core/json_writer.h"
#include "core/refused_json.h"

namespace eventfold::cluster {
namespace {

namespace od = simdjson::ondemand;

Status Bad(std::string_view field, simdjson::error_code e) {
  return Status::InvalidArgument("refused record: " + std::string(field) + ": " +
                                 simdjson::error_message(e));
}

}  // namespace

std::string EncodeRefused(const RefusedDelivery& r) {
  JsonWriter w;
  w.BeginObject().Key("received_at").Int(r.received_at);
  WriteRefusedMembers(&w, r);
  w.EndObject();
  return w.str();
}

Result<RefusedDelivery> DecodeRefused(std::string_view record) {
  od::parser parser;
  simdjson::padded_string padded(record);
  od::document doc;
  if (auto e = parser.iterate(padded).get(doc); e) return Bad("record", e);
  od::object obj;
  if (auto e = doc.get_object().get(obj); e) return Bad("record", e);
  RefusedDelivery r;
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key); e) return Bad("key", e);
    od::value v;
    if (auto e = field.value().get(v); e) return Bad(key, e);
    simdjson::error_code e = simdjson::SUCCESS;
    if (key == "received_at") {
      e = v.get_int64().get(r.received_at);
    } else if (key == "status") {
      int64_t status = 0;
      e = v.get_int64().get(status);
      r.status = static_cast<int>(status);
    } else if (key == "outcome") {
      std::string_view name;
      e = v.get_string().get(name);
      bool known = false;
      for (size_t i = 0; !e && i < kOutcomeCount; ++i) {
        if (OutcomeName(static_cast<Outcome>(i)) == name) {
          r.outcome = static_cast<Outcome>(i);
          known = true;
        }
      }
      if (!e && !known) {
        return Status::InvalidArgument("refused record: outcome: unknown \"" + std::string(name) +
                                       "\"");
      }
    } else if (key == "reason") {
      std::string_view s;
      e = v.get_string().get(s);
      r.reason = s;
    } else if (key == "headers") {
      od::object headers;
      e = v.get_object().get(headers);
      for (auto h : headers) {
        if (e) break;
        std::string_view name, value;
        e = h.unescaped_key().get(name);
        if (!e) e = h.value().get_string().get(value);
        if (!e) r.headers.emplace_back(std::string(name), std::string(value));
      }
    } else if (key == "body_bytes") {
      e = v.get_uint64().get(r.body_bytes);
    } else if (key == "body_prefix") {
      std::string_view s;
      e = v.get_string().get(s);
      r.body_prefix = s;
    }
    if (e) return Bad(key, e);
  }
  return r;
}

}  // namespace eventfold::cluster
