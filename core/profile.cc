#include "eventfold/profile.h"

#include <simdjson.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/json_writer.h"
#include "core/sha256.h"

namespace eventfold {
namespace {

namespace od = simdjson::ondemand;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         (c >= 'A' && c <= 'Z');
}

bool IsName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

// Event types: dot-separated non-empty name segments, at least two.
bool IsEventType(std::string_view s) {
  if (s.size() > 128 || s.find('.') == std::string_view::npos) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string_view seg = s.substr(start, dot - start);
    if (seg.empty()) return false;
    for (char c : seg) {
      if (!IsNameChar(c)) return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    out.emplace_back(path.substr(start, dot - start));
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

Status Invalid(const std::string& where, std::string_view what) {
  return Status::InvalidArgument("profile: " + where + ": " + std::string(what));
}

Status ValidateEntity(const EntityType& e) {
  const std::string where = "entity \"" + e.name + "\"";
  if (!IsName(e.name)) {
    return Invalid(where, "name must be 1-64 characters of [A-Za-z0-9_-]");
  }
  const std::vector<std::string> path = SplitPath(e.key);
  if (e.key.empty()) return Invalid(where, "missing key path");
  if (path.size() < 2 || path[0] != "data") {
    return Invalid(where, "key path \"" + e.key + "\" must name a field under data, like data.id");
  }
  for (const std::string& seg : path) {
    if (seg.empty()) {
      return Invalid(where, "key path \"" + e.key + "\" has an empty segment");
    }
  }
  if (e.transitions.empty()) return Invalid(where, "no transitions");

  std::set<std::string> targets{std::string(kInitialState)};
  for (const Transition& t : e.transitions) {
    if (t.to.empty()) {
      return Invalid(where + ", type \"" + t.type + "\"", "empty to-state");
    }
    targets.insert(t.to);
  }
  for (const Transition& t : e.transitions) {
    const std::string tw = where + ", type \"" + t.type + "\"";
    if (!IsEventType(t.type)) {
      return Invalid(tw, "type must look like <entity>.<action>");
    }
    if (t.from.empty()) return Invalid(tw, "empty from-set");
    for (const std::string& s : t.from) {
      if (!targets.count(s)) {
        return Invalid(tw, "unknown state \"" + s + "\" in from-set (no transition enters it)");
      }
    }
  }
  // Reachability from "none": a transition none of whose from-states can
  // ever be entered would never apply, which is always a profile mistake.
  std::set<std::string> reached{std::string(kInitialState)};
  for (bool grew = true; grew;) {
    grew = false;
    for (const Transition& t : e.transitions) {
      for (const std::string& s : t.from) {
        if (reached.count(s) && reached.insert(t.to).second) grew = true;
      }
    }
  }
  for (const Transition& t : e.transitions) {
    if (!reached.count(t.to)) {
      return Invalid(where + ", type \"" + t.type + "\"",
                     "unreachable state \"" + t.to + "\" (no path from none)");
    }
  }
  return Status::OK();
}

// Members other than the known ones are refused, so a misspelt "transitons"
// is reported instead of silently ignored; "description" is free text.
Status Unknown(const std::string& where, std::string_view key, od::value v) {
  std::string_view text;
  if (key == "description" && !v.get_string().get(text)) return Status::OK();
  if (key == "description") return Invalid(where, "description must be a string");
  return Invalid(where, "unknown member \"" + std::string(key) + "\"");
}

// Reads a JSON array of strings.
Status ReadStrings(od::value v, const std::string& where, std::vector<std::string>* out) {
  od::array arr;
  if (v.get_array().get(arr)) return Invalid(where, "must be an array of strings");
  for (auto item : arr) {
    std::string_view s;
    if (item.get_string().get(s)) {
      return Invalid(where, "must be an array of strings");
    }
    out->emplace_back(s);
  }
  return Status::OK();
}

Status ReadTransition(od::value v, const std::string& where, Transition* t) {
  od::object obj;
  if (v.get_object().get(obj)) return Invalid(where, "transition must be an object");
  bool has_from = false;
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return Invalid(where, "bad key");
    std::string_view s;
    if (key == "type") {
      if (field.value().get_string().get(s)) return Invalid(where, "type must be a string");
      t->type = s;
    } else if (key == "to") {
      if (field.value().get_string().get(s)) return Invalid(where, "to must be a string");
      t->to = s;
    } else if (key == "from") {
      has_from = true;
      Status st = ReadStrings(field.value(), where + ", from", &t->from);
      if (!st.ok()) return st;
    } else if (Status st = Unknown(where, key, field.value()); !st.ok()) {
      return st;
    }
  }
  if (t->type.empty()) return Invalid(where, "transition without a type");
  if (!has_from) return Invalid(where + ", type \"" + t->type + "\"", "missing from");
  return Status::OK();
}

Status ReadEntity(od::value v, size_t index, EntityType* e) {
  std::string where = "entities[" + std::to_string(index) + "]";
  od::object obj;
  if (v.get_object().get(obj)) return Invalid(where, "must be an object");
  bool has_transitions = false;
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return Invalid(where, "bad key");
    std::string_view s;
    if (key == "name") {
      if (field.value().get_string().get(s)) return Invalid(where, "name must be a string");
      e->name = s;
      where = "entity \"" + e->name + "\"";
    } else if (key == "key") {
      if (field.value().get_string().get(s)) return Invalid(where, "key must be a string");
      e->key = s;
    } else if (key == "transitions") {
      has_transitions = true;
      od::array arr;
      if (field.value().get_array().get(arr)) {
        return Invalid(where, "transitions must be an array");
      }
      for (auto item : arr) {
        od::value tv;
        if (item.get(tv)) return Invalid(where, "malformed transitions");
        Transition t;
        Status st = ReadTransition(tv, where, &t);
        if (!st.ok()) return st;
        e->transitions.push_back(std::move(t));
      }
    } else if (Status st = Unknown(where, key, field.value()); !st.ok()) {
      return st;
    }
  }
  if (!has_transitions) return Invalid(where, "missing transitions");
  return Status::OK();
}

}  // namespace

std::vector<std::string> EntityType::KeyPath() const {
  std::vector<std::string> path = SplitPath(key);
  return path;
}

Profile::Profile(const Profile& other)
    : name_(other.name_), entities_(other.entities_), fingerprint_(other.fingerprint_) {
  Reindex();
}

Profile& Profile::operator=(const Profile& other) {
  if (this != &other) {
    name_ = other.name_;
    entities_ = other.entities_;
    fingerprint_ = other.fingerprint_;
    Reindex();
  }
  return *this;
}

void Profile::Reindex() {
  routes_.clear();
  for (const EntityType& e : entities_) {
    for (size_t i = 0; i < e.transitions.size(); ++i) {
      routes_[e.transitions[i].type] = Route{&e, &e.transitions[i], static_cast<uint32_t>(i)};
    }
  }
}

Result<Profile> Profile::Make(std::string name, std::vector<EntityType> entities) {
  if (name.empty()) return Invalid("name", "must not be empty");
  if (entities.empty()) return Invalid("entities", "must list at least one entity");
  std::set<std::string> names, types;
  for (const EntityType& e : entities) {
    Status st = ValidateEntity(e);
    if (!st.ok()) return st;
    if (!names.insert(e.name).second) {
      return Invalid("entity \"" + e.name + "\"", "duplicate entity name");
    }
    for (const Transition& t : e.transitions) {
      if (!types.insert(t.type).second) {
        return Invalid("entity \"" + e.name + "\", type \"" + t.type + "\"",
                       "duplicate type (each type routes to one entity)");
      }
    }
  }
  Profile p;
  p.name_ = std::move(name);
  p.entities_ = std::move(entities);
  p.Reindex();
  p.fingerprint_ = Sha256Hex(p.ToJson());
  return p;
}

Result<Profile> Profile::FromJson(std::string_view json) {
  simdjson::padded_string padded(json);
  od::parser parser;
  od::document doc;
  if (parser.iterate(padded).get(doc)) return Invalid("document", "not JSON");
  od::object root;
  if (auto e = doc.get_object().get(root)) {
    // On-demand parsing reports a truncated document only here; calling it
    // "not a JSON object" would send the user looking for the wrong mistake.
    return Invalid("document",
                   e == simdjson::INCORRECT_TYPE ? "must be a JSON object" : "not JSON");
  }
  std::string name;
  std::vector<EntityType> entities;
  bool has_entities = false;
  for (auto field : root) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return Invalid("document", "not JSON");
    if (key == "name") {
      std::string_view s;
      if (field.value().get_string().get(s)) return Invalid("name", "must be a string");
      name = s;
    } else if (key == "entities") {
      has_entities = true;
      od::array arr;
      if (field.value().get_array().get(arr)) {
        return Invalid("entities", "must be an array");
      }
      for (auto item : arr) {
        od::value v;
        if (item.get(v)) return Invalid("entities", "malformed");
        EntityType e;
        Status st = ReadEntity(v, entities.size(), &e);
        if (!st.ok()) return st;
        entities.push_back(std::move(e));
      }
    } else if (Status st = Unknown("document", key, field.value()); !st.ok()) {
      return st;
    }
  }
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS)
    return Invalid("document", "trailing content after the object");
  if (!has_entities) return Invalid("entities", "missing");
  return Make(std::move(name), std::move(entities));
}

const Route* Profile::Find(std::string_view type) const {
  auto it = routes_.find(type);
  return it == routes_.end() ? nullptr : &it->second;
}

const EntityType* Profile::FindEntity(std::string_view name) const {
  for (const EntityType& e : entities_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string Profile::ToJson() const {
  JsonWriter w;
  w.BeginObject().Key("name").String(name_).Key("entities").BeginArray();
  for (const EntityType& e : entities_) {
    w.BeginObject().Key("name").String(e.name).Key("key").String(e.key);
    w.Key("transitions").BeginArray();
    for (const Transition& t : e.transitions) {
      w.BeginObject().Key("type").String(t.type).Key("from").BeginArray();
      for (const std::string& s : t.from) w.String(s);
      w.EndArray().Key("to").String(t.to).EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray().EndObject();
  return w.Take();
}

const Profile& Profile::ReceiptRoller() {
  static const Profile* const kProfile = [] {
    auto T = [](std::string type, std::vector<std::string> from, std::string to) {
      return Transition{std::move(type), std::move(from), std::move(to)};
    };
    Result<Profile> p = Make(
        "receiptroller", {EntityType{"receipt",
                                     "data.receipt_id",
                                     {T("receipt.issued", {"none"}, "issued"),
                                      T("receipt.refunded", {"issued"}, "refunded")}},
                          EntityType{"product",
                                     "data.product_id",
                                     {T("product.created", {"none"}, "active"),
                                      T("product.updated", {"active"}, "active"),
                                      T("product.deleted", {"active"}, "deleted")}},
                          EntityType{"inventory",
                                     "data.product_id",
                                     {T("inventory.updated", {"none", "tracked"}, "tracked")}}});
    return new Profile(std::move(p.value()));
  }();
  return *kProfile;
}

}  // namespace eventfold
