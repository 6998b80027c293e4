// The store's side of the quarantine of refused deliveries: what ingest
// refuses goes to the QuarantineLog (store/quarantine_log.h), the store's
// second LevelDB at DIR/quarantine/, written in the background and never
// able to fail the store or delay an acknowledgement.
//
// Stores written by older builds kept their refusals in the store's own
// database (q/<seq>). Open moves them: into the quarantine's database under
// the same seqs (synced), then deleted from the store's — so each is listed
// once, and an open a crash interrupts moves the rest the next time.

#include <leveldb/write_batch.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "store/store_impl.h"

namespace eventfold::storage {
namespace {

// Records moved per write: bounds what the move holds in memory.
constexpr size_t kMoveBatch = 512;

}  // namespace

Status StoreImpl::Add(RefusedDelivery r) {
  quarantine_->Add(std::move(r));
  return Status::OK();
}

Status StoreImpl::List(const std::function<bool(const RefusedDelivery&)>& fn) {
  return quarantine_->List(0, fn);
}

Status StoreImpl::ListAfter(uint64_t after_seq,
                            const std::function<bool(const RefusedDelivery&)>& fn) {
  return quarantine_->List(after_seq, fn);
}

void StoreImpl::MoveLegacyQuarantine() {
  if (!quarantine_->db()) return;  // not open: they stay, and move on a later open
  const std::string prefix(kQuarantinePrefix);
  std::string from = prefix;
  for (;;) {
    std::vector<std::pair<std::string, std::string>> records;
    {
      std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ScanOptions()));
      for (it->Seek(from); it->Valid() && it->key().starts_with(prefix); it->Next()) {
        records.emplace_back(it->key().ToString(), it->value().ToString());
        if (records.size() == kMoveBatch) break;
      }
      if (!it->status().ok()) return;  // a read error: they stay where they are
    }
    if (records.empty()) return;
    Status st = quarantine_->Import(records);
    leveldb::WriteBatch batch;
    for (const auto& record : records) batch.Delete(record.first);
    if (st.ok()) st = FromLevelDb(db_->Write(Synced(), &batch), "moving the quarantine");
    if (!st.ok()) {
      std::fprintf(stderr, "eventfold: moving the quarantine out of %s: %s (retried on open)\n",
                   path_.c_str(), st.ToString().c_str());
      return;
    }
    from = records.back().first + '\0';
  }
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
    quarantine_->Add(std::move(r));
  }
}

}  // namespace eventfold::storage
