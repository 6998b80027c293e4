#include "store/quarantine_log.h"

#include <leveldb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <string_view>

#include "core/quarantine_headers.h"
#include "core/start_thread.h"
#include "replay/check.h"
#include "storage/dir_sync.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/missing_current.h"
#include "storage/record_codec.h"

namespace eventfold::storage {

QuarantineLog::QuarantineLog(std::string dir, const Options& options,
                             std::atomic<uint64_t>* dropped, std::atomic<uint64_t>* headers_dropped)
    : dir_(std::move(dir)),
      options_(options),
      clock_(options.clock ? options.clock : SystemClock()),
      dropped_(dropped),
      headers_dropped_(headers_dropped) {
  Result<std::shared_ptr<leveldb::DB>> opened = OpenDb();
  MutexLock lock(&mu_);
  if (opened.ok()) {
    db_ = std::move(*opened);
  } else {
    (void)Fail(opened.status(), 0);
  }
}

QuarantineLog::~QuarantineLog() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

Status QuarantineLog::Start() {
  return StartThread(&writer_, "the quarantine's writer", [this] { WriterLoop(); });
}

Result<std::shared_ptr<leveldb::DB>> QuarantineLog::OpenDb() {
  leveldb::Options lo;
  lo.create_if_missing = true;
  lo.paranoid_checks = options_.paranoid_checks;
  lo.write_buffer_size = 1 << 20;  // small records, rarely read
  lo.max_open_files = 64;          // beside the store's own
  if (options_.env) lo.env = options_.env;
  // Refused deliveries are diagnostics, but a lost CURRENT must not cost
  // them all: the quarantine stays closed (retried) until it is repaired.
  Status st = storage::RefuseDatabaseWithoutCurrent(lo.env, dir_, "the quarantine",
                                                    storage::ParentDir(dir_));
  if (!st.ok()) return st;
  const bool existed = lo.env->FileExists(dir_);
  leveldb::DB* raw = nullptr;
  st = FromLevelDb(leveldb::DB::Open(lo, dir_, &raw), "opening the quarantine " + dir_);
  if (!st.ok()) return st;
  std::shared_ptr<leveldb::DB> db(raw);
  // LevelDB syncs what it writes inside the directory; the directory's own
  // name, new in the store's, is ours to make durable.
  if (!existed) {
    st = storage::SyncDir(lo.env, storage::ParentDir(dir_));
    if (!st.ok()) return st;
  }
  // Every entry's size, for the byte cap: the cap bounds the scan too.
  sizes_.clear();
  bytes_ = 0;
  next_ = 1;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ScanOptions()));
  const std::string prefix(kQuarantinePrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::optional<uint64_t> seq = ParseSeqKey(View(it->key()), kQuarantinePrefix);
    if (!seq) continue;
    const uint64_t bytes = it->key().size() + it->value().size();
    sizes_.push_back(Entry{*seq, bytes});
    bytes_ += bytes;
    next_ = *seq + 1;
  }
  kept_.store(sizes_.size());
  st = FromLevelDb(it->status(), "scanning the quarantine " + dir_);
  if (!st.ok()) return st;
  return db;
}

std::shared_ptr<leveldb::DB> QuarantineLog::Fail(const Status& st, uint64_t lost) {
  dropped_->fetch_add(lost + queue_.size(), std::memory_order_relaxed);
  handled_ += queue_.size();
  queue_.clear();
  closed_by_ = st;
  retry_due_ = clock_->NowMicros() + retry_delay_;
  retry_delay_ = std::min(retry_delay_ * 2, kMaxRetryDelay);
  if (!failure_logged_) {
    // Once per run of failures: an operator needs to know, a flood of
    // refusals must not flood the log.
    failure_logged_ = true;
    std::fprintf(stderr,
                 "eventfold: quarantine: %s; refused deliveries are dropped (counted in "
                 "quarantine_dropped) until it reopens; the store is not affected\n",
                 st.ToString().c_str());
  }
  return std::exchange(db_, nullptr);
}

Status QuarantineLog::WriteEntries(leveldb::DB* db, const std::vector<uint64_t>& seqs,
                                   const std::vector<std::string>& values, bool sync) {
  leveldb::WriteBatch batch;
  std::vector<Entry> added;
  uint64_t bytes = bytes_;
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::string key = QuarantineKey(seqs[i]);
    const uint64_t size = key.size() + values[i].size();
    batch.Put(key, values[i]);
    added.push_back(Entry{seqs[i], size});
    bytes += size;
  }
  // The oldest go first (the kept ones, then those of this batch).
  const size_t total = sizes_.size() + added.size();
  auto entry = [&](size_t i) -> const Entry& {
    return i < sizes_.size() ? sizes_[i] : added[i - sizes_.size()];
  };
  size_t evicted = 0;
  while (evicted < total && (total - evicted > options_.quarantine_max_entries ||
                             bytes > options_.quarantine_max_bytes)) {
    batch.Delete(QuarantineKey(entry(evicted).seq));
    bytes -= entry(evicted).bytes;
    ++evicted;
  }
  leveldb::WriteOptions wo;
  wo.sync = sync;
  Status st = FromLevelDb(db->Write(wo, &batch), "writing the quarantine " + dir_);
  if (!st.ok()) return st;
  sizes_.insert(sizes_.end(), added.begin(), added.end());
  sizes_.erase(sizes_.begin(), sizes_.begin() + static_cast<ptrdiff_t>(evicted));
  bytes_ = bytes;
  if (!seqs.empty()) next_ = std::max(next_, seqs.back() + 1);
  kept_.store(sizes_.size());
  return Status::OK();
}

Status QuarantineLog::Import(const std::vector<std::pair<std::string, std::string>>& records) {
  std::shared_ptr<leveldb::DB> db;
  {
    MutexLock lock(&mu_);
    db = db_;
  }
  if (!db) return Status::Unavailable("the quarantine " + dir_ + " is not open");
  std::vector<uint64_t> seqs;
  std::vector<std::string> values;
  for (const auto& [key, value] : records) {
    const std::optional<uint64_t> seq = ParseSeqKey(key, kQuarantinePrefix);
    // Seqs this database passed were imported (or evicted) before.
    if (!seq || *seq < next_ || (!seqs.empty() && *seq <= seqs.back())) continue;
    if (key.size() + value.size() > options_.quarantine_max_bytes) continue;
    seqs.push_back(*seq);
    values.push_back(value);
  }
  return WriteEntries(db.get(), seqs, values, /*sync=*/true);
}

void QuarantineLog::Add(RefusedDelivery r) {
  if (options_.quarantine_max_entries == 0 || options_.quarantine_max_bytes == 0) return;
  r.received_at = clock_->NowMicros();
  r.status = HttpStatus(r.outcome);
  headers_dropped_->fetch_add(TrimQuarantineHeaders(&r.headers), std::memory_order_relaxed);
  if (r.body_bytes == 0) r.body_bytes = r.body_prefix.size();
  if (r.body_prefix.size() > kQuarantineBodyBytes) r.body_prefix.resize(kQuarantineBodyBytes);
  if (r.reason.size() > kQuarantineBodyBytes) r.reason.resize(kQuarantineBodyBytes);

  MutexLock lock(&mu_);
  if (const size_t limit = options_.quarantine_max_per_second; limit > 0) {
    const int64_t second = r.received_at / 1000000;
    if (second != second_) {
      second_ = second;
      this_second_ = 0;
    }
    if (this_second_ >= limit) {
      dropped_->fetch_add(1, std::memory_order_relaxed);
      return;
    }
    ++this_second_;
  }
  if (!db_ || stop_ || queue_.size() >= kQueueEntries) {
    dropped_->fetch_add(1, std::memory_order_relaxed);
    return;
  }
  queue_.push_back(std::move(r));
  ++enqueued_;
  cv_.notify_all();
}

void QuarantineLog::WriterLoop() {
  MutexLock lock(&mu_);
  for (;;) {
    if (!db_) {
      // Closed after a failure (Add drops meanwhile, so nothing is queued):
      // reopen when due.
      if (stop_) return;
      if (clock_->NowMicros() < retry_due_) {
        clock_->WaitUntil(lock.native(), cv_, retry_due_);
        continue;
      }
      lock.Unlock();
      Result<std::shared_ptr<leveldb::DB>> opened = OpenDb();
      lock.Lock();
      ++reopen_attempts_;
      if (opened.ok()) {
        db_ = std::move(*opened);
        closed_by_ = Status();
        retry_delay_ = kFirstRetryDelay;
        if (failure_logged_) {
          failure_logged_ = false;
          std::fprintf(stderr, "eventfold: quarantine %s reopened\n", dir_.c_str());
        }
      } else {
        (void)Fail(opened.status(), 0);
      }
      cv_.notify_all();
      continue;
    }
    if (queue_.empty()) {
      if (stop_) return;
      cv_.wait(lock.native());
      continue;
    }
    std::vector<RefusedDelivery> batch;
    batch.swap(queue_);
    in_flight_ = batch.size();
    std::shared_ptr<leveldb::DB> db = db_;
    lock.Unlock();
    std::vector<uint64_t> seqs;
    std::vector<std::string> values;
    uint64_t too_big = 0;
    for (const RefusedDelivery& r : batch) {
      std::string value = EncodeRefused(r);
      const uint64_t seq = next_ + seqs.size();
      if (QuarantineKey(seq).size() + value.size() > options_.quarantine_max_bytes) {
        ++too_big;
        continue;
      }
      seqs.push_back(seq);
      values.push_back(std::move(value));
    }
    // Unsynced: a refusal is diagnostics, and a crash may lose the last few.
    const Status st = WriteEntries(db.get(), seqs, values, /*sync=*/false);
    lock.Lock();
    in_flight_ = 0;
    handled_ += batch.size();
    dropped_->fetch_add(too_big, std::memory_order_relaxed);
    std::shared_ptr<leveldb::DB> closed;
    if (!st.ok()) closed = Fail(st, values.size());
    cv_.notify_all();
    if (closed) {
      // Closing waits for LevelDB's background work: not under mu_, which
      // Add takes on the ack path.
      lock.Unlock();
      closed.reset();
      db.reset();
      lock.Lock();
    }
  }
}

void QuarantineLog::Flush() {
  MutexLock lock(&mu_);
  const uint64_t target = enqueued_;
  while (handled_ < target && !stop_) cv_.wait(lock.native());
}

Status QuarantineLog::List(uint64_t after_seq,
                           const std::function<bool(const RefusedDelivery&)>& fn) {
  // No seq follows the largest (and after_seq + 1 would wrap to 0), as in
  // the change feed's Read.
  if (after_seq == std::numeric_limits<uint64_t>::max()) return Status::OK();
  Flush();
  std::shared_ptr<leveldb::DB> db = this->db();
  if (!db) {
    return Status::Unavailable("the quarantine " + dir_ +
                               " is closed after a storage error; it reopens in the background");
  }
  SnapshotGuard snapshot(db.get());
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ScanOptions(snapshot.get())));
  const std::string prefix(kQuarantinePrefix);
  // Seqs are big-endian, so key order is seq order.
  it->Seek(QuarantineKey(after_seq + 1));
  for (; it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Result<RefusedDelivery> r = DecodeRefused(View(it->key()), View(it->value()));
    if (!r.ok()) return r.status();
    if (!fn(*r)) break;
  }
  return FromLevelDb(it->status(), "listing the quarantine " + dir_);
}

void QuarantineLog::Check(const CheckProblemFn& on_problem, CheckSummary* sum) {
  auto problem = [&](std::string key, std::string message) {
    ++sum->problems;
    on_problem(CheckProblem{std::move(key), std::move(message)});
  };
  std::shared_ptr<leveldb::DB> db = this->db();
  if (!db) {
    problem("quarantine/", "the quarantine's database " + dir_ + " is not open (see the log)");
    return;
  }
  leveldb::ReadOptions ro = ScanOptions();
  ro.verify_checksums = true;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ++sum->records;
    ++sum->refused;
    const std::string key = "quarantine/" + storage::Printable(View(it->key()));
    if (!ParseSeqKey(View(it->key()), kQuarantinePrefix)) {
      problem(key, "malformed quarantine key");
      continue;
    }
    Result<RefusedDelivery> r = DecodeRefused(View(it->key()), View(it->value()));
    if (!r.ok()) problem(key, r.status().message());
  }
  if (!it->status().ok()) problem("quarantine/", "reading: " + it->status().ToString());
}

uint64_t QuarantineLog::Held() {
  MutexLock lock(&mu_);
  return kept_.load() + in_flight_ + queue_.size();
}

Status QuarantineLog::Closed() {
  MutexLock lock(&mu_);
  return db_ ? Status() : closed_by_;
}

std::shared_ptr<leveldb::DB> QuarantineLog::db() {
  MutexLock lock(&mu_);
  return db_;
}

uint64_t QuarantineLog::WaitForReopenAttempt(uint64_t after, int64_t timeout_micros, bool* open) {
  MutexLock lock(&mu_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(timeout_micros);
  while (reopen_attempts_ <= after) {
    if (cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout) break;
  }
  if (open) *open = db_ != nullptr;
  return reopen_attempts_;
}

}  // namespace eventfold::storage
