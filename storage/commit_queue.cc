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

void CommitQueue::Wake(Writer* w, Writer::State to) {
  w->state.store(to, std::memory_order_release);
  sem_post(&w->woken);
}

Status CommitQueue::Commit(leveldb::WriteBatch* batch, std::vector<Change>* changes, bool sync) {
  Writer w(batch, changes, sync);
  bool leading = false;
  {
    MutexLock lock(&mu_);
    writers_.push_back(&w);
    leading = writers_.front() == &w;
  }
  if (!leading) {
    while (sem_wait(&w.woken) != 0) {
      // EINTR: a signal handler ran; wait on.
    }
    if (w.state.load(std::memory_order_acquire) == Writer::State::kDone) return w.status;
  }

  // Leader: take a group from the front of the queue. A non-syncing leader
  // leaves syncing writers for the next group, so nobody gets less
  // durability than it asked for. The members wait, and nobody else leads,
  // until this leader is done: the group is built and written unlocked.
  std::vector<Writer*> group;
  uint64_t seq = 0;
  {
    MutexLock lock(&mu_);
    size_t bytes = 0;
    for (Writer* member : writers_) {
      if (!group.empty() && ((member->sync && !w.sync) || bytes > kMaxGroupBytes)) break;
      group.push_back(member);
      bytes += member->batch->ApproximateSize();
    }
    seq = next_seq_;
  }
  leveldb::WriteBatch* merged = w.batch;
  for (Writer* member : group) {
    if (member != &w) merged->Append(*member->batch);
    for (Change& c : *member->changes) {
      c.seq = seq++;
      merged->Put(FeedKey(c.seq), EncodeChange(c));
    }
  }
  leveldb::WriteOptions wo;
  wo.sync = w.sync;
  const Status st = FromLevelDb(db_->Write(wo, merged), "writing events");

  Writer* next = nullptr;
  {
    MutexLock lock(&mu_);
    if (st.ok() && seq != next_seq_) {
      next_seq_ = seq;
      feed_cv_.notify_all();
    }
    writers_.erase(writers_.begin(), writers_.begin() + static_cast<std::ptrdiff_t>(group.size()));
    if (!writers_.empty()) next = writers_.front();
  }
  // The group first, then the next leader. Woken first, the group's members
  // stage their next commits while the next leader is still asleep, and join
  // its group: at 64 producers on two cores, groups grew from 28 events to 41
  // this way (with the next leader first, it often preempted this thread,
  // and gathered its group before this one's members had run again).
  for (Writer* member : group) {
    if (!st.ok()) {
      for (Change& c : *member->changes) c.seq = 0;
    }
    if (member == &w) continue;
    member->status = st;
    Wake(member, Writer::State::kDone);
  }
  if (next) Wake(next, Writer::State::kLeading);
  return st;
}

void CommitQueue::Reset(uint64_t next_seq) {
  MutexLock lock(&mu_);
  next_seq_ = next_seq;
  feed_cv_.notify_all();
}

uint64_t CommitQueue::last_seq() const {
  MutexLock lock(&mu_);
  return next_seq_ - 1;
}

uint64_t CommitQueue::WaitBeyond(uint64_t after, int64_t timeout_micros) const {
  MutexLock lock(&mu_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(timeout_micros);
  while (next_seq_ - 1 <= after) {
    if (feed_cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout) break;
  }
  return next_seq_ - 1;
}

}  // namespace eventfold::storage
