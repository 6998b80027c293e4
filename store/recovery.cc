// Recovery after a failed write (see StoreImpl::RecoveryLoop): a background
// thread waits on the store's Clock, probes the disk and reopens the
// database in place, so a store recovers without a caller's reopen and
// without waiting for the next ingest.

#include <leveldb/env.h>

#include <algorithm>
#include <memory>
#include <string>

#include "storage/leveldb_status.h"
#include "store/store_impl.h"

namespace eventfold::storage {
namespace {

// How long a reopen waits for running reads (iterators, snapshots) to end.
constexpr int64_t kReopenWaitMicros = 1000 * 1000;

}  // namespace

void StoreImpl::NoteWriteFailure() {
  MutexLock lock(&recover_mu_);
  // The first failure starts the clock: a disk that just failed is given a
  // moment, and reopening is not free.
  if (recover_due_ == 0) recover_due_ = clock_->NowMicros() + recover_delay_;
  recover_cv_.notify_all();
}

void StoreImpl::RecoveryLoop() {
  MutexLock lock(&recover_mu_);
  while (!recover_stop_) {
    if (recover_due_ == 0) {
      recover_cv_.wait(lock.native());  // NoteWriteFailure and StopRecovery notify
      continue;
    }
    if (clock_->NowMicros() < recover_due_) {
      clock_->WaitUntil(lock.native(), recover_cv_, recover_due_);
      continue;
    }
    recovering_ = true;
    lock.Unlock();
    const bool reopened = !db_->failed() || TryRecover();
    lock.Lock();
    recovering_ = false;
    ++recover_attempts_;
    // A write may fail again right after a successful reopen: failed() is
    // set before NoteWriteFailure takes recover_mu_, so reading it here
    // misses no failure.
    if (reopened && !db_->failed()) {
      ++recover_successes_;
      recover_due_ = 0;
      recover_delay_ = kFirstRecoveryDelay;
    } else {
      recover_delay_ = std::min(recover_delay_ * 2, kMaxRecoveryDelay);
      recover_due_ = clock_->NowMicros() + recover_delay_;
    }
    recover_cv_.notify_all();
  }
}

void StoreImpl::StopRecovery() {
  {
    MutexLock lock(&recover_mu_);
    recover_stop_ = true;
  }
  recover_cv_.notify_all();
  if (recover_thread_.joinable()) recover_thread_.join();
}

void StoreImpl::AwaitDueRecovery() {
  if (!db_->failed()) return;
  MutexLock lock(&recover_mu_);
  if (!recovering_ && (recover_due_ == 0 || clock_->NowMicros() < recover_due_)) return;
  const uint64_t seen = recover_attempts_;
  recover_cv_.notify_all();  // a due attempt the loop has not woken for yet
  while (recover_attempts_ == seen && !recover_stop_) recover_cv_.wait(lock.native());
}

uint64_t StoreImpl::WaitForRecoveryAttempt(uint64_t after, int64_t timeout_micros,
                                           uint64_t* recovered) {
  MutexLock lock(&recover_mu_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(timeout_micros);
  while (recover_attempts_ <= after) {
    if (recover_cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout) break;
  }
  if (recovered) *recovered = recover_successes_;
  return recover_attempts_;
}

Status StoreImpl::ProbeDisk() {
  // A small synced write beside the database: does the disk take writes?
  leveldb::Env* env = options_.env ? options_.env : leveldb::Env::Default();
  const std::string probe = path_ + "/RECOVERY-PROBE";
  leveldb::WritableFile* file = nullptr;
  leveldb::Status s = env->NewWritableFile(probe, &file);
  if (s.ok()) {
    std::unique_ptr<leveldb::WritableFile> f(file);
    s = f->Append(std::string(4096, '\0'));
    if (s.ok()) s = f->Sync();
    const leveldb::Status closed = f->Close();
    if (s.ok()) s = closed;
  }
  (void)env->RemoveFile(probe);
  return FromLevelDb(s, "probing the disk");
}

bool StoreImpl::TryRecover() {
  bool idle = false;
  if (!rebuilding_.compare_exchange_strong(idle, true)) return false;  // a rebuild uses the db
  struct Done {
    std::atomic<bool>* flag;
    ~Done() { flag->store(false); }
  } done{&rebuilding_};
  if (!ProbeDisk().ok()) return false;
  // No ingest, Get or Log runs meanwhile; the database waits for the other
  // readers (iterators, snapshots) to finish.
  WriterLock guard(&rebuild_mu_);
  recent_.Clear();  // remembered from before the failure: ask the reopened database
  const bool reopened = db_->Reopen(*clock_, kReopenWaitMicros).ok();
  // Whether or not it opened for writing, the database may now hold writes
  // that failed their sync but reached the log, keys no filter has seen.
  DropKeyFilters();
  if (!reopened) return false;
  // Re-derive everything from what the reopened database holds, as Open
  // does: a write that failed may or may not have reached the log.
  for (Status (StoreImpl::*step)() :
       {&StoreImpl::LoadOrCreateMeta, &StoreImpl::AbandonInterruptedRebuild,
        &StoreImpl::RecoverSequence, &StoreImpl::RecoverFeed, &StoreImpl::LoadUnroutedIndex}) {
    if (!(this->*step)().ok()) {
      // A failed write has stopped writes already; a failed read has not,
      // and the reopen cleared failed(): the next attempt would then count
      // the store recovered without this re-derivation, and go on with a
      // sequence and a feed that may be behind what the log holds. So
      // writes stop here, and the next attempt reopens and reads again.
      db_->StopWrites();
      return false;
    }
  }
  return true;
}

}  // namespace eventfold::storage
