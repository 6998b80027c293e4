// The quarantine of refused deliveries: bounded, best effort, never projected.

#include <leveldb/write_batch.h>

#include <memory>

#include "core/credential_headers.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "store/store_impl.h"

namespace eventfold::storage {

Status StoreImpl::RecoverQuarantine() {
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix(kQuarantinePrefix);
  it->Seek(prefix);
  if (it->Valid() && it->key().starts_with(prefix)) {
    quarantine_oldest_ = ParseSeqKey(View(it->key()), kQuarantinePrefix).value_or(1);
    it->Seek(PrefixEnd(prefix));
    it->Valid() ? it->Prev() : it->SeekToLast();
    quarantine_next_ = ParseSeqKey(View(it->key()), kQuarantinePrefix).value_or(0) + 1;
  }
  return FromLevelDb(it->status(), "scanning quarantine");
}

Status StoreImpl::Quarantine(RefusedDelivery r) {
  if (options_.quarantine_max_entries == 0) return Status::OK();
  r.received_at = clock_->NowMicros();
  r.status = HttpStatus(r.outcome);
  std::erase_if(r.headers, [](const auto& h) { return IsCredentialHeader(h.first); });
  if (r.body_bytes == 0) r.body_bytes = r.body_prefix.size();
  if (r.body_prefix.size() > kQuarantineBodyBytes) r.body_prefix.resize(kQuarantineBodyBytes);

  std::lock_guard lock(quarantine_mu_);
  leveldb::WriteBatch batch;
  batch.Put(QuarantineKey(quarantine_next_), EncodeRefused(r));
  uint64_t oldest = quarantine_oldest_;
  while (quarantine_next_ + 1 - oldest > options_.quarantine_max_entries) {
    batch.Delete(QuarantineKey(oldest++));
  }
  Status st = FromLevelDb(db_->Write(leveldb::WriteOptions(), &batch), "quarantining");
  if (st.ok()) {
    ++quarantine_next_;
    quarantine_oldest_ = oldest;
  }
  return st;
}

Status StoreImpl::ListRefused(const std::function<bool(const RefusedDelivery&)>& fn) {
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
  const std::string prefix(kQuarantinePrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<RefusedDelivery> r = DecodeRefused(View(it->key()), View(it->value()));
    if (!r.ok()) return r.status();
    if (!fn(*r)) break;
  }
  return FromLevelDb(it->status(), "listing quarantine");
}

void StoreImpl::QuarantineRefusals(const Delivery* const* deliveries,
                                   const std::vector<IngestResult>& results) {
  for (size_t i = 0; i < results.size(); ++i) {
    const Outcome o = results[i].outcome;
    if (o != Outcome::kInvalid && o != Outcome::kTooLarge && o != Outcome::kConflict) continue;
    RefusedDelivery r;
    r.outcome = o;
    r.reason = results[i].message;
    r.headers = deliveries[i]->headers;
    r.body_prefix = deliveries[i]->body.substr(0, kQuarantineBodyBytes);
    r.body_bytes = deliveries[i]->body.size();
    (void)Quarantine(std::move(r));
  }
}

}  // namespace eventfold::storage
