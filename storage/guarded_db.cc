#include "storage/guarded_db.h"

#include <leveldb/iterator.h>

#include "storage/read_only_env.h"

namespace eventfold::storage {
namespace {

leveldb::Status Closed() {
  return leveldb::Status::IOError("the store's database is closed after a storage error",
                                  "it reopens once the disk works again");
}

}  // namespace

GuardedDb::GuardedDb(leveldb::DB* inner, const leveldb::Options& options, std::string path)
    : inner_(inner),
      reopen_(ReopenWith{options, std::move(path)}),
      read_only_env_(
          std::make_unique<ReadOnlyEnv>(options.env ? options.env : leveldb::Env::Default())) {}

GuardedDb::~GuardedDb() { delete inner_.exchange(nullptr); }

leveldb::DB* GuardedDb::Enter() {
  for (;;) {
    active_.fetch_add(1);
    if (!reopening_.load()) {
      leveldb::DB* db = inner_.load();
      if (db == nullptr) Leave();
      return db;
    }
    Leave();
    MutexLock lock(&gate_mu_);
    while (reopening_.load()) gate_cv_.wait(lock.native());
  }
}

void GuardedDb::Leave() {
  if (active_.fetch_sub(1) == 1 && reopening_.load()) {
    MutexLock lock(&gate_mu_);
    gate_cv_.notify_all();
  }
}

void GuardedDb::LeaveCleanup(void* self, void*) { static_cast<GuardedDb*>(self)->Leave(); }

void GuardedDb::Fail() {
  failed_.store(true, std::memory_order_release);
  if (on_failure_) on_failure_();
}

void GuardedDb::StopWrites() {
  MutexLock lock(&write_mu_);
  Fail();
}

leveldb::Status GuardedDb::Put(const leveldb::WriteOptions& options, const leveldb::Slice& key,
                               const leveldb::Slice& value) {
  leveldb::WriteBatch batch;
  batch.Put(key, value);
  return Write(options, &batch);
}

leveldb::Status GuardedDb::Delete(const leveldb::WriteOptions& options, const leveldb::Slice& key) {
  leveldb::WriteBatch batch;
  batch.Delete(key);
  return Write(options, &batch);
}

leveldb::Status GuardedDb::Write(const leveldb::WriteOptions& options,
                                 leveldb::WriteBatch* updates) {
  MutexLock lock(&write_mu_);
  if (failed()) {
    return leveldb::Status::IOError(
        "store stopped writing after an earlier write failed; reopen it to resume");
  }
  leveldb::DB* db = Enter();
  if (db == nullptr) return Closed();
  leveldb::Status s = db->Write(options, updates);
  Leave();
  if (!s.ok()) Fail();
  return s;
}

bool GuardedDb::TryWrite(leveldb::WriteBatch* updates, leveldb::Status* status) {
  if (!write_mu_.try_lock()) return false;
  bool wrote = false;
  if (!failed()) {
    leveldb::DB* db = Enter();
    if (db != nullptr) {
      *status = db->Write(leveldb::WriteOptions(), updates);
      Leave();
      if (!status->ok()) Fail();
      wrote = true;
    }
  }
  write_mu_.unlock();
  return wrote;
}

leveldb::Status GuardedDb::Get(const leveldb::ReadOptions& options, const leveldb::Slice& key,
                               std::string* value) {
  leveldb::DB* db = Enter();
  if (db == nullptr) return Closed();
  leveldb::Status s = db->Get(options, key, value);
  Leave();
  return s;
}

leveldb::Iterator* GuardedDb::NewIterator(const leveldb::ReadOptions& options) {
  leveldb::DB* db = Enter();
  if (db == nullptr) return leveldb::NewErrorIterator(Closed());
  leveldb::Iterator* it = db->NewIterator(options);
  it->RegisterCleanup(&GuardedDb::LeaveCleanup, this, nullptr);  // its use ends when deleted
  return it;
}

const leveldb::Snapshot* GuardedDb::GetSnapshot() {
  leveldb::DB* db = Enter();
  if (db == nullptr) return nullptr;
  return db->GetSnapshot();  // its use ends with ReleaseSnapshot
}

void GuardedDb::ReleaseSnapshot(const leveldb::Snapshot* snapshot) {
  if (snapshot == nullptr) return;
  inner_.load()->ReleaseSnapshot(snapshot);
  Leave();
}

bool GuardedDb::GetProperty(const leveldb::Slice& property, std::string* value) {
  leveldb::DB* db = Enter();
  if (db == nullptr) return false;
  const bool found = db->GetProperty(property, value);
  Leave();
  return found;
}

void GuardedDb::GetApproximateSizes(const leveldb::Range* range, int n, uint64_t* sizes) {
  leveldb::DB* db = Enter();
  if (db == nullptr) {
    for (int i = 0; i < n; ++i) sizes[i] = 0;
    return;
  }
  db->GetApproximateSizes(range, n, sizes);
  Leave();
}

void GuardedDb::CompactRange(const leveldb::Slice* begin, const leveldb::Slice* end) {
  leveldb::DB* db = Enter();
  if (db == nullptr) return;
  db->CompactRange(begin, end);
  Leave();
}

leveldb::Status GuardedDb::Reopen(const Clock& clock, int64_t wait_micros) {
  if (!reopen_) return leveldb::Status::NotSupported("this database cannot be reopened");
  MutexLock write_lock(&write_mu_);  // no write runs or starts meanwhile
  MutexLock lock(&gate_mu_);
  reopening_.store(true);
  const int64_t deadline = clock.NowMicros() + wait_micros;
  while (active_.load() != 0 && clock.NowMicros() < deadline) {
    clock.WaitUntil(lock.native(), gate_cv_, deadline);  // Leave() notifies
  }
  const bool quiet = active_.load() == 0;
  leveldb::Status s;
  if (!quiet) {
    s = leveldb::Status::IOError("reopening the store's database",
                                 "still in use (an iterator or snapshot is open)");
  } else {
    delete inner_.exchange(nullptr);  // closes it: LevelDB's lock is released
    leveldb::Options options = reopen_->options;
    options.create_if_missing = false;
    options.error_if_exists = false;
    leveldb::DB* db = nullptr;
    s = leveldb::DB::Open(options, reopen_->path, &db);
    read_only_.store(false, std::memory_order_release);
    if (s.ok()) {
      inner_.store(db);
      failed_.store(false, std::memory_order_release);
    } else {
      // The disk failed the open (it writes a level-0 table, a log and a
      // manifest). Reusing the log and manifest as they are writes nothing
      // while the log's memtable fits, so this open serves reads. Writes
      // stay refused: appending behind a torn log record would lose what
      // follows it on the next open, and the next Reopen starts afresh.
      // LevelDB's own writes are refused too, by the Env: a compaction
      // appending behind a torn MANIFEST record would lose the tables it
      // replaced (storage/read_only_env.h).
      options.reuse_logs = true;
      options.env = read_only_env_.get();
      failed_.store(true, std::memory_order_release);
      if (leveldb::DB::Open(options, reopen_->path, &db).ok()) {
        inner_.store(db);
        read_only_.store(true, std::memory_order_release);
      }
    }
  }
  reopening_.store(false);
  gate_cv_.notify_all();
  return s;
}

}  // namespace eventfold::storage
