// Subscription: delivery of the change feed to a handler, with retries,
// per-entity order, dead letters and redrive. See eventfold/subscription.h.
//
// Model. Every change read from the feed and not finished is an Item, kept
// by seq; so is every dead letter being redriven. Each entity has a queue of
// its items in seq order, and only the front of a queue may run — which is
// all per-entity order needs. The fronts that may run are in `ready_`,
// ordered by (due time, seq): new changes are due at once, a failed one when
// its backoff has passed. Workers take the first due entry.
//
// A change is finished when its handler returned OK or it is durably parked;
// the checkpoint is the seq below the oldest unfinished change read from the
// feed (`live_`), and is saved by one thread (the feeder, or the caller of
// RunUntilIdle) so checkpoint writes never race each other.
//
// Dead letters are mirrored per entity (`EntityState::parked`: seq -> the
// dead letter when it is marked for redrive). A live change with an earlier
// dead letter of its entity is parked behind it rather than delivered.
// Redrive goes from an entity's earliest dead letter while it is marked. The
// mirror is rebuilt from the store at Start, on request and periodically, so
// marks and drops made outside the subscription are noticed.
//
// Locks: `dlq_mu_` serializes every dead-letter write with the mirror's
// rebuild (so no update is lost between reading the store and applying it);
// `mu_` guards everything in memory. Order: dlq_mu_, then mu_. Neither is
// held while a handler runs; only dlq_mu_ is held across store writes.
// (stop_mu_ and drive_mu_ come before both; see the members.)

#include "eventfold/subscription.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/start_thread.h"
#include "core/thread_annotations.h"

namespace eventfold {
namespace {

// The shortest retry delay (after a failed store write), and how long the
// feeder waits for new changes in the store before looking again (the
// store's feed is waited on in real time; everything else waits on the
// Clock or is notified).
constexpr int64_t kPollMicros = 10'000;
// Changes read from the feed at once.
constexpr size_t kFeedPage = 1024;

std::string EntityKey(const Change& c) {
  std::string key = c.entity;
  key += '\0';
  key += c.id;
  return key;
}

// The first kAttemptErrorBytes of `text`, not splitting a UTF-8 sequence.
std::string CutError(std::string text) {
  if (text.size() <= kAttemptErrorBytes) return text;
  size_t n = kAttemptErrorBytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  text.resize(n);
  return text;
}

// The handler's error text: the message, or the code's name without one.
std::string ErrorText(const Status& st) {
  if (!st.message().empty()) return st.message();
  std::string text = st.ToString();
  if (text.ends_with(": ")) text.resize(text.size() - 2);
  return text;
}

Status CheckOptions(const SubscriptionOptions& o) {
  if (o.name.empty() || o.name.size() > 128 || o.name.find('\0') != std::string::npos) {
    return Status::InvalidArgument("subscription: name must be 1-128 bytes without NUL");
  }
  if (o.threads < 0) return Status::InvalidArgument("subscription: threads must be >= 0");
  if (o.max_attempts < 1) return Status::InvalidArgument("subscription: max_attempts must be >= 1");
  if (o.initial_backoff_micros < 0 || o.max_backoff_micros < 0) {
    return Status::InvalidArgument("subscription: backoff must be >= 0");
  }
  if (!(o.backoff_multiplier >= 1)) {
    return Status::InvalidArgument("subscription: backoff_multiplier must be >= 1");
  }
  if (!(o.jitter >= 0 && o.jitter < 1)) {
    return Status::InvalidArgument("subscription: jitter must be in [0, 1)");
  }
  if (o.max_in_flight < 1)
    return Status::InvalidArgument("subscription: max_in_flight must be >= 1");
  if (o.dead_letter_poll_micros <= 0) {
    return Status::InvalidArgument("subscription: dead_letter_poll_micros must be > 0");
  }
  return Status::OK();
}

Result<std::vector<ParkedChange>> AllParked(Store* store, std::string_view subscription) {
  std::vector<ParkedChange> all;
  Status st = store->feed().ListParked(subscription, [&](const ParkedChange& p) {
    all.push_back(p);
    return true;
  });
  if (!st.ok()) return st;
  return all;
}

class SubscriptionImpl final : public Subscription {
 public:
  SubscriptionImpl(Store* store, SubscriptionOptions options, ChangeHandler handler)
      : Subscription(options.name),
        store_(store),
        options_(std::move(options)),
        handler_(std::move(handler)),
        clock_(options_.clock ? options_.clock : SystemClock()),
        rng_(options_.seed) {}

  ~SubscriptionImpl() override {
    Stop();
    if (claimed_) store_->feed().ReleaseSubscription(options_.name);
  }

  Status Init();

  void Stop() override;
  Status RunUntilIdle() override;
  std::optional<int64_t> NextRetryMicros() override;
  bool WaitForCheckpoint(uint64_t seq, int64_t timeout_micros) override;
  Result<size_t> Redrive(uint64_t seq) override;
  Result<size_t> Drop(uint64_t seq) override;
  SubscriptionStats Stats() override;

  // Set by Start before Init starts a thread, read by the destructor: not
  // shared, so no lock.
  bool claimed_ = false;  // this instance holds the store's claim of the name

 private:
  struct Item {
    Change change;
    std::string key;                        // EntityKey(change)
    std::vector<DeliveryAttempt> attempts;  // a redrive's earlier ones first
    int tries = 0;                          // failed attempts of this delivery
    bool redrive = false;                   // a dead letter, not a live change
    bool running = false;
    bool in_ready = false;
    int64_t due = 0;  // clock micros; 0: at once
  };

  struct EntityState {
    std::set<uint64_t> queue;  // unfinished items in seq order; the front may run
    bool running = false;      // an item of this entity is running
    // Dead letters in the store: seq -> the dead letter when it is marked
    // for redrive (kept only then: its change is needed to deliver it).
    std::map<uint64_t, std::optional<ParkedChange>> parked;
  };

  // Everything below with "Locked" in its name needs mu_ held.
  void MakeReadyLocked(EntityState& e) REQUIRES(mu_);
  void UnreadyLocked(Item& item) REQUIRES(mu_);
  void InsertLocked(EntityState& e, Item item) REQUIRES(mu_);
  void FinishLocked(uint64_t seq) REQUIRES(mu_);
  void MaybeRedriveLocked(const std::string& key, EntityState& e) REQUIRES(mu_);
  void EraseIfIdleLocked(const std::string& key) REQUIRES(mu_);
  bool BlockedLocked(const Item& item, const EntityState& e) const REQUIRES(mu_);
  int64_t BackoffLocked(int tries) REQUIRES(mu_);
  uint64_t CheckpointLocked() const REQUIRES(mu_);
  void RecordErrorLocked(const Status& st) REQUIRES(mu_);

  // Runs one due item, if any; called and returns with `lock` (on mu_) held.
  bool Step(MutexLock& lock) REQUIRES(mu_);
  // Step lets go of mu_ through the caller's `lock` (which so knows whether
  // it holds it, should an exception unwind), and takes it again; for the
  // analysis these release and take mu_, so Step's unlocked stretches are
  // checked as such.
  void UnlockMu(MutexLock& lock) RELEASE(mu_) NO_THREAD_SAFETY_ANALYSIS { lock.Unlock(); }
  void RelockMu(MutexLock& lock) ACQUIRE(mu_) NO_THREAD_SAFETY_ANALYSIS { lock.Lock(); }
  // Parks item `seq` (exhausted, or behind a dead letter of its entity).
  void Park(uint64_t seq) EXCLUDES(dlq_mu_, mu_);
  Status CallHandler(const Change& change) EXCLUDES(dlq_mu_, mu_);

  // Reads one page of the feed when there is room; returns how many changes.
  size_t Fill() EXCLUDES(mu_);
  // Rebuilds the dead-letter mirror from the store.
  Status Rescan() EXCLUDES(dlq_mu_, mu_);
  void MaybeRescan() EXCLUDES(dlq_mu_, mu_);
  void SaveCheckpoint() EXCLUDES(mu_);

  void WorkerLoop() EXCLUDES(mu_);
  void FeederLoop() EXCLUDES(mu_);

  Store* const store_;
  const SubscriptionOptions options_;
  const ChangeHandler handler_;
  Clock* const clock_;

  // Dead-letter writes to the store against Rescan; held across those
  // writes. Guards no member (the mirror is under mu_).
  Mutex dlq_mu_ ACQUIRED_BEFORE(mu_);
  // RunUntilIdle against Stop, so the checkpoint is saved by one thread at
  // a time. Guards no member (what it serializes is under mu_).
  Mutex drive_mu_ ACQUIRED_BEFORE(dlq_mu_);
  // Stop: one at a time, and once. Held while the threads are joined, so
  // it comes before every other lock.
  Mutex stop_mu_ ACQUIRED_BEFORE(drive_mu_);
  bool stopped_ GUARDED_BY(stop_mu_) = false;

  Mutex mu_;
  std::condition_variable cv_;     // work or room appeared, or stopping
  std::condition_variable cp_cv_;  // the saved checkpoint moved
  bool stopping_ GUARDED_BY(mu_) = false;
  bool rescan_requested_ GUARDED_BY(mu_) = false;
  int64_t next_rescan_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Item> items_ GUARDED_BY(mu_);
  std::set<uint64_t> live_ GUARDED_BY(mu_);  // items read from the feed (not redrives)
  std::unordered_map<std::string, EntityState> entities_ GUARDED_BY(mu_);
  std::set<std::pair<int64_t, uint64_t>> ready_ GUARDED_BY(mu_);  // (due, seq)
  // Marked dead letters above read_seq_ (only after a crash): redriven once
  // every earlier change of their entity has been read.
  std::set<std::pair<uint64_t, std::string>> deferred_redrives_ GUARDED_BY(mu_);
  uint64_t read_seq_ GUARDED_BY(mu_) = 0;
  uint64_t saved_ GUARDED_BY(mu_) = 0;
  bool feed_broken_ GUARDED_BY(mu_) = false;
  std::mt19937_64 rng_ GUARDED_BY(mu_);
  SubscriptionStats stats_ GUARDED_BY(mu_);
  uint64_t errors_ GUARDED_BY(mu_) = 0;

  // Started by Init before the subscription is handed out, joined only by
  // Stop (under stop_mu_): no other thread touches them, so no lock.
  std::thread feeder_;
  std::vector<std::thread> workers_;
};

// ---- bookkeeping (mu_ held) ----

void SubscriptionImpl::UnreadyLocked(Item& item) {
  if (!item.in_ready) return;
  ready_.erase({item.due, item.change.seq});
  item.in_ready = false;
}

void SubscriptionImpl::MakeReadyLocked(EntityState& e) {
  if (e.running || e.queue.empty()) return;
  Item& front = items_.at(*e.queue.begin());
  if (front.in_ready || front.running) return;
  ready_.insert({front.due, front.change.seq});
  front.in_ready = true;
}

void SubscriptionImpl::InsertLocked(EntityState& e, Item item) {
  const uint64_t seq = item.change.seq;
  const bool live = !item.redrive;
  items_.emplace(seq, std::move(item));
  if (live) live_.insert(seq);
  e.queue.insert(seq);
  if (*e.queue.begin() == seq) {
    // A new front (only a redrive or a re-read after a crash comes before
    // others): the former front waits behind it again.
    auto next = std::next(e.queue.begin());
    if (next != e.queue.end()) UnreadyLocked(items_.at(*next));
  }
  MakeReadyLocked(e);
}

void SubscriptionImpl::FinishLocked(uint64_t seq) {
  auto it = items_.find(seq);
  const std::string key = it->second.key;
  UnreadyLocked(it->second);
  if (!it->second.redrive) live_.erase(seq);
  items_.erase(it);
  EntityState& e = entities_.at(key);
  e.queue.erase(seq);
  e.running = false;
  MaybeRedriveLocked(key, e);
  MakeReadyLocked(e);
  EraseIfIdleLocked(key);
  cv_.notify_all();
}

void SubscriptionImpl::MaybeRedriveLocked(const std::string& key, EntityState& e) {
  if (e.parked.empty()) return;
  const auto& [seq, marked] = *e.parked.begin();
  if (!marked || items_.contains(seq)) return;
  if (seq > read_seq_) {
    // Changes of the entity below it may still be unread (re-deliveries
    // after a crash); they go first.
    deferred_redrives_.insert({seq, key});
    return;
  }
  Item item;
  item.change = marked->change;
  item.key = key;
  item.attempts = marked->attempts;
  item.redrive = true;
  InsertLocked(e, std::move(item));
}

void SubscriptionImpl::EraseIfIdleLocked(const std::string& key) {
  auto it = entities_.find(key);
  if (it != entities_.end() && it->second.queue.empty() && it->second.parked.empty() &&
      !it->second.running) {
    entities_.erase(it);
  }
}

bool SubscriptionImpl::BlockedLocked(const Item& item, const EntityState& e) const {
  return !item.redrive && !e.parked.empty() && e.parked.begin()->first < item.change.seq;
}

int64_t SubscriptionImpl::BackoffLocked(int tries) {
  double delay = static_cast<double>(options_.initial_backoff_micros) *
                 std::pow(options_.backoff_multiplier, tries - 1);
  delay = std::min(delay, static_cast<double>(options_.max_backoff_micros));
  if (options_.jitter > 0) {
    std::uniform_real_distribution<double> spread(-options_.jitter, options_.jitter);
    delay *= 1 + spread(rng_);
  }
  return std::max<int64_t>(0, std::llround(delay));
}

uint64_t SubscriptionImpl::CheckpointLocked() const {
  return live_.empty() ? read_seq_ : *live_.begin() - 1;
}

void SubscriptionImpl::RecordErrorLocked(const Status& st) {
  stats_.last_error = st;
  ++errors_;
}

// ---- delivery ----

Status SubscriptionImpl::CallHandler(const Change& change) {
  // An exception must not unwind a worker thread (or cross the API).
  try {
    return handler_(change);
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("handler threw: ") + e.what());
  } catch (...) {
    return Status::Unavailable("handler threw a non-standard exception");
  }
}

bool SubscriptionImpl::Step(MutexLock& lock) {
  if (ready_.empty() || ready_.begin()->first > clock_->NowMicros()) return false;
  const uint64_t seq = ready_.begin()->second;
  Item& item = items_.at(seq);  // map nodes are stable while it runs
  UnreadyLocked(item);
  EntityState& e = entities_.at(item.key);
  e.running = true;
  item.running = true;
  if (BlockedLocked(item, e) || item.tries >= options_.max_attempts) {
    UnlockMu(lock);
    Park(seq);
    RelockMu(lock);
    return true;
  }
  UnlockMu(lock);
  const int64_t at = clock_->NowMicros();
  const Status st = CallHandler(item.change);

  if (st.ok() && item.redrive) {
    // Handled: the dead letter goes. Under dlq_mu_ so a rescan cannot
    // resurrect it in the mirror meanwhile.
    MutexLock dlq(&dlq_mu_);
    Status removed = store_->feed().Unpark(options_.name, seq);
    RelockMu(lock);
    if (removed.ok() || removed.IsNotFound()) {  // NotFound: dropped meanwhile
      entities_.at(item.key).parked.erase(seq);
      ++stats_.handled;
      ++stats_.redriven;
      FinishLocked(seq);
    } else {
      // Delivered again later (at least once) until the removal succeeds.
      RecordErrorLocked(removed);
      item.running = false;
      item.due = clock_->NowMicros() + std::max<int64_t>(BackoffLocked(1), kPollMicros);
      EntityState& entity = entities_.at(item.key);
      entity.running = false;
      MakeReadyLocked(entity);
    }
    return true;
  }
  RelockMu(lock);
  if (st.ok()) {
    ++stats_.handled;
    FinishLocked(seq);
    return true;
  }
  ++stats_.failed;
  item.attempts.push_back(DeliveryAttempt{at, CutError(ErrorText(st))});
  ++item.tries;
  item.running = false;
  e.running = false;
  // After the last attempt the item is due at once: its next step parks it.
  item.due =
      item.tries >= options_.max_attempts ? 0 : clock_->NowMicros() + BackoffLocked(item.tries);
  MakeReadyLocked(e);
  cv_.notify_all();
  return true;
}

void SubscriptionImpl::Park(uint64_t seq) {
  MutexLock dlq(&dlq_mu_);
  MutexLock lock(&mu_);
  Item& item = items_.at(seq);
  EntityState& e = entities_.at(item.key);
  const bool exhausted = item.tries >= options_.max_attempts;
  if (!exhausted && !BlockedLocked(item, e)) {
    // The dead letter ahead of it was dropped meanwhile: deliver instead.
    item.running = false;
    e.running = false;
    MakeReadyLocked(e);
    cv_.notify_all();
    return;
  }
  if (item.redrive && !e.parked.contains(seq)) {
    FinishLocked(seq);  // a redriven dead letter dropped meanwhile: gone
    return;
  }
  ParkedChange parked{options_.name, item.change, item.attempts, /*redrive=*/false};
  lock.Unlock();
  const Status st = store_->feed().Park(parked);
  lock.Lock();
  if (!st.ok()) {
    // Not parked, so not finished: try again after a backoff.
    RecordErrorLocked(st);
    item.running = false;
    item.due = clock_->NowMicros() + std::max<int64_t>(BackoffLocked(1), kPollMicros);
    e.running = false;
    MakeReadyLocked(e);
    cv_.notify_all();
    return;
  }
  e.parked[seq] = std::nullopt;
  ++stats_.parked;
  FinishLocked(seq);
}

// ---- feed, dead letters, checkpoint ----

size_t SubscriptionImpl::Fill() {
  uint64_t after = 0;
  size_t room = 0;
  {
    MutexLock lock(&mu_);
    if (feed_broken_ || live_.size() >= options_.max_in_flight) return 0;
    after = read_seq_;
    room = std::min(options_.max_in_flight - live_.size(), kFeedPage);
  }
  if (store_->feed().LastSeq() <= after) return 0;
  std::vector<Change> page;
  page.reserve(room);
  Status st = store_->feed().Read(after, room, AppendTo<Change>(&page));
  MutexLock lock(&mu_);
  if (!st.ok()) {
    RecordErrorLocked(st);
    return 0;
  }
  for (Change& c : page) {
    if (c.seq != read_seq_ + 1) {
      feed_broken_ = true;
      RecordErrorLocked(Status::Corruption(
          "subscription " + options_.name + ": changes " + std::to_string(read_seq_ + 1) + ".." +
          std::to_string(c.seq - 1) + " are missing from the feed (trimmed?)"));
      break;
    }
    read_seq_ = c.seq;
    std::string key = EntityKey(c);
    EntityState& e = entities_[key];
    if (e.parked.contains(c.seq)) {
      // Parked before a restart that came before its checkpoint: finished.
      EraseIfIdleLocked(key);
      continue;
    }
    Item item;
    item.change = std::move(c);
    item.key = std::move(key);
    InsertLocked(e, std::move(item));
  }
  while (!deferred_redrives_.empty() && deferred_redrives_.begin()->first <= read_seq_) {
    const std::string key = deferred_redrives_.begin()->second;
    deferred_redrives_.erase(deferred_redrives_.begin());
    auto it = entities_.find(key);
    if (it != entities_.end()) MaybeRedriveLocked(key, it->second);
  }
  if (!page.empty()) cv_.notify_all();
  return page.size();
}

Status SubscriptionImpl::Rescan() {
  MutexLock dlq(&dlq_mu_);
  std::unordered_map<std::string, std::map<uint64_t, std::optional<ParkedChange>>> fresh;
  Status st = store_->feed().ListParked(options_.name, [&](const ParkedChange& p) {
    auto& slot = fresh[EntityKey(p.change)][p.change.seq];
    if (p.redrive) slot = p;
    return true;
  });
  MutexLock lock(&mu_);
  if (!st.ok()) {
    RecordErrorLocked(st);
    return st;
  }
  std::vector<std::string> touched;
  for (auto& [key, e] : entities_) {
    if (!e.parked.empty() && !fresh.contains(key)) {
      e.parked.clear();
      touched.push_back(key);
    }
  }
  for (auto& [key, parked] : fresh) {
    entities_[key].parked = std::move(parked);
    touched.push_back(key);
  }
  for (const std::string& key : touched) {
    EntityState& e = entities_.at(key);
    // Redrives waiting for a dead letter that was dropped (or is no longer
    // marked) are called off; a running one finishes and checks again.
    for (auto it = e.queue.begin(); it != e.queue.end();) {
      Item& item = items_.at(*it);
      auto p = e.parked.find(*it);
      if (item.redrive && !item.running && (p == e.parked.end() || !p->second)) {
        UnreadyLocked(item);
        items_.erase(*it);
        it = e.queue.erase(it);
      } else {
        ++it;
      }
    }
    MaybeRedriveLocked(key, e);
    MakeReadyLocked(e);
    EraseIfIdleLocked(key);
  }
  cv_.notify_all();
  return Status::OK();
}

void SubscriptionImpl::MaybeRescan() {
  const int64_t now = clock_->NowMicros();
  {
    MutexLock lock(&mu_);
    if (!rescan_requested_ && now < next_rescan_) return;
    rescan_requested_ = false;
    next_rescan_ = now + options_.dead_letter_poll_micros;
  }
  (void)Rescan();  // recorded in the stats; the next poll tries again
}

void SubscriptionImpl::SaveCheckpoint() {
  uint64_t checkpoint = 0;
  {
    MutexLock lock(&mu_);
    checkpoint = CheckpointLocked();
    if (checkpoint <= saved_) return;
  }
  const Status st = store_->feed().SetCheckpoint(options_.name, checkpoint);
  MutexLock lock(&mu_);
  if (!st.ok()) {
    RecordErrorLocked(st);
    return;
  }
  saved_ = checkpoint;
  cp_cv_.notify_all();
}

// ---- threads ----

void SubscriptionImpl::WorkerLoop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    if (Step(lock)) continue;
    // Whatever readies an item or stops the subscription notifies cv_; the
    // earliest waiting retry comes due on the Clock (a ManualClock's
    // Advance wakes the wait).
    if (ready_.empty()) {
      cv_.wait(lock.native());
    } else {
      clock_->WaitUntil(lock.native(), cv_, ready_.begin()->first);
    }
  }
}

void SubscriptionImpl::FeederLoop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    lock.Unlock();
    MaybeRescan();
    const size_t read = Fill();
    SaveCheckpoint();
    lock.Lock();
    if (read > 0 || stopping_) continue;
    if (live_.size() < options_.max_in_flight && !feed_broken_) {
      const uint64_t after = read_seq_;
      lock.Unlock();
      store_->feed().WaitForChanges(after, kPollMicros);
      lock.Lock();
    } else {
      // No room (a finished change notifies cv_) or a broken feed: until
      // then only the dead-letter rescan, due on the Clock, has work.
      clock_->WaitUntil(lock.native(), cv_, next_rescan_);
    }
  }
}

// ---- public ----

Status SubscriptionImpl::Init() {
  bool known = false;
  Status st = store_->feed().ListSubscriptions([&](const std::string& name, uint64_t) {
    known = name == options_.name;
    return !known;
  });
  if (!st.ok()) return st;
  uint64_t checkpoint = 0;
  if (known) {
    Result<uint64_t> cp = store_->feed().GetCheckpoint(options_.name);
    if (!cp.ok()) return cp.status();
    checkpoint = *cp;
    if (store_->feed().LastSeq() > checkpoint) {
      std::vector<Change> next;
      st = store_->feed().Read(checkpoint, 1, AppendTo<Change>(&next));
      if (!st.ok()) return st;
      if (next.empty() || next.front().seq != checkpoint + 1) {
        return Status::Corruption("subscription " + options_.name + ": its checkpoint " +
                                  std::to_string(checkpoint) +
                                  " is below the oldest change left in the feed");
      }
    }
  } else {
    // Register at the oldest change still in the feed. A trim racing with
    // this is serialized with the checkpoint write (Store::TrimFeed), so
    // checking again after the write tells whether it moved the start.
    for (int round = 0;; ++round) {
      std::vector<Change> first;
      st = store_->feed().Read(0, 1, AppendTo<Change>(&first));
      if (!st.ok()) return st;
      checkpoint = first.empty() ? store_->feed().LastSeq() : first.front().seq - 1;
      st = store_->feed().SetCheckpoint(options_.name, checkpoint);
      if (!st.ok()) return st;
      first.clear();
      st = store_->feed().Read(checkpoint, 1, AppendTo<Change>(&first));
      if (!st.ok()) return st;
      if (first.empty() || first.front().seq == checkpoint + 1) break;
      if (round == 10) return Status::Busy("subscription: the feed keeps being trimmed");
    }
  }
  // No other thread runs yet: mu_ is taken for the analysis, uncontended.
  {
    MutexLock lock(&mu_);
    read_seq_ = saved_ = checkpoint;
    stats_.checkpoint = stats_.read_seq = checkpoint;
  }
  st = Rescan();
  if (!st.ok()) return st;
  {
    MutexLock lock(&mu_);
    next_rescan_ = clock_->NowMicros() + options_.dead_letter_poll_micros;
  }
  if (options_.threads > 0) {
    // A thread the system refuses fails the start; the destructor stops and
    // joins those that started.
    st = StartThread(&feeder_, "the subscription's feeder", [this] { FeederLoop(); });
    for (int i = 0; st.ok() && i < options_.threads; ++i) {
      std::thread worker;
      st = StartThread(&worker, "a subscription worker", [this] { WorkerLoop(); });
      if (st.ok()) workers_.push_back(std::move(worker));
    }
  }
  return st;
}

void SubscriptionImpl::Stop() {
  MutexLock stop(&stop_mu_);
  if (stopped_) return;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  if (feeder_.joinable()) feeder_.join();
  MutexLock drive(&drive_mu_);
  SaveCheckpoint();
  stopped_ = true;
}

Status SubscriptionImpl::RunUntilIdle() {
  if (options_.threads > 0) {
    return Status::InvalidArgument("RunUntilIdle: this subscription runs its own threads");
  }
  MutexLock drive(&drive_mu_);
  uint64_t errors_before = 0;
  {
    MutexLock lock(&mu_);
    if (stopping_) return Status::Unavailable("subscription " + options_.name + " is stopped");
    errors_before = errors_;
    rescan_requested_ = true;  // notice redrives and drops made since the last call
  }
  MaybeRescan();
  for (;;) {
    const size_t read = Fill();
    bool ran = false;
    {
      MutexLock lock(&mu_);
      // Run until idle or there is room to read more.
      while (Step(lock)) {
        ran = true;
        if (live_.size() < options_.max_in_flight / 2 && store_->feed().LastSeq() > read_seq_)
          break;
      }
    }
    if (read == 0 && !ran) break;
  }
  SaveCheckpoint();
  MutexLock lock(&mu_);
  return errors_ != errors_before ? stats_.last_error : Status::OK();
}

std::optional<int64_t> SubscriptionImpl::NextRetryMicros() {
  MutexLock lock(&mu_);
  if (ready_.empty()) return std::nullopt;
  return ready_.begin()->first;
}

bool SubscriptionImpl::WaitForCheckpoint(uint64_t seq, int64_t timeout_micros) {
  // wait_for with a predicate, spelled out: the analysis does not see that
  // a predicate lambda runs under the lock.
  MutexLock lock(&mu_);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(timeout_micros);
  while (saved_ < seq) {
    if (cp_cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout) {
      return saved_ >= seq;
    }
  }
  return true;
}

Result<size_t> SubscriptionImpl::Redrive(uint64_t seq) {
  Result<size_t> marked = [&] {
    MutexLock dlq(&dlq_mu_);
    return MarkForRedrive(store_, options_.name, seq);
  }();
  if (marked.ok()) {
    MutexLock lock(&mu_);
    rescan_requested_ = true;
    cv_.notify_all();
  }
  return marked;
}

Result<size_t> SubscriptionImpl::Drop(uint64_t seq) {
  Result<size_t> dropped = [&] {
    MutexLock dlq(&dlq_mu_);
    return DropParked(store_, options_.name, seq);
  }();
  if (dropped.ok()) {
    MutexLock lock(&mu_);
    rescan_requested_ = true;
    cv_.notify_all();
  }
  return dropped;
}

SubscriptionStats SubscriptionImpl::Stats() {
  MutexLock lock(&mu_);
  SubscriptionStats s = stats_;
  s.checkpoint = saved_;
  s.read_seq = read_seq_;
  s.in_flight = items_.size();
  return s;
}

}  // namespace

Result<std::unique_ptr<Subscription>> Subscription::Start(Store* store, SubscriptionOptions options,
                                                          ChangeHandler handler) {
  if (!store) return Status::InvalidArgument("subscription: no store");
  if (!handler) return Status::InvalidArgument("subscription: no handler");
  if (Status st = CheckOptions(options); !st.ok()) return st;
  // Two instances of one subscription would each save a checkpoint the
  // other has not earned.
  if (!store->feed().ClaimSubscription(options.name)) {
    return Status::Busy("subscription " + options.name + " already runs on this store");
  }
  auto sub = std::make_unique<SubscriptionImpl>(store, std::move(options), std::move(handler));
  sub->claimed_ = true;
  Status st = sub->Init();
  if (!st.ok()) return st.WithContext("starting subscription " + sub->name());
  return std::unique_ptr<Subscription>(std::move(sub));
}

Result<size_t> MarkForRedrive(Store* store, std::string_view subscription, uint64_t seq) {
  Result<std::vector<ParkedChange>> all = AllParked(store, subscription);
  if (!all.ok()) return all.status();
  std::optional<std::string> entity;  // with `seq`: only that entity's
  if (seq != 0) {
    auto it = std::find_if(all->begin(), all->end(),
                           [&](const ParkedChange& p) { return p.change.seq == seq; });
    if (it == all->end()) {
      return Status::NotFound("no dead letter " + std::to_string(seq) + " in subscription " +
                              std::string(subscription));
    }
    entity = EntityKey(it->change);
  }
  size_t marked = 0;
  for (ParkedChange& p : *all) {
    if (entity && EntityKey(p.change) != *entity) continue;
    ++marked;
    if (p.redrive) continue;
    p.redrive = true;
    if (Status st = store->feed().Park(p); !st.ok()) return st;
  }
  return marked;
}

Result<size_t> DropParked(Store* store, std::string_view subscription, uint64_t seq) {
  if (seq != 0) {
    if (Status st = store->feed().Unpark(subscription, seq); !st.ok()) return st;
    return size_t{1};
  }
  Result<std::vector<ParkedChange>> all = AllParked(store, subscription);
  if (!all.ok()) return all.status();
  for (const ParkedChange& p : *all) {
    if (Status st = store->feed().Unpark(subscription, p.change.seq); !st.ok()) return st;
  }
  return all->size();
}

}  // namespace eventfold
