#include "core/decode.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cstdlib>

#include "core/field_values.h"
#include "core/json_scratch.h"
#include "core/parse_number.h"
#include "core/rfc3339.h"

namespace eventfold {
namespace {

namespace od = simdjson::ondemand;

Status Refuse(std::string_view field, std::string_view reason) {
  std::string msg(field);
  msg += ": ";
  msg += reason;
  return Status::InvalidArgument(msg);
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// JSON number grammar (RFC 8259 §6) over a raw token.
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  auto digit = [&](size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '9'; };
  if (i < s.size() && s[i] == '-') ++i;
  if (!digit(i)) return false;
  if (s[i] == '0') {
    ++i;
  } else {
    while (digit(i)) ++i;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  return i == s.size();
}

// Walks `v` completely — on-demand parsing only checks what is read, so
// every value is read — and appends it to `out` as compact JSON. Strings and
// numbers keep their original spelling.
simdjson::error_code WriteCompact(od::value v, int depth, std::string* out) {
  if (depth > kMaxJsonDepth) return simdjson::DEPTH_ERROR;
  od::json_type type;
  if (auto e = v.type().get(type)) return e;
  switch (type) {
    case od::json_type::object: {
      od::object obj;
      if (auto e = v.get_object().get(obj)) return e;
      out->push_back('{');
      bool first = true;
      for (auto field : obj) {
        if (!first) out->push_back(',');
        first = false;
        od::raw_json_string key;
        if (auto e = field.key().get(key)) return e;
        std::string_view unescaped;
        if (auto e = field.unescaped_key().get(unescaped)) return e;
        // The key verbatim (escapes kept), up to its closing quote.
        const char* begin = key.raw();
        size_t len = 0;
        while (begin[len] != '"') len += begin[len] == '\\' ? 2 : 1;
        out->push_back('"');
        out->append(begin, len);
        out->append("\":");
        od::value child;
        if (auto e = field.value().get(child)) return e;
        if (auto e = WriteCompact(child, depth + 1, out)) return e;
      }
      out->push_back('}');
      return simdjson::SUCCESS;
    }
    case od::json_type::array: {
      od::array arr;
      if (auto e = v.get_array().get(arr)) return e;
      out->push_back('[');
      bool first = true;
      for (auto item : arr) {
        if (!first) out->push_back(',');
        first = false;
        od::value child;
        if (auto e = item.get(child)) return e;
        if (auto e = WriteCompact(child, depth + 1, out)) return e;
      }
      out->push_back(']');
      return simdjson::SUCCESS;
    }
    case od::json_type::string: {
      std::string_view raw = TrimRight(v.raw_json_token());
      std::string_view s;
      if (auto e = v.get_string().get(s)) return e;
      out->append(raw);
      return simdjson::SUCCESS;
    }
    case od::json_type::number: {
      std::string_view raw = TrimRight(v.raw_json_token());
      if (!IsJsonNumber(raw)) return simdjson::NUMBER_ERROR;
      out->append(raw);
      return simdjson::SUCCESS;
    }
    case od::json_type::boolean: {
      bool b;
      if (auto e = v.get_bool().get(b)) return e;
      out->append(b ? "true" : "false");
      return simdjson::SUCCESS;
    }
    case od::json_type::null: {
      bool is_null;
      if (auto e = v.is_null().get(is_null)) return e;
      if (!is_null) return simdjson::N_ATOM_ERROR;
      out->append("null");
      return simdjson::SUCCESS;
    }
  }
  return simdjson::TAPE_ERROR;
}

// What is wrong, in the sender's terms: simdjson's own messages describe its
// API ("The JSON element does not have the requested type.").
const char* JsonProblem(simdjson::error_code e) {
  switch (e) {
    case simdjson::DEPTH_ERROR:
      return "nested too deeply";
    case simdjson::STRING_ERROR:
    case simdjson::UNESCAPED_CHARS:
      return "a string is malformed or holds an unescaped control character";
    case simdjson::UNCLOSED_STRING:
      return "a string is not closed";
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR:
      return "a bare word that is not true, false or null";
    case simdjson::NUMBER_ERROR:
      return "a number is malformed";
    case simdjson::NUMBER_OUT_OF_RANGE:
      return "a number is out of range";
    case simdjson::UTF8_ERROR:
      return "not valid UTF-8";
    case simdjson::EMPTY:
      return "empty";
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
      // simdjson also says this of a document whose last structural
      // character is not its first one's closer: "{...}x" too.
      return "an object or array is not closed, or more follows it";
    case simdjson::TRAILING_CONTENT:
      return "more after the JSON value";
    case simdjson::INCORRECT_TYPE:
      return "a value is malformed or out of place";
    default:
      return "malformed";
  }
}

Status NotJson(simdjson::error_code e) {
  return Refuse("body", std::string("not valid JSON: ") + JsonProblem(e));
}

bool IsTypeChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

bool IsValidType(std::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  size_t dots = 0;
  char prev = '.';
  for (char c : t) {
    if (c == '.') {
      if (prev == '.') return false;
      ++dots;
    } else if (!IsTypeChar(c)) {
      return false;
    }
    prev = c;
  }
  return dots > 0 && prev != '.';
}

// The fields docs/SPEC.md §2 names, as raw pieces, before their rules are checked.
struct RawBody {
  std::optional<std::string> event_id;  // unescaped
  std::optional<std::string> type;
  std::optional<std::string> occurred_at;
  std::optional<std::string> version;  // compact JSON of the value
  bool has_data = false;
  bool data_is_object = false;
  std::vector<Field> data_fields;  // when data is an object
  // Required strings that held another JSON type. One flag per field: a
  // single "first offender" slot made a later offender fall through to its
  // content rule and get the wrong reason.
  bool event_id_not_string = false;
  bool type_not_string = false;
  bool occurred_at_not_string = false;
};

// The body is not an object: say whether it is JSON at all.
Status NotAnObject(std::string_view body) {
  simdjson::padded_string padded("[" + std::string(body) + "]");
  od::parser parser;
  od::document doc;
  od::value v;
  std::string ignored;
  if (auto e = parser.iterate(padded).get(doc)) return NotJson(e);
  if (auto e = doc.get_value().get(v)) return NotJson(e);
  if (auto e = WriteCompact(v, 0, &ignored)) return NotJson(e);
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) {
    return NotJson(simdjson::TAPE_ERROR);
  }
  return Refuse("body", "must be a JSON object");
}

// Which members of `data` ReadBody keeps, and whether it checks the others.
struct DataMembers {
  const std::vector<std::string>* keep = nullptr;  // null: every member
  // For the members not kept: read and checked as JSON (DecodeEvent's
  // rules, no Field made), or skipped unread.
  bool check_others = false;
};

// Splits the body into RawBody; refuses non-JSON and repeated fields, and
// keeps the data members `members` says.
Status ReadBody(std::string_view body, RawBody* raw, DataMembers members = {}) {
  const std::vector<std::string>* keep = members.keep;
  od::document doc;
  if (auto e = ThreadJsonParser().iterate(ThreadPadded({}, body, {})).get(doc)) return NotJson(e);
  od::object root;
  if (auto e = doc.get_object().get(root)) {
    return e == simdjson::INCORRECT_TYPE ? NotAnObject(body) : NotJson(e);
  }
  std::string scratch;
  for (auto field : root) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return NotJson(e);
    od::value v;
    if (auto e = field.value().get(v)) return NotJson(e);
    std::optional<std::string>* slot = nullptr;
    bool is_string_field = true;
    if (key == "event_id") {
      slot = &raw->event_id;
    } else if (key == "type") {
      slot = &raw->type;
    } else if (key == "occurred_at") {
      slot = &raw->occurred_at;
    } else if (key == "version") {
      slot = &raw->version;
      is_string_field = false;
    } else if (key == "data") {
      if (raw->has_data) return Refuse("data", "appears more than once");
      raw->has_data = true;
      od::json_type type;
      if (auto e = v.type().get(type)) return NotJson(e);
      if (type != od::json_type::object) {
        scratch.clear();
        if (auto e = WriteCompact(v, 1, &scratch)) return NotJson(e);
        continue;
      }
      raw->data_is_object = true;
      // ReceiptRoller's data objects hold a handful of members; growing
      // from empty cost one allocation per doubling.
      raw->data_fields.reserve(8);
      od::object obj;
      if (auto e = v.get_object().get(obj)) return NotJson(e);
      for (auto member : obj) {
        std::string_view name;
        if (auto e = member.unescaped_key().get(name)) return NotJson(e);
        const bool kept = !keep || std::find(keep->begin(), keep->end(), name) != keep->end();
        if (!kept && !members.check_others) continue;
        od::value mv;
        if (auto e = member.value().get(mv)) return NotJson(e);
        if (!kept) {
          scratch.clear();
          if (auto e = WriteCompact(mv, 2, &scratch)) return NotJson(e);
          continue;
        }
        Field f{std::string(name), {}};
        if (auto e = WriteCompact(mv, 2, &f.json)) return NotJson(e);
        raw->data_fields.push_back(std::move(f));
      }
      continue;
    }
    if (slot && slot->has_value()) {
      return Refuse(key, "appears more than once");
    }
    if (slot && is_string_field) {
      std::string_view s;
      auto e = v.get_string().get(s);
      if (e == simdjson::INCORRECT_TYPE) {
        bool* not_string = slot == &raw->event_id ? &raw->event_id_not_string
                           : slot == &raw->type   ? &raw->type_not_string
                                                  : &raw->occurred_at_not_string;
        *not_string = true;
        scratch.clear();
        if (auto e2 = WriteCompact(v, 1, &scratch)) return NotJson(e2);
        slot->emplace();
        continue;
      }
      if (e) return NotJson(e);
      slot->emplace(s);
      continue;
    }
    std::string* out = &scratch;
    std::string version_text;
    if (slot == &raw->version) out = &version_text;
    out->clear();
    if (auto e = WriteCompact(v, 1, out)) return NotJson(e);
    if (slot == &raw->version) raw->version.emplace(std::move(version_text));
  }
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS)
    return Refuse("body", "trailing content after the JSON object");
  return Status::OK();
}

// The rules every entity key obeys, whatever its JSON type.
Result<std::string> CheckKey(std::string key, const std::string& key_name) {
  if (key.empty()) return Refuse(key_name, "must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return Refuse(key_name, "longer than " + std::to_string(kMaxKeyBytes) + " bytes");
  }
  if (key.find('\0') != std::string::npos) {
    return Refuse(key_name, "must not contain a NUL character");
  }
  return key;
}

// The entity key at `key_name`, a dotted path "data.<field>[.<member>...]"
// (the profile checked its shape), inside the data fields.
Result<std::string> ExtractKey(const std::vector<Field>& fields, const std::string& key_name) {
  std::string_view members = std::string_view(key_name).substr(key_name.find('.') + 1);
  const size_t dot = members.find('.');
  const std::string_view field = members.substr(0, dot);
  members = dot == std::string_view::npos ? std::string_view() : members.substr(dot + 1);
  const Field* top = nullptr;
  for (const Field& f : fields) {
    if (f.name == field) top = &f;  // a repeated name: the last one wins
  }
  if (!top) return Refuse(key_name, "required");
  const std::string_view json = top->json;
  if (members.empty() && json.size() >= 2 && json.front() == '"' && json.back() == '"' &&
      json.find('\\') == std::string_view::npos) {
    // The common key, a top-level string without escapes: its text is its
    // value, no parse needed.
    return CheckKey(std::string(json.substr(1, json.size() - 2)), key_name);
  }
  // Wrapped in an array, a scalar is a value too, and nested paths are
  // pointers below element 0.
  od::parser& parser = ThreadJsonParser();  // the body's document is done with
  const simdjson::padded_string_view padded = ThreadPadded("[", json, "]");
  od::document doc;
  std::string pointer = "/0";
  while (!members.empty()) {
    const size_t next = members.find('.');
    // RFC 6901 escapes, so a member named "a/b" is not read as a path a, b.
    pointer += '/';
    for (char ch : members.substr(0, next)) {
      if (ch == '~') {
        pointer += "~0";
      } else if (ch == '/') {
        pointer += "~1";
      } else {
        pointer += ch;
      }
    }
    members = next == std::string_view::npos ? std::string_view() : members.substr(next + 1);
  }
  od::value v;
  if (parser.iterate(padded).get(doc) || doc.at_pointer(pointer).get(v)) {
    return Refuse(key_name, "required");
  }
  od::json_type type;
  if (v.type().get(type)) return Refuse(key_name, "required");
  std::string key;
  if (type == od::json_type::string) {
    std::string_view s;
    if (v.get_string().get(s)) return Refuse(key_name, "must be a string");
    key = s;
  } else if (type == od::json_type::number) {
    int64_t n;
    if (!v.get_int64().get(n)) {
      key = std::to_string(n);
    } else {
      // An integer beyond int64 (e.g. a uint64 id) is still a JSON integer:
      // docs/SPEC.md §4.4 takes its decimal text, which is the token as written since
      // JSON forbids leading zeros.
      const std::string_view raw = TrimRight(v.raw_json_token());
      const std::string_view digits = raw.substr(!raw.empty() && raw[0] == '-' ? 1 : 0);
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) {
        return Refuse(key_name, "must be a string or an integer (got a non-integer number)");
      }
      key = raw;
    }
  } else {
    return Refuse(key_name, "must be a string or an integer");
  }
  return CheckKey(std::move(key), key_name);
}

}  // namespace

bool IsValidEventId(std::string_view id) {
  // One table lookup a byte: the duplicate fast path checks every id it
  // guesses, and the chain of comparisons cost more than the lookup.
  static constexpr std::array<bool, 256> kAllowed = [] {
    std::array<bool, 256> allowed{};
    for (int c = 0; c < 256; ++c) {
      allowed[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '.' || c == '_' || c == ':' || c == '-';
    }
    return allowed;
  }();
  if (id.empty() || id.size() > kMaxEventIdBytes) return false;
  for (const char c : id) {
    if (!kAllowed[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

namespace {

Result<Event> DecodeFields(std::string_view body, DataMembers members) {
  RawBody raw;
  Status st = ReadBody(body, &raw, members);
  if (!st.ok()) return st;

  Event ev;
  if (!raw.event_id) return Refuse("event_id", "required");
  if (raw.event_id_not_string) return Refuse("event_id", "must be a string");
  if (!IsValidEventId(*raw.event_id)) {
    return Refuse("event_id", "must be 1-128 characters of [A-Za-z0-9._:-]");
  }
  ev.event_id = std::move(*raw.event_id);

  if (!raw.type) return Refuse("type", "required");
  if (raw.type_not_string) return Refuse("type", "must be a string");
  if (!IsValidType(*raw.type)) {
    return Refuse("type", "must look like <entity>.<action>, e.g. receipt.issued");
  }
  ev.type = std::move(*raw.type);

  if (!raw.occurred_at) return Refuse("occurred_at", "required");
  if (raw.occurred_at_not_string) {
    return Refuse("occurred_at", "must be a string");
  }
  Result<int64_t> when = ParseRfc3339(*raw.occurred_at);
  if (!when.ok()) return Refuse("occurred_at", when.status().message());
  ev.occurred_at = *when;

  if (raw.version && *raw.version != "null") {
    const std::string& v = *raw.version;
    const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (v.size() > 1 && v[0] == '0')) {
      return Refuse("version", "must be an integer >= 0");
    }
    std::optional<int64_t> n = ParseDecimal<int64_t>(v);
    if (!n) return Refuse("version", "exceeds the int64 range");
    ev.version = *n;
  }

  if (!raw.has_data) return Refuse("data", "required");
  if (!raw.data_is_object) return Refuse("data", "must be an object");
  ev.data = std::move(raw.data_fields);
  return ev;
}

Result<DecodedEvent> RouteEvent(Result<Event> ev, const Profile& profile) {
  if (!ev.ok()) return ev.status();
  DecodedEvent out;
  out.event = std::move(*ev);
  if (const Route* route = profile.Find(out.event.type)) {
    Result<std::string> key = ExtractKey(out.event.data, route->entity->key);
    if (!key.ok()) return key.status();
    out.entity = EntityRef{route->entity->name, std::move(*key)};
    out.rank = route->rank;
  }
  return out;
}

}  // namespace

Result<Event> DecodeIdentity(std::string_view body) {
  static const std::vector<std::string> kNoMembers;
  return DecodeFields(body, {&kNoMembers});
}

Result<DecodedEvent> DecodeEvent(std::string_view body, const Profile& profile) {
  return RouteEvent(DecodeFields(body, {}), profile);
}

namespace {

// The identity and route of `body`, reading only the route's data members
// (`members`) into Fields and dropping them after routing; the others are
// checked as JSON when `check_others`, skipped otherwise.
Result<DecodedEvent> RouteWithoutData(std::string_view body, const Profile& profile,
                                      const std::vector<std::string>& members, bool check_others) {
  Result<DecodedEvent> d = RouteEvent(DecodeFields(body, {&members, check_others}), profile);
  if (d.ok()) {
    d->event.data.clear();
    d->without_data = true;
  }
  return d;
}

}  // namespace

Result<DecodedEvent> DecodeEventWithoutData(std::string_view body, const Profile& profile,
                                            const std::vector<std::string>& members) {
  return RouteWithoutData(body, profile, members, /*check_others=*/true);
}

Result<std::vector<Field>> DecodeData(std::string_view body) {
  Result<Event> ev = DecodeFields(body, {});
  if (!ev.ok()) return ev.status();
  return std::move(ev->data);
}

std::vector<std::string> RouteMembers(const Profile& profile) {
  std::vector<std::string> members;
  for (const EntityType& type : profile.entities()) {
    const std::vector<std::string> path = type.KeyPath();  // "data", member, ...
    if (path.size() >= 2 && std::find(members.begin(), members.end(), path[1]) == members.end()) {
      members.push_back(path[1]);
    }
  }
  return members;
}

Result<DecodedEvent> DecodeEventRoute(std::string_view body, const Profile& profile,
                                      const std::vector<std::string>& members) {
  return RouteWithoutData(body, profile, members, /*check_others=*/false);
}

Status CheckEventIdHeader(const Headers& headers, std::string_view event_id) {
  // X-RR-Event-Id (ReceiptRoller) and webhook-id (Standard Webhooks) both
  // name the event; either, when present, must be the body's.
  // Every line of either: a second line naming another event is as wrong
  // as a first one.
  for (std::string_view name : {"X-RR-Event-Id", "webhook-id"}) {
    for (const auto& [key, value] : headers) {
      if (!EqualsIgnoringCase(key, name) || value == event_id) continue;
      return Refuse(name, "header \"" + value + "\" does not match body event_id \"" +
                              std::string(event_id) + "\"");
    }
  }
  return Status::OK();
}

std::optional<std::string_view> PeekEventId(std::string_view body) {
  static constexpr std::string_view kKey = "\"event_id\"";
  const size_t at = body.find(kKey);
  if (at == std::string_view::npos) return std::nullopt;
  // Only a key of the top-level object: nothing before it may open another
  // object or an array (within a string or not: the guess stays cheap, and a
  // body that fails it is decoded instead).
  const std::string_view before = body.substr(0, at);
  if (before.find('[') != std::string_view::npos || before.find('{') != before.find_last_of('{')) {
    return std::nullopt;
  }
  size_t i = at + kKey.size();
  auto skip_space = [&] {
    while (i < body.size() &&
           (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r')) {
      ++i;
    }
  };
  skip_space();
  if (i >= body.size() || body[i] != ':') return std::nullopt;
  ++i;
  skip_space();
  if (i >= body.size() || body[i] != '"') return std::nullopt;
  const size_t start = ++i;
  const size_t end = body.find('"', start);
  if (end == std::string_view::npos || end - start > kMaxEventIdBytes) return std::nullopt;
  const std::string_view id = body.substr(start, end - start);
  if (!IsValidEventId(id)) return std::nullopt;  // escapes and the like: decode instead
  return id;
}

}  // namespace eventfold
