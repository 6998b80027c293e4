// Unrouted events: accepted events that no entity of a profile routes. Each
// generation indexes those of its profile under g/<gen>/u/<seq> (written
// with the event by ingest, and by a rebuild's build and catch-up), so the
// store's count and list read those events only; another profile's list
// decodes every stored event under it.

#include <leveldb/write_batch.h>

#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>

#include "core/parse_number.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/meta_text.h"
#include "store/store_impl.h"

namespace eventfold::storage {
namespace {

// The UnroutedEvent of a stored event `profile` does not route (`decoded`
// is its decode under that profile).
UnroutedEvent ToUnrouted(StoredEvent stored, const Result<DecodedEvent>& decoded,
                         const Profile& profile) {
  UnroutedEvent u;
  u.seq = stored.seq;
  u.received_at = stored.received_at;
  u.event_id = std::move(stored.event.event_id);
  u.type = std::move(stored.event.type);
  u.occurred_at = stored.event.occurred_at;
  u.reason = decoded.ok()
                 ? "type \"" + u.type + "\" is in no entity of profile \"" + profile.name() + "\""
                 : decoded.status().message();
  u.body = std::move(stored.body);
  return u;
}

// Every stored event of `snapshot` under `profile`: calls fn(seq, decoded
// event, its decode) for those it does not route, until fn returns false.
template <typename Fn>
Status ScanUnrouted(leveldb::DB* db, const leveldb::Snapshot* snapshot, const Profile& profile,
                    Fn fn) {
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ScanOptions(snapshot)));
  const std::string prefix(kEventPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<StoredEvent> stored = DecodeStoredEvent(View(it->key()), View(it->value()));
    if (!stored.ok()) return stored.status();
    Result<DecodedEvent> decoded = DecodeEvent(stored->body, profile);
    if (decoded.ok() && decoded->entity) continue;
    if (!fn(std::move(*stored), decoded)) break;
  }
  return FromLevelDb(it->status(), "listing unrouted events");
}

}  // namespace

Status StoreImpl::LoadUnroutedIndex() {
  Result<std::optional<uint64_t>> marker =
      ReadNumber(db_.get(), leveldb::ReadOptions(), MetaKey("unrouted_index"));
  if (!marker.ok()) return marker.status();
  uint64_t n = 0;
  if (*marker == std::optional<uint64_t>(gens_.logs)) {
    const std::string prefix = UnroutedFamilyPrefix(gens_.logs);
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) ++n;
    Status st = FromLevelDb(it->status(), "counting unrouted events");
    if (!st.ok()) return st;
  } else {
    // A store written before the index (or whose derived records a repair
    // dropped): index the live log generation once. Nothing else runs yet.
    leveldb::WriteBatch batch;
    const uint32_t gen = gens_.logs;  // read here: the analysis cannot see the lock in the lambda
    Status st = ScanUnrouted(db_.get(), nullptr, *profile_,
                             [&](StoredEvent stored, const Result<DecodedEvent>&) {
                               batch.Put(UnroutedKey(gen, stored.seq), "");
                               ++n;
                               return true;
                             });
    if (!st.ok()) return st;
    PutNumber(&batch, MetaKey("unrouted_index"), gens_.logs);
    st = FromLevelDb(db_->Write(Synced(), &batch), "writing the index of unrouted events");
    if (!st.ok()) return st;
  }
  unrouted_stored_.store(n);
  return Status::OK();
}

Status StoreImpl::ListUnrouted(const Profile* profile,
                               const std::function<bool(const UnroutedEvent&)>& fn) {
  std::shared_ptr<const Profile> live;
  uint32_t gen = 0;
  SnapshotGuard snapshot;
  {
    // The generation, its profile and the snapshot agree (as in Verify).
    ReaderLock guard(&rebuild_mu_);
    live = profile_;
    gen = gens_.logs;
    snapshot = SnapshotGuard(db_.get());
  }
  if (profile != nullptr && profile->Fingerprint() != live->Fingerprint()) {
    return ScanUnrouted(db_.get(), snapshot.get(), *profile,
                        [&](StoredEvent stored, const Result<DecodedEvent>& decoded) {
                          return fn(ToUnrouted(std::move(stored), decoded, *profile));
                        });
  }
  // The store's own profile: through the live generation's index.
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions(snapshot.get())));
  const std::string prefix = UnroutedFamilyPrefix(gen);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::optional<uint64_t> seq = ParseSeqKey(View(it->key()), prefix);
    if (!seq) return Status::Corruption("malformed unrouted index key");
    std::string value;
    leveldb::Status s = db_->Get(ScanOptions(snapshot.get()), EventKey(*seq), &value);
    if (s.IsNotFound()) {
      return Status::Corruption("the unrouted index names a/" + std::to_string(*seq) +
                                ", which is not stored");
    }
    if (!s.ok()) return FromLevelDb(s, "reading an unrouted event");
    const std::string key = EventKey(*seq);
    Result<StoredEvent> stored = DecodeStoredEvent(key, value);
    if (!stored.ok()) return stored.status();
    Result<DecodedEvent> decoded = DecodeEvent(stored->body, *live);
    if (!fn(ToUnrouted(std::move(*stored), decoded, *live))) break;
  }
  return FromLevelDb(it->status(), "listing unrouted events");
}

}  // namespace eventfold::storage
