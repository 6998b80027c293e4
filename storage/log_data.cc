#include "storage/log_data.h"

#include <string>
#include <utility>

#include "core/decode.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"

namespace eventfold::storage {

namespace {

Status Missing(const LogEntry& entry) {
  return Status::Corruption("the log entry of " + entry.ranked.event.event_id + " names a/" +
                            std::to_string(entry.seq) + ", which is missing");
}

// Fills the entry's data from `value`, the record stored at `key` (a/<seq>).
Status FillFrom(const std::string& key, std::string_view value, const Profile& profile,
                LogEntry* entry) {
  const std::string& id = entry->ranked.event.event_id;
  // The body is decoded here anyway: its identity is compared, not the
  // record's (which a format 8 record does not repeat).
  Result<StoredEvent> stored = DecodeStoredBody(key, value);
  if (!stored.ok()) return stored.status();
  Result<DecodedEvent> decoded = DecodeEvent(stored->body, profile);
  if (!decoded.ok()) {
    return Status::Corruption("the body at a/" + std::to_string(entry->seq) +
                              " no longer decodes: " + decoded.status().message());
  }
  if (decoded->event.event_id != id) {
    return Status::Corruption("the log entry of " + id + " names a/" + std::to_string(entry->seq) +
                              ", which holds event " + decoded->event.event_id);
  }
  entry->ranked.event.data = std::move(decoded->event.data);
  entry->received_at = stored->received_at;
  entry->has_data = true;
  return Status::OK();
}

}  // namespace

Status LoadLogData(leveldb::DB* db, const leveldb::ReadOptions& options, const Profile& profile,
                   LogEntry* entry) {
  if (entry->has_data) return Status::OK();
  const std::string key = EventKey(entry->seq);
  std::string value;
  leveldb::Status s = db->Get(options, key, &value);
  if (s.IsNotFound()) return Missing(*entry);
  if (!s.ok()) return FromLevelDb(s, "reading a logged event's body");
  return FillFrom(key, value, profile, entry);
}

Status LoadLogData(leveldb::Iterator* it, const Profile& profile, LogEntry* entry) {
  if (entry->has_data) return Status::OK();
  const std::string key = EventKey(entry->seq);
  it->Seek(key);
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading a logged event's body");
  if (!it->Valid() || it->key() != leveldb::Slice(key)) return Missing(*entry);
  return FillFrom(key, View(it->value()), profile, entry);
}

Result<int64_t> ReadReceivedAt(leveldb::DB* db, const leveldb::ReadOptions& options, uint64_t seq) {
  const std::string key = EventKey(seq);
  std::string value;
  leveldb::Status s = db->Get(options, key, &value);
  if (s.IsNotFound()) {
    return Status::Corruption("a log entry names a/" + std::to_string(seq) + ", which is missing");
  }
  if (!s.ok()) return FromLevelDb(s, "reading a logged event's arrival time");
  Result<StoredEvent> stored = DecodeStoredBody(key, value);
  if (!stored.ok()) return stored.status();
  return stored->received_at;
}

}  // namespace eventfold::storage
