#include "storage/log_data.h"

#include <string>
#include <utility>

#include "core/decode.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"

namespace eventfold::storage {

Status LoadLogData(leveldb::DB* db, const leveldb::ReadOptions& options, const Profile& profile,
                   LogEntry* entry) {
  if (entry->has_data) return Status::OK();
  const std::string key = EventKey(entry->seq);
  std::string value;
  leveldb::Status s = db->Get(options, key, &value);
  const std::string& id = entry->ranked.event.event_id;
  if (s.IsNotFound()) {
    return Status::Corruption("the log entry of " + id + " names a/" + std::to_string(entry->seq) +
                              ", which is missing");
  }
  if (!s.ok()) return FromLevelDb(s, "reading a logged event's body");
  Result<StoredEvent> stored = DecodeStoredEvent(key, value);
  if (!stored.ok()) return stored.status();
  if (stored->event.event_id != id) {
    return Status::Corruption("the log entry of " + id + " names a/" + std::to_string(entry->seq) +
                              ", which holds event " + stored->event.event_id);
  }
  Result<DecodedEvent> decoded = DecodeEvent(stored->body, profile);
  if (!decoded.ok()) {
    return Status::Corruption("the body at a/" + std::to_string(entry->seq) +
                              " no longer decodes: " + decoded.status().message());
  }
  entry->ranked.event.data = std::move(decoded->event.data);
  entry->has_data = true;
  return Status::OK();
}

}  // namespace eventfold::storage
