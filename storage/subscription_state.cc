// Durable subscription state: checkpoints and dead letters (parked changes).

#include <memory>

#include <leveldb/write_batch.h>

#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/store_impl.h"

namespace eventfold::storage {
namespace {

std::string_view View(const leveldb::Slice& s) { return {s.data(), s.size()}; }

leveldb::WriteOptions Synced() {
  leveldb::WriteOptions wo;
  wo.sync = true;
  return wo;
}

Status CheckName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("subscription: name must be 1-128 bytes without NUL");
  }
  return Status::OK();
}

}  // namespace

Result<uint64_t> StoreImpl::GetCheckpoint(std::string_view subscription) {
  if (Status st = CheckName(subscription); !st.ok()) return st;
  std::string value;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), CheckpointKey(subscription), &value);
  if (s.IsNotFound()) return uint64_t{0};
  if (!s.ok()) return FromLevelDb(s, "reading checkpoint");
  if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) {
    return Status::Corruption("checkpoint of " + std::string(subscription) + " is malformed");
  }
  return static_cast<uint64_t>(std::stoull(value));
}

Status StoreImpl::SetCheckpoint(std::string_view subscription, uint64_t seq) {
  if (Status st = CheckName(subscription); !st.ok()) return st;
  return FromLevelDb(db_->Put(Synced(), CheckpointKey(subscription), std::to_string(seq)),
                     "writing checkpoint");
}

Status StoreImpl::ListSubscriptions(
    const std::function<bool(const std::string&, uint64_t)>& fn) {
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix(kCheckpointPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::string value = it->value().ToString();
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) {
      return Status::Corruption("a checkpoint is malformed");
    }
    if (!fn(std::string(View(it->key()).substr(prefix.size())), std::stoull(value))) break;
  }
  return FromLevelDb(it->status(), "listing subscriptions");
}

Status StoreImpl::Park(const ParkedChange& parked) {
  if (Status st = CheckName(parked.subscription); !st.ok()) return st;
  return FromLevelDb(db_->Put(Synced(), ParkedKey(parked.subscription, parked.change.seq),
                              EncodeParked(parked)),
                     "parking a change");
}

Status StoreImpl::ListParked(std::string_view subscription,
                             const std::function<bool(const ParkedChange&)>& fn) {
  if (Status st = CheckName(subscription); !st.ok()) return st;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix = ParkedPrefix(subscription);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<ParkedChange> p = DecodeParked(View(it->key()), View(it->value()));
    if (!p.ok()) return p.status();
    if (!fn(*p)) break;
  }
  return FromLevelDb(it->status(), "listing dead letters");
}

Status StoreImpl::Unpark(std::string_view subscription, uint64_t seq) {
  if (Status st = CheckName(subscription); !st.ok()) return st;
  std::string ignored;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), ParkedKey(subscription, seq), &ignored);
  if (s.IsNotFound()) {
    return Status::NotFound("no dead letter " + std::to_string(seq) + " in subscription " +
                            std::string(subscription));
  }
  if (!s.ok()) return FromLevelDb(s, "reading a dead letter");
  return FromLevelDb(db_->Delete(Synced(), ParkedKey(subscription, seq)), "removing a dead letter");
}

}  // namespace eventfold::storage
