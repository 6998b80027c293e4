// Store::ListUnrouted: stored events that no entity of a profile routes.
// Unrouted events have no index of their own (ingest writes only their a/
// record), so this decodes every stored event under the profile.

#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>

#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "store/store_impl.h"

namespace eventfold::storage {

Status StoreImpl::ListUnrouted(const Profile* profile,
                               const std::function<bool(const UnroutedEvent&)>& fn) {
  std::shared_ptr<const Profile> own;  // a snapshot: a rebuild may switch it
  if (profile == nullptr) {
    own = this->profile();
    profile = own.get();
  }
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
  const std::string prefix(kEventPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<StoredEvent> stored = DecodeStoredEvent(View(it->key()), View(it->value()));
    if (!stored.ok()) return stored.status();
    Result<DecodedEvent> decoded = DecodeEvent(stored->body, *profile);
    if (decoded.ok() && decoded->entity) continue;
    UnroutedEvent u;
    u.seq = stored->seq;
    u.received_at = stored->received_at;
    u.event_id = stored->event.event_id;
    u.type = stored->event.type;
    u.occurred_at = stored->event.occurred_at;
    u.reason = decoded.ok() ? "type \"" + u.type + "\" is in no entity of profile \"" +
                                  profile->name() + "\""
                            : decoded.status().message();
    u.body = std::move(stored->body);
    if (!fn(u)) break;
  }
  return FromLevelDb(it->status(), "listing unrouted events");
}

}  // namespace eventfold::storage
