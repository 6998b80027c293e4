#include "core/envelope.h"

#include <simdjson.h>

#include <optional>

#include "core/json_scratch.h"

namespace eventfold {
namespace {

namespace od = simdjson::ondemand;

struct Parsed {
  bool envelope = false;
  Delivery delivery;
};

Result<Parsed> Parse(std::string_view line) {
  Parsed out;
  // This thread's parser and buffer: a file of lines parses without
  // allocating. The views below are copied out before the next parse. A
  // line of any length may come before any size check, so one far over a
  // body's size parses with a parser and copy of its own, and the thread
  // keeps no buffer of its size.
  constexpr size_t kThreadScratchMax = size_t{4} << 20;
  std::optional<od::parser> own_parser;
  std::optional<simdjson::padded_string> own_copy;
  od::parser* parser = &ThreadJsonParser();
  simdjson::padded_string_view padded;
  if (line.size() > kThreadScratchMax) {
    parser = &own_parser.emplace();
    padded = own_copy.emplace(line);
  } else {
    padded = ThreadPadded({}, line, {});
  }
  od::document doc;
  od::object root;
  if (parser->iterate(padded).get(doc) || doc.get_object().get(root)) return out;
  bool has_body = false, has_event_id = false, headers_ok = true;
  Delivery d;
  for (auto field : root) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return out;
    if (key == "event_id") {
      has_event_id = true;
    } else if (key == "body") {
      std::string_view body;
      if (field.value().get_string().get(body)) return out;
      d.body = body;
      has_body = true;
    } else if (key == "headers") {
      od::object headers;
      if (field.value().get_object().get(headers)) {
        headers_ok = false;
        continue;
      }
      for (auto h : headers) {
        std::string_view name, value;
        if (h.unescaped_key().get(name) || h.value().get_string().get(value)) {
          headers_ok = false;
          break;
        }
        d.headers.emplace_back(std::string(name), std::string(value));
      }
    }
  }
  if (!has_body || has_event_id) return out;
  if (!headers_ok) {
    return Status::InvalidArgument("headers: must be an object of string values");
  }
  out.envelope = true;
  out.delivery = std::move(d);
  return out;
}

}  // namespace

Result<Delivery> ParseNdjsonLine(std::string_view line) {
  return ParseNdjsonLine(std::string(line));
}

Result<Delivery> ParseNdjsonLine(std::string&& line) {
  Result<Parsed> p = Parse(line);
  if (!p.ok()) return p.status();
  if (!p->envelope) return Delivery{{}, std::move(line)};
  return std::move(p->delivery);
}

bool IsEnvelope(std::string_view line) {
  Result<Parsed> p = Parse(line);
  return !p.ok() || p->envelope;
}

}  // namespace eventfold
