#include "replay/db_copy.h"

#include <leveldb/filter_policy.h>
#include <leveldb/write_batch.h>

#include <memory>

#include "core/crc32c.h"
#include "storage/leveldb_status.h"

namespace eventfold {
namespace {

constexpr size_t kBatchBytes = 1 << 20;

void Add(DbDigest* d, const leveldb::Slice& key, const leveldb::Slice& value) {
  ++d->records;
  d->bytes += key.size() + value.size();
  for (const leveldb::Slice& s : {key, value}) {
    // FNV-1a over each part's CRC-32C and length: order and boundaries count.
    for (uint64_t v :
         {uint64_t{Crc32c(std::string_view(s.data(), s.size()))}, uint64_t{s.size()}}) {
      d->hash = (d->hash ^ v) * 0x100000001b3ull;
    }
  }
}

leveldb::Options DbOptions(leveldb::Env* env, const leveldb::FilterPolicy* filter) {
  leveldb::Options o;
  o.paranoid_checks = true;
  o.filter_policy = filter;
  if (env) o.env = env;
  return o;
}

// A database opened with its filter policy, which must outlive it.
struct ExistingDb {
  std::unique_ptr<const leveldb::FilterPolicy> filter;
  std::unique_ptr<leveldb::DB> db;  // after `filter`: closed before it goes
};

// Opens the database in `dir`, which must exist.
Result<ExistingDb> OpenExisting(const std::string& dir, leveldb::Env* env) {
  ExistingDb e;
  e.filter.reset(leveldb::NewBloomFilterPolicy(10));
  leveldb::Options o = DbOptions(env, e.filter.get());
  o.create_if_missing = false;
  leveldb::DB* raw = nullptr;
  Status st = storage::FromLevelDb(leveldb::DB::Open(o, dir, &raw), "opening " + dir);
  if (!st.ok()) return st;
  e.db.reset(raw);
  return e;
}

}  // namespace

Status Abandoned() { return Status::Unavailable("abandoned: asked to stop"); }

Result<DbDigest> CopyDatabase(leveldb::DB* src, const leveldb::Snapshot* snapshot,
                              const std::string& out, leveldb::Env* env,
                              const std::atomic<bool>* abandon) {
  std::unique_ptr<const leveldb::FilterPolicy> filter(leveldb::NewBloomFilterPolicy(10));
  leveldb::Options o = DbOptions(env, filter.get());
  o.create_if_missing = true;
  o.error_if_exists = true;
  leveldb::DB* raw = nullptr;
  Status st = storage::FromLevelDb(leveldb::DB::Open(o, out, &raw), "creating " + out);
  if (!st.ok()) return st;
  std::unique_ptr<leveldb::DB> dst(raw);

  leveldb::ReadOptions ro;
  ro.snapshot = snapshot;
  ro.verify_checksums = true;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(src->NewIterator(ro));
  DbDigest digest;
  leveldb::WriteBatch batch;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    batch.Put(it->key(), it->value());
    Add(&digest, it->key(), it->value());
    if (batch.ApproximateSize() >= kBatchBytes) {
      st = storage::FromLevelDb(dst->Write(leveldb::WriteOptions(), &batch), "writing " + out);
      if (!st.ok()) return st;
      batch.Clear();
      if (abandon != nullptr && abandon->load()) return Abandoned();
    }
  }
  st = storage::FromLevelDb(it->status(), "reading the store for its backup");
  if (!st.ok()) return st;
  leveldb::WriteOptions synced;
  synced.sync = true;
  st = storage::FromLevelDb(dst->Write(synced, &batch), "writing " + out);
  if (!st.ok()) return st;
  if (abandon != nullptr && abandon->load()) return Abandoned();  // before a long compaction
  // Everything into synced tables: the copy opens without a log to replay.
  dst->CompactRange(nullptr, nullptr);
  return digest;
}

Result<DbDigest> DigestDatabase(const std::string& dir, leveldb::Env* env,
                                const std::atomic<bool>* abandon) {
  Result<ExistingDb> opened = OpenExisting(dir, env);
  if (!opened.ok()) return opened.status();
  leveldb::DB* db = opened->db.get();
  leveldb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));
  DbDigest digest;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    Add(&digest, it->key(), it->value());
    if (abandon != nullptr && digest.records % 4096 == 0 && abandon->load()) return Abandoned();
  }
  Status st = storage::FromLevelDb(it->status(), "reading " + dir);
  if (!st.ok()) return st;
  return digest;
}

Result<bool> DatabaseHoldsKey(const std::string& dir, leveldb::Env* env, const std::string& key) {
  Result<ExistingDb> opened = OpenExisting(dir, env);
  if (!opened.ok()) return opened.status();
  leveldb::DB* db = opened->db.get();
  leveldb::ReadOptions ro;
  ro.verify_checksums = true;
  std::string value;
  const leveldb::Status s = db->Get(ro, key, &value);
  if (s.IsNotFound()) return false;
  Status st = storage::FromLevelDb(s, "reading " + dir);
  if (!st.ok()) return st;
  return true;
}

}  // namespace eventfold
