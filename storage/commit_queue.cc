#include "storage/commit_queue.h"

#include <chrono>

#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/record_codec.h"

namespace eventfold::storage {
namespace {

// A group stops growing past this many bytes, as LevelDB's does.
constexpr size_t kMaxGroupBytes = 1 << 20;

}  // namespace

Status CommitQueue::Commit(leveldb::WriteBatch* batch, std::vector<Change>* changes,
                           bool sync) {
  Writer w(batch, changes, sync);
  std::unique_lock lock(mu_);
  writers_.push_back(&w);
  while (!w.done && &w != writers_.front()) w.cv.wait(lock);
  if (w.done) return w.status;

  // Leader: gather a group. A non-syncing leader leaves syncing writers for
  // the next group, so nobody gets less durability than it asked for.
  std::vector<Writer*> group;
  leveldb::WriteBatch merged;
  const uint64_t first_seq = next_seq_;
  uint64_t seq = first_seq;
  size_t bytes = 0;
  for (Writer* member : writers_) {
    if (!group.empty() && ((member->sync && !w.sync) || bytes > kMaxGroupBytes)) break;
    group.push_back(member);
    merged.Append(*member->batch);
    for (Change& c : *member->changes) {
      c.seq = seq++;
      merged.Put(FeedKey(c.seq), EncodeChange(c));
    }
    bytes = merged.ApproximateSize();
  }

  // Write without holding the queue: followers keep queueing meanwhile.
  lock.unlock();
  leveldb::WriteOptions wo;
  wo.sync = w.sync;
  const Status st = FromLevelDb(db_->Write(wo, &merged), "writing events");
  lock.lock();

  if (st.ok()) {
    next_seq_ = seq;
    if (seq != first_seq) feed_cv_.notify_all();
  }
  for (Writer* member : group) {
    writers_.pop_front();
    member->status = st;
    member->done = true;
    if (!st.ok()) {
      for (Change& c : *member->changes) c.seq = 0;
    }
    if (member != &w) member->cv.notify_one();
  }
  if (!writers_.empty()) writers_.front()->cv.notify_one();
  return st;
}

void CommitQueue::Reset(uint64_t next_seq) {
  std::lock_guard lock(mu_);
  next_seq_ = next_seq;
  feed_cv_.notify_all();
}

uint64_t CommitQueue::last_seq() const {
  std::lock_guard lock(mu_);
  return next_seq_ - 1;
}

uint64_t CommitQueue::WaitBeyond(uint64_t after, int64_t timeout_micros) const {
  std::unique_lock lock(mu_);
  feed_cv_.wait_for(lock, std::chrono::microseconds(timeout_micros),
                    [&] { return next_seq_ - 1 > after; });
  return next_seq_ - 1;
}

}  // namespace eventfold::storage
