// RepairJournal (store/repair_journal.h): the grammar is there.

#include "store/repair_journal.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <string_view>
#include <utility>

#include "core/json_writer.h"
#include "core/rfc3339.h"
#include "core/sha256.h"
#include "storage/dir_sync.h"
#include "storage/leveldb_status.h"

namespace eventfold {
namespace {

constexpr std::string_view kPrefix = "repair-";
constexpr std::string_view kSuffix = ".ndjson";

const char* KindName(LostData::Kind k) {
  switch (k) {
    case LostData::Kind::kEvent:
      return "event";
    case LostData::Kind::kWindow:
      return "window";
    case LostData::Kind::kChanges:
      return "changes";
    case LostData::Kind::kRecords:
      return "records";
  }
  return "records";
}

std::optional<LostData::Kind> KindNamed(std::string_view name) {
  for (LostData::Kind k : {LostData::Kind::kEvent, LostData::Kind::kWindow,
                           LostData::Kind::kChanges, LostData::Kind::kRecords}) {
    if (name == KindName(k)) return k;
  }
  return std::nullopt;
}

std::string LostLine(const LostData& l) {
  JsonWriter w;
  w.BeginObject().Key("lost").BeginObject();
  w.Key("kind").String(KindName(l.kind));
  w.Key("event_id").String(l.event_id).Key("type").String(l.type);
  w.Key("occurred_at").Int(l.occurred_at);
  w.Key("received_from").Int(l.received_from).Key("received_to").Int(l.received_to);
  w.Key("first_seq").Uint(l.first_seq).Key("last_seq").Uint(l.last_seq);
  w.Key("detail").String(l.detail);
  w.EndObject().EndObject();
  return w.Take();
}

std::string DamageLine(const FileDamage& d) {
  JsonWriter w;
  w.BeginObject().Key("damage").BeginObject();
  w.Key("file").String(d.file).Key("offset").Uint(d.offset).Key("end").Uint(d.end);
  w.Key("after_key").String(d.after_key).Key("before_key").String(d.before_key);
  w.Key("after_raw").String(ToHex(d.after_raw)).Key("before_raw").String(ToHex(d.before_raw));
  w.Key("message").String(d.message);
  w.EndObject().EndObject();
  return w.Take();
}

std::optional<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned v = 0;
    const char* first = hex.data() + 2 * i;
    auto [p, ec] = std::from_chars(first, first + 2, v, 16);
    if (ec != std::errc() || p != first + 2) return std::nullopt;
    out[i] = static_cast<char>(v);
  }
  return out;
}

// Field readers that leave the default where a field is absent.
std::string Text(simdjson::dom::object o, const char* key) {
  std::string_view v;
  return o[key].get(v) == simdjson::SUCCESS ? std::string(v) : std::string();
}
int64_t Int(simdjson::dom::object o, const char* key) {
  int64_t v = 0;
  return o[key].get(v) == simdjson::SUCCESS ? v : 0;
}
uint64_t Uint(simdjson::dom::object o, const char* key) {
  uint64_t v = 0;
  return o[key].get(v) == simdjson::SUCCESS ? v : 0;
}

struct JournalRead {
  bool finished = false;
  std::vector<FileDamage> damage;
  std::vector<LostData> lost;
  std::map<std::string, uint64_t> rewritten;
};

// One journal's lines; a line that does not parse (cut short by a kill) is
// skipped.
JournalRead ParseJournal(std::string_view text) {
  JournalRead r;
  simdjson::dom::parser parser;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    simdjson::dom::object doc;
    if (parser.parse(line.data(), line.size()).get(doc) != simdjson::SUCCESS) continue;
    simdjson::dom::object o;
    if (doc["end"].get(o) == simdjson::SUCCESS) r.finished = true;
    std::string_view by;
    if (doc["resumed_by"].get(by) == simdjson::SUCCESS) r.finished = true;
    if (doc["damage"].get(o) == simdjson::SUCCESS) {
      FileDamage d;
      d.file = Text(o, "file");
      d.offset = Uint(o, "offset");
      d.end = Uint(o, "end");
      d.after_key = Text(o, "after_key");
      d.before_key = Text(o, "before_key");
      d.after_raw = FromHex(Text(o, "after_raw")).value_or("");
      d.before_raw = FromHex(Text(o, "before_raw")).value_or("");
      d.message = Text(o, "message");
      r.damage.push_back(std::move(d));
    }
    if (doc["rewrote"].get(o) == simdjson::SUCCESS) r.rewritten[Text(o, "file")] = Uint(o, "size");
    if (doc["lost"].get(o) == simdjson::SUCCESS) {
      std::optional<LostData::Kind> kind = KindNamed(Text(o, "kind"));
      if (!kind) continue;
      LostData l;
      l.kind = *kind;
      l.event_id = Text(o, "event_id");
      l.type = Text(o, "type");
      l.occurred_at = Int(o, "occurred_at");
      l.received_from = Int(o, "received_from");
      l.received_to = Int(o, "received_to");
      l.first_seq = Uint(o, "first_seq");
      l.last_seq = Uint(o, "last_seq");
      l.detail = Text(o, "detail");
      r.lost.push_back(std::move(l));
    }
  }
  return r;
}

// Appends `line` to the journal at `path` on a line of its own: the
// journal may end in a line a kill cut short, which the newline in front
// closes (the empty or cut line is skipped when read).
Status AppendSynced(leveldb::Env* env, const std::string& path, const std::string& line) {
  leveldb::WritableFile* raw = nullptr;
  leveldb::Status s = env->NewAppendableFile(path, &raw);
  std::unique_ptr<leveldb::WritableFile> f(raw);
  if (s.ok()) s = f->Append("\n" + line + "\n");
  if (s.ok()) s = f->Sync();
  if (s.ok()) s = f->Close();
  return storage::FromLevelDb(s, "writing the repair journal " + path);
}

}  // namespace

Result<UnfinishedRepairs> RepairJournal::Unfinished(leveldb::Env* env, const std::string& dir) {
  UnfinishedRepairs out;
  const std::string lost_dir = dir + "/lost";
  if (!env->FileExists(lost_dir)) return out;  // no repair has run
  std::vector<std::string> names;
  Status listed = storage::FromLevelDb(env->GetChildren(lost_dir, &names), "listing " + lost_dir);
  if (!listed.ok()) return listed;  // its journals would go unread
  // The names hold their start time: sorted, they are oldest first.
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) continue;
    std::string text;
    Status st =
        storage::FromLevelDb(leveldb::ReadFileToString(env, lost_dir + "/" + name, &text),
                             "reading the journal of an earlier repair, " + lost_dir + "/" + name);
    if (!st.ok()) return st;
    JournalRead r = ParseJournal(text);
    if (r.finished) continue;
    out.journals.push_back(name);
    for (FileDamage& d : r.damage) out.damage.push_back(std::move(d));
    for (LostData& l : r.lost) out.lost.push_back(std::move(l));
    for (auto& [file, size] : r.rewritten) out.rewritten[file] = size;  // the latest
  }
  return out;
}

Result<std::unique_ptr<RepairJournal>> RepairJournal::Create(leveldb::Env* env,
                                                             const std::string& dir,
                                                             int64_t now_micros) {
  const std::string lost_dir = dir + "/lost";
  (void)env->CreateDir(lost_dir);  // exists already after an earlier repair
  // The start time names it, with ':' (which some file systems refuse) as
  // '-'; a second repair in the same microsecond gets a number.
  std::string stamp = FormatRfc3339(now_micros);
  std::replace(stamp.begin(), stamp.end(), ':', '-');
  std::string name = std::string(kPrefix) + stamp + std::string(kSuffix);
  for (int n = 2; env->FileExists(lost_dir + "/" + name); ++n) {
    name = std::string(kPrefix) + stamp + "-" + std::to_string(n) + std::string(kSuffix);
  }
  leveldb::WritableFile* raw = nullptr;
  Status st = storage::FromLevelDb(env->NewWritableFile(lost_dir + "/" + name, &raw),
                                   "creating the repair journal in " + lost_dir);
  if (!st.ok()) return st;
  std::unique_ptr<RepairJournal> j(new RepairJournal(env, lost_dir, std::move(name),
                                                     std::unique_ptr<leveldb::WritableFile>(raw)));
  JsonWriter w;
  w.BeginObject()
      .Key("repair")
      .String("started")
      .Key("at")
      .String(FormatRfc3339(now_micros))
      .EndObject();
  j->Append(w.str());
  return j;
}

RepairJournal::RepairJournal(leveldb::Env* env, std::string lost_dir, std::string name,
                             std::unique_ptr<leveldb::WritableFile> file)
    : env_(env),
      lost_dir_(std::move(lost_dir)),
      name_(std::move(name)),
      path_(lost_dir_ + "/" + name_),
      file_(std::move(file)) {}

RepairJournal::~RepairJournal() {
  if (file_) (void)file_->Close();
}

void RepairJournal::Append(const std::string& line) {
  if (!error_.ok()) return;
  error_ = storage::FromLevelDb(file_->Append(line + "\n"), "writing the repair journal " + path_);
}

void RepairJournal::AddDamage(const FileDamage& d) { Append(DamageLine(d)); }

void RepairJournal::AddRewrite(const std::string& file, uint64_t size) {
  JsonWriter w;
  w.BeginObject().Key("rewrote").BeginObject();
  w.Key("file").String(file).Key("size").Uint(size);
  w.EndObject().EndObject();
  Append(w.Take());
}

bool RepairJournal::AddLost(const LostData& l) {
  std::string line = LostLine(l);
  if (!lost_lines_.insert(line).second) return false;
  Append(line);
  return true;
}

Status RepairJournal::Sync() {
  if (!error_.ok()) return error_;
  error_ = storage::FromLevelDb(file_->Sync(), "syncing the repair journal " + path_);
  // A journal whose bytes are on disk but whose name a power cut took (or
  // lost/ itself, when this repair made it) is no journal to resume.
  if (error_.ok() && !entry_synced_) {
    error_ = storage::SyncDir(env_, lost_dir_);
    if (error_.ok()) error_ = storage::SyncDir(env_, storage::ParentDir(lost_dir_));
    entry_synced_ = error_.ok();
  }
  return error_;
}

Status RepairJournal::Finish(uint64_t problems_left, const std::vector<std::string>& resumed) {
  JsonWriter w;
  w.BeginObject().Key("end").BeginObject().Key("problems_left").Uint(problems_left);
  w.EndObject().EndObject();
  Append(w.str());
  if (Status st = Sync(); !st.ok()) return st;
  for (const std::string& earlier : resumed) {
    JsonWriter by;
    by.BeginObject().Key("resumed_by").String(name_).EndObject();
    if (Status st = AppendSynced(env_, lost_dir_ + "/" + earlier, by.str()); !st.ok()) return st;
  }
  return Status::OK();
}

}  // namespace eventfold
