// Durable subscription state: checkpoints, dead letters (parked changes) and
// the feed retention that follows the checkpoints.

#include <leveldb/write_batch.h>

#include <algorithm>
#include <memory>

#include "core/parse_number.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/meta_text.h"
#include "storage/record_codec.h"
#include "store/store_impl.h"

namespace eventfold::storage {
namespace {

Status CheckName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("subscription: name must be 1-128 bytes without NUL");
  }
  return Status::OK();
}

}  // namespace

Result<uint64_t> StoreImpl::GetCheckpoint(std::string_view subscription) {
  if (Status st = CheckName(subscription); !st.ok()) return st;
  Result<std::optional<uint64_t>> seq =
      ReadNumber(db_.get(), leveldb::ReadOptions(), CheckpointKey(subscription));
  if (!seq.ok()) {
    return seq.status().WithContext("checkpoint of " + std::string(subscription));
  }
  return seq->value_or(0);
}

Status StoreImpl::SetCheckpoint(std::string_view subscription, uint64_t seq) {
  if (Status st = CheckName(subscription); !st.ok()) return st;
  MutexLock trim_guard(&trim_mu_);
  leveldb::WriteBatch batch;
  PutNumber(&batch, CheckpointKey(subscription), seq);
  return FromLevelDb(db_->Write(Synced(), &batch), "writing checkpoint");
}

bool StoreImpl::ClaimSubscription(std::string_view subscription) {
  MutexLock lock(&claims_mu_);
  return claimed_subscriptions_.emplace(subscription).second;
}

void StoreImpl::ReleaseSubscription(std::string_view subscription) {
  MutexLock lock(&claims_mu_);
  if (auto it = claimed_subscriptions_.find(subscription); it != claimed_subscriptions_.end()) {
    claimed_subscriptions_.erase(it);
  }
}

Status StoreImpl::ListSubscriptions(const std::function<bool(const std::string&, uint64_t)>& fn) {
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix(kCheckpointPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<std::string> text = DecodeText(View(it->key()), View(it->value()));
    if (!text.ok()) return text.status();
    std::optional<uint64_t> seq = ParseU64(*text);
    if (!seq) return Status::Corruption("a checkpoint is not a 64-bit decimal number");
    if (!fn(std::string(View(it->key()).substr(prefix.size())), *seq)) break;
  }
  return FromLevelDb(it->status(), "listing subscriptions");
}

Status StoreImpl::Park(const ParkedChange& parked) {
  if (Status st = CheckName(parked.subscription); !st.ok()) return st;
  return FromLevelDb(
      db_->Put(Synced(), ParkedKey(parked.subscription, parked.change.seq), EncodeParked(parked)),
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

Result<FeedTrimSummary> StoreImpl::TrimFeed(uint64_t grace_changes) {
  // Held across reading the checkpoints and deleting: a checkpoint written
  // meanwhile (a new subscription registering) waits, then sees the result.
  MutexLock trim_guard(&trim_mu_);
  FeedTrimSummary sum;
  sum.last_seq = LastSeq();
  uint64_t min_checkpoint = UINT64_MAX;
  Status st = ListSubscriptions([&](const std::string&, uint64_t checkpoint) {
    ++sum.subscriptions;
    min_checkpoint = std::min(min_checkpoint, checkpoint);
    return true;
  });
  if (!st.ok()) return st;
  sum.min_checkpoint = sum.subscriptions > 0 ? min_checkpoint : 0;

  // Trim seq <= bound: below every checkpoint by the grace, never the newest.
  uint64_t bound = 0;
  if (sum.subscriptions > 0 && sum.last_seq > 0) {
    bound = sum.min_checkpoint > grace_changes ? sum.min_checkpoint - grace_changes : 0;
    bound = std::min(bound, sum.last_seq - 1);
  }
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
  const std::string prefix(kFeedPrefix);
  const std::string end = FeedKey(bound + 1);
  leveldb::WriteBatch batch;
  size_t in_batch = 0;
  for (it->Seek(prefix); bound > 0 && it->Valid() && it->key().compare(end) < 0; it->Next()) {
    batch.Delete(it->key());
    ++sum.trimmed;
    if (++in_batch == 10000) {  // bounded batches: a first trim may be large
      st = FromLevelDb(db_->Write(leveldb::WriteOptions(), &batch), "trimming the change feed");
      if (!st.ok()) return st;
      batch.Clear();
      in_batch = 0;
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "trimming the change feed");
  // Synced: a checkpoint written after this returns must not outlive it.
  st = FromLevelDb(db_->Write(Synced(), &batch), "trimming the change feed");
  if (!st.ok()) return st;

  // The iterator's implicit snapshot predates the deletes: seek past them.
  it->Seek(end);
  if (it->Valid() && it->key().starts_with(prefix)) {
    sum.first_seq = ParseSeqKey(View(it->key()), kFeedPrefix).value_or(0);
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading the change feed");
  return sum;
}

Status StoreImpl::Compact() {
  db_->CompactRange(nullptr, nullptr);
  return Status::OK();
}

}  // namespace eventfold::storage
