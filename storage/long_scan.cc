#include "storage/long_scan.h"

#include <utility>

#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"

namespace eventfold::storage {

LongScan::LongScan(leveldb::DB* db, const leveldb::Snapshot* snapshot, std::string prefix,
                   std::string context)
    : db_(db),
      snapshot_(snapshot),
      prefix_(std::move(prefix)),
      context_(std::move(context)),
      it_(db->NewIterator(ScanOptions(snapshot))) {}

bool LongScan::Next() {
  if (!it_) return false;
  if (!started_) {
    started_ = true;
    it_->Seek(prefix_);
  } else if (++since_refresh_ == kRefreshEvery) {
    Refresh();
  } else {
    it_->Next();
  }
  if (it_->Valid() && it_->key().starts_with(prefix_)) return true;
  status_ = FromLevelDb(it_->status(), context_);
  it_.reset();
  return false;
}

void LongScan::Refresh() {
  since_refresh_ = 0;
  const std::string at(it_->key().data(), it_->key().size());
  it_.reset();  // first: the memtable it holds may go
  it_.reset(db_->NewIterator(ScanOptions(snapshot_)));
  it_->Seek(at);
  // On a snapshot `at` is still there; without one the scan may have
  // deleted it, and the seek already stands on the record after it.
  if (it_->Valid() && it_->key() == leveldb::Slice(at)) it_->Next();
}

std::string_view LongScan::key() const { return View(it_->key()); }

std::string_view LongScan::value() const { return View(it_->value()); }

Status LongScan::status() const { return it_ ? FromLevelDb(it_->status(), context_) : status_; }

}  // namespace eventfold::storage
