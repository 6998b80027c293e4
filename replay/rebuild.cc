#include "replay/rebuild.h"

#include <leveldb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "core/decode.h"
#include "core/materializer.h"
#include "core/start_thread.h"
#include "core/thread_annotations.h"
#include "replay/compaction.h"
#include "replay/run_file.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/log_data.h"
#include "storage/long_scan.h"
#include "storage/record_codec.h"

namespace eventfold {
namespace {

using storage::FromLevelDb;
using storage::ScanOptions;
using storage::View;

// LevelDB writes a batch whole into the memtable, so a memtable may end up
// to a batch over the write buffer, and the batch's own buffer doubles as it
// grows: 1 MiB (LevelDB's own cap on a group of writers) instead of 4 MiB
// took 10-15 MiB off a 1M-event rebuild's peak, and the rebuild ran no
// slower (in the same hour: 2.2-2.6 s against 2.8-2.9 s; 256 KiB: 2.8-2.9 s).
constexpr size_t kBatchBytes = 1 << 20;
const size_t kEmptyBatchBytes = leveldb::WriteBatch().ApproximateSize();

leveldb::Slice Slice(std::string_view s) { return {s.data(), s.size()}; }

// Accumulates writes and flushes them in bounded batches.
class BatchWriter {
 public:
  explicit BatchWriter(leveldb::DB* db) : db_(db) {}
  Status Put(std::string_view key, std::string_view value) {
    batch_.Put(Slice(key), Slice(value));
    return MaybeFlush();
  }
  Status Delete(std::string_view key) {
    batch_.Delete(Slice(key));
    return MaybeFlush();
  }
  Status Flush() {
    if (batch_.ApproximateSize() <= kEmptyBatchBytes) return Status::OK();
    Status st = FromLevelDb(db_->Write(leveldb::WriteOptions(), &batch_), "rebuild write");
    batch_.Clear();
    return st;
  }

 private:
  Status MaybeFlush() { return batch_.ApproximateSize() >= kBatchBytes ? Flush() : Status::OK(); }
  leveldb::DB* db_;
  leveldb::WriteBatch batch_;
};

// [begin, end) key ranges, one per worker.
struct Range {
  std::string begin, end;  // end empty: to the end of the family
};

// Shared by the workers of one build. The progress counters are atomics,
// read by the progress thread without a lock.
struct Shared {
  std::atomic<uint64_t> events_done{0};   // stored events read by step 1
  std::atomic<uint64_t> logs_total{0};    // log entries step 2 writes; set before it
  std::atomic<uint64_t> logs_written{0};  // by step 2
  std::atomic<uint64_t> entities_done{0};
  // Logs kept: no step 1, events_done counts them. Set before the
  // progress thread starts, read-only after.
  bool keeping_logs = false;
  // What step 1's workers hand over, taken by the build once they are
  // joined.
  Mutex mu;
  RebuildSummary sum GUARDED_BY(mu);                            // merged per-worker totals
  std::vector<std::unique_ptr<RunCursor>> runs GUARDED_BY(mu);  // step 1's sorted runs
  Status error GUARDED_BY(mu);

  void Merge(const RebuildSummary& s, Status st) EXCLUDES(mu) {
    MutexLock lock(&mu);
    sum.entities += s.entities;
    sum.events += s.events;
    sum.applied += s.applied;
    sum.rejected += s.rejected;
    sum.unrouted += s.unrouted;
    if (error.ok() && !st.ok()) error = st;
  }
};

// Runs fn(i, range) on one thread per range and waits. A range whose
// thread the system refuses runs on this thread.
template <typename Fn>
void RunWorkers(const std::vector<Range>& ranges, Fn fn) {
  std::vector<std::thread> workers;
  for (size_t i = 0; i < ranges.size(); ++i) {
    std::thread worker;
    if (StartThread(&worker, "a rebuild worker", [fn, i, &ranges] { fn(i, ranges[i]); }).ok()) {
      workers.push_back(std::move(worker));
    } else {
      fn(i, ranges[i]);
    }
  }
  for (std::thread& t : workers) t.join();
}

bool InRange(const leveldb::Iterator& it, const leveldb::Slice& prefix, const Range& r) {
  return it.Valid() && it.key().starts_with(prefix) &&
         (r.end.empty() || it.key().compare(Slice(r.end)) < 0);
}

// Step 1 for one seq range: one log entry per routed event, into sorted
// runs of at most `budget` bytes (all spilled but the last); an entry in
// the generation's index of unrouted events for each other one, written
// at once (in seq order, so ascending within the range).
Status RouteRange(leveldb::DB* db, const leveldb::Snapshot* snapshot, const Profile& profile,
                  uint32_t gen, const Range& range, size_t budget, ScratchDir* scratch,
                  Shared* shared, RebuildSummary* sum) {
  RunBuffer buffer;
  buffer.Reserve(budget);  // no transient doubling above the budget
  std::vector<std::unique_ptr<RunCursor>> runs;
  // The log records need the route and fold position, not the data (the
  // fold reads that from a/ where a snapshot needs it): only the data
  // members the routes read are decoded.
  const std::vector<std::string> route_members = RouteMembers(profile);
  auto spill = [&]() -> Status {
    buffer.Sort();
    Result<std::unique_ptr<RunWriter>> w =
        RunWriter::Create(scratch->env(), scratch->NewFileName());
    if (!w.ok()) return w.status();
    for (size_t i = 0; i < buffer.size(); ++i) {
      Status st = (*w)->Add(buffer.key(i), buffer.value(i));
      if (!st.ok()) return st;
    }
    Status st = (*w)->Close();
    if (!st.ok()) return st;
    buffer.Clear();
    Result<std::unique_ptr<RunCursor>> run = ReadRunFile(scratch->env(), (*w)->name());
    if (!run.ok()) return run.status();
    runs.push_back(std::move(*run));
    return Status::OK();
  };
  BatchWriter unrouted(db);
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ScanOptions(snapshot)));
  const leveldb::Slice prefix = Slice(storage::kEventPrefix);
  for (it->Seek(Slice(range.begin)); InRange(*it, prefix, range); it->Next()) {
    // The body is decoded below, under the target profile.
    Result<storage::StoredEvent> stored =
        storage::DecodeStoredBody(View(it->key()), View(it->value()));
    if (!stored.ok()) return stored.status();
    ++sum->events;
    shared->events_done.fetch_add(1, std::memory_order_relaxed);
    Result<DecodedEvent> decoded = DecodeEventRoute(stored->body, profile, route_members);
    // A body the profile cannot route (say, its key path is missing) stays
    // stored, unrouted: accepted events are never dropped.
    if (!decoded.ok() || !decoded->entity) {
      ++sum->unrouted;
      Status st = unrouted.Put(storage::UnroutedKey(gen, stored->seq), "");
      if (!st.ok()) return st;
      continue;
    }
    const EntityRef& ref = *decoded->entity;
    storage::LogEntry entry{RankedEvent{std::move(decoded->event), decoded->rank, {}}, stored->seq,
                            stored->received_at};
    // The run holds the log record as the database will (without the
    // event's data): the fold reads data only where a snapshot needs it.
    buffer.Add(storage::LogKey(gen, ref, KeyOf(entry.ranked.event, entry.ranked.rank)),
               storage::EncodeLog(entry));
    if (buffer.bytes() >= budget) {
      Status st = spill();
      if (!st.ok()) return st;
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "rebuild scan");
  if (Status st = unrouted.Flush(); !st.ok()) return st;
  buffer.Sort();
  runs.push_back(ReadBuffer(std::move(buffer)));
  MutexLock lock(&shared->mu);
  for (std::unique_ptr<RunCursor>& run : runs) shared->runs.push_back(std::move(run));
  return Status::OK();
}

// Copies a run file into the database, in its (key) order.
Status WriteRun(leveldb::DB* db, ScratchDir* scratch, const std::string& name) {
  Result<std::unique_ptr<RunCursor>> run = ReadRunFile(scratch->env(), name);
  if (!run.ok()) return run.status();
  BatchWriter w(db);
  while ((*run)->Next()) {
    Status st = w.Put((*run)->key(), (*run)->value());
    if (!st.ok()) return st;
  }
  if (!(*run)->status().ok()) return (*run)->status();
  return w.Flush();
}

// Folds each entity as its log entries stream past in key order (they are
// consecutive and in fold order), so memory does not depend on an entity's
// length. Projections and snapshots come out in key order too, but in other
// key ranges than the logs: they go to run files, written to the database
// after the logs, so that each range is one ascending sequence of writes.
// When the logs are kept (nothing else is written), the projections go
// straight to the database; the few snapshots still wait in a run file.
//
// An entry comes as a log record, routed or kept, without the event's data.
// The cursor needs no data, so an entry's data is read from a/<seq> (as of
// the build's input snapshot) only once the entity reaches a snapshot: its
// entries so far (fewer than one interval, kept for this) are then folded
// again whole, and each later one is read as it comes.
class EntityFolder {
 public:
  EntityFolder(leveldb::DB* db, const leveldb::Snapshot* snapshot, const Profile& profile,
               const RebuildTarget& target, Shared* shared, RebuildSummary* sum)
      : db_(db), profile_(profile), target_(target), shared_(shared), sum_(sum) {
    data_options_.snapshot = snapshot;
    data_options_.fill_cache = false;
  }

  // With `direct`, the projections go straight to the database (nothing
  // else is written meanwhile: the logs are kept), else to a run file.
  Status Open(ScratchDir* scratch, bool direct) {
    if (direct) {
      direct_.emplace(db_);
    } else {
      Result<std::unique_ptr<RunWriter>> p =
          RunWriter::Create(scratch->env(), scratch->NewFileName());
      if (!p.ok()) return p.status();
      projections_ = std::move(*p);
    }
    Result<std::unique_ptr<RunWriter>> s =
        RunWriter::Create(scratch->env(), scratch->NewFileName());
    if (!s.ok()) return s.status();
    snapshots_ = std::move(*s);
    return Status::OK();
  }

  // `value` is the log record stored (or to be stored) at `key`.
  Status Add(std::string_view key, std::string_view value) {
    Status st = Enter(key);
    if (!st.ok()) return st;
    Result<storage::LogEntry> e = storage::DecodeLog(key, value, profile_);
    if (!e.ok()) return e.status();
    const uint64_t interval = target_.snapshot_interval;
    if (whole_) {
      st = storage::LoadLogData(db_, data_options_, profile_, &*e);
      return st.ok() ? Apply(e->ranked) : st;
    }
    if (st = ApplyToState(*type_, e->ranked, &state_); !st.ok()) return st;
    if (interval == 0) return Status::OK();  // no snapshot will ever need the data
    cursor_only_.push_back(std::move(*e));
    if (state_.events % interval != 0) return Status::OK();
    // A snapshot is due: the entity's events so far, again, with their data.
    StartFromNone(*current_, &state_);
    whole_ = true;
    for (storage::LogEntry& entry : cursor_only_) {
      st = storage::LoadLogData(db_, data_options_, profile_, &entry);
      if (st.ok()) st = Apply(entry.ranked);
      if (!st.ok()) return st;
    }
    cursor_only_.clear();
    return Status::OK();
  }

  // After the last Add: the run files to write, projections first.
  Result<std::vector<std::string>> Finish() {
    Status st = FinishEntity();
    if (st.ok()) st = direct_ ? direct_->Flush() : projections_->Close();
    if (st.ok()) st = snapshots_->Close();
    if (!st.ok()) return st;
    std::vector<std::string> runs;
    if (projections_) runs.push_back(projections_->name());
    runs.push_back(snapshots_->name());
    return runs;
  }

 private:
  // Starts the entity of log key `key` unless it is the current one.
  Status Enter(std::string_view key) {
    std::optional<storage::LogKeyView> parts = storage::SplitLogKey(key);
    if (!parts) return Status::Corruption("malformed log key");
    if (current_ && current_->entity == parts->entity && current_->id == parts->id) {
      return Status::OK();
    }
    Status st = FinishEntity();
    if (!st.ok()) return st;
    current_ = EntityRef{std::string(parts->entity), std::string(parts->id)};
    type_ = profile_.FindEntity(current_->entity);
    if (!type_) return Status::Corruption("log of unknown entity " + current_->entity);
    StartFromNone(*current_, &state_);
    cursor_only_.clear();
    whole_ = false;
    return Status::OK();
  }

  // Applies an event with its data; a snapshot when one is due.
  Status Apply(const RankedEvent& event) {
    if (Status st = ApplyToState(*type_, event, &state_); !st.ok()) return st;
    const uint64_t interval = target_.snapshot_interval;
    if (interval == 0 || state_.events % interval != 0) return Status::OK();
    state_.snapshots = storage::ProjectionState::Snapshots::kSome;
    return snapshots_->Add(storage::SnapshotKey(target_.gen, *current_, state_.last),
                           storage::EncodeProjection(state_));
  }

  Status FinishEntity() {
    if (!current_) return Status::OK();
    ++sum_->entities;
    shared_->entities_done.fetch_add(1, std::memory_order_relaxed);
    sum_->applied += state_.projection.applied;
    sum_->rejected += state_.projection.rejected.size();
    const std::string key = storage::ProjectionKey(target_.gen, *current_);
    const std::string cursor = storage::EncodeProjectionCursor(state_);
    return direct_ ? direct_->Put(key, cursor) : projections_->Add(key, cursor);
  }

  leveldb::DB* db_;
  leveldb::ReadOptions data_options_;  // the build's input snapshot
  const Profile& profile_;
  const RebuildTarget& target_;
  Shared* shared_;
  RebuildSummary* sum_;
  std::unique_ptr<RunWriter> projections_, snapshots_;
  std::optional<BatchWriter> direct_;
  std::optional<EntityRef> current_;
  const EntityType* type_ = nullptr;
  storage::ProjectionState state_;
  // Stored entries of the current entity folded without their data (fewer
  // than one snapshot interval), and whether its state is whole since.
  std::vector<storage::LogEntry> cursor_only_;
  bool whole_ = false;
};

// Hands chunks of merged records from the writing thread to the folding
// one; bounded, so the writer waits when the folder falls behind.
class ChunkQueue {
 public:
  static constexpr size_t kChunkBytes = 1 << 20;
  static constexpr size_t kMaxChunks = 4;

  // False when the consumer has stopped.
  bool Push(RunBuffer chunk) {
    MutexLock lock(&mu_);
    while (chunks_.size() >= kMaxChunks && !stopped_) cv_.wait(lock.native());
    if (stopped_) return false;
    chunks_.push_back(std::move(chunk));
    cv_.notify_all();
    return true;
  }
  // False when the producer is done and everything was taken.
  bool Pop(RunBuffer* chunk) {
    MutexLock lock(&mu_);
    while (chunks_.empty() && !done_) cv_.wait(lock.native());
    if (chunks_.empty()) return false;
    *chunk = std::move(chunks_.front());
    chunks_.pop_front();
    cv_.notify_all();
    return true;
  }
  void Done() {
    MutexLock lock(&mu_);
    done_ = true;
    cv_.notify_all();
  }
  void Stop() {
    MutexLock lock(&mu_);
    stopped_ = true;
    cv_.notify_all();
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;  // a chunk pushed or taken, done or stopped
  std::deque<RunBuffer> chunks_ GUARDED_BY(mu_);
  bool done_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
};

// Step 2's input when the logs are routed: the merged sort runs, whose
// values are the log records to write.
struct RoutedLogs {
  static constexpr bool kWrite = true;
  RunMerger* merged;
  bool Next() { return merged->Next(); }
  std::string_view key() const { return merged->key(); }
  std::string_view value() const { return merged->value(); }
  Status status() const { return merged->status(); }
};

// The log records of one log generation as stored, in key order: step 2's
// input when the logs are kept.
class StoredLogs {
 public:
  static constexpr bool kWrite = false;
  StoredLogs(leveldb::DB* db, const leveldb::Snapshot* snapshot, uint32_t gen)
      : scan_(db, snapshot, storage::LogFamilyPrefix(gen), "reading the logs to fold") {}
  bool Next() { return scan_.Next(); }
  std::string_view key() const { return scan_.key(); }
  std::string_view value() const { return scan_.value(); }
  Status status() const { return scan_.status(); }

 private:
  storage::LongScan scan_;
};

// Step 2: writes the routed logs in key order, or reads the kept ones, and
// folds them. With two threads or more, folding runs on a thread of its own
// beside the writer.
template <typename Logs>
Status WriteGeneration(leveldb::DB* db, const leveldb::Snapshot* snapshot, const Profile& profile,
                       const RebuildTarget& target, Logs* input, ScratchDir* scratch,
                       Shared* shared, RebuildSummary* sum) {
  constexpr bool kWrite = Logs::kWrite;
  EntityFolder folder(db, snapshot, profile, target, shared, sum);
  Status st = folder.Open(scratch, /*direct=*/!kWrite);
  if (!st.ok()) return st;
  BatchWriter logs(db);
  // Routed entries are written; kept ones are there.
  auto put = [&](std::string_view key, std::string_view value) -> Status {
    shared->logs_written.fetch_add(1, std::memory_order_relaxed);
    if constexpr (kWrite) {
      return logs.Put(key, value);
    } else {
      shared->events_done.fetch_add(1, std::memory_order_relaxed);
      return Status::OK();
    }
  };
  ChunkQueue queue;
  Status fold_status;
  auto fold = [&] {
    RunBuffer chunk;
    while (fold_status.ok() && queue.Pop(&chunk)) {
      for (size_t i = 0; fold_status.ok() && i < chunk.size(); ++i) {
        fold_status = folder.Add(chunk.key(i), chunk.value(i));
      }
    }
    queue.Stop();  // on an error: the writer stops too
  };
  std::thread fold_thread;
  // A fold thread the system refuses: this thread folds too, as with one.
  if (target.threads < 2 || !StartThread(&fold_thread, "the rebuild's fold", fold).ok()) {
    while (st.ok() && input->Next()) {
      st = put(input->key(), input->value());
      if (st.ok()) st = folder.Add(input->key(), input->value());
    }
  } else {
    RunBuffer chunk;
    bool open = true;
    while (st.ok() && open && input->Next()) {
      st = put(input->key(), input->value());
      chunk.Add(input->key(), input->value());
      if (chunk.bytes() >= ChunkQueue::kChunkBytes) open = queue.Push(std::exchange(chunk, {}));
    }
    if (st.ok() && open) queue.Push(std::move(chunk));
    queue.Done();
    fold_thread.join();
    if (st.ok()) st = fold_status;
  }
  if (st.ok()) st = input->status();
  if (st.ok()) st = logs.Flush();
  if (!st.ok()) return st;
  Result<std::vector<std::string>> runs = folder.Finish();
  if (!runs.ok()) return runs.status();
  for (const std::string& name : *runs) {
    st = WriteRun(db, scratch, name);
    if (!st.ok()) return st;
  }
  return Status::OK();
}

// Step 1 of a build that keeps the logs: the kept index of unrouted
// events, counted.
Status CountUnrouted(leveldb::DB* db, const leveldb::Snapshot* snapshot, uint32_t gen,
                     Shared* shared, RebuildSummary* sum) {
  storage::LongScan unrouted(db, snapshot, storage::UnroutedFamilyPrefix(gen),
                             "counting unrouted events");
  while (unrouted.Next()) {
    ++sum->events;
    ++sum->unrouted;
    shared->events_done.fetch_add(1, std::memory_order_relaxed);
  }
  return unrouted.status();
}

// The first and last stored event seqs of `snapshot`; nullopt when none.
std::optional<std::pair<uint64_t, uint64_t>> SeqBounds(leveldb::DB* db,
                                                       const leveldb::Snapshot* snapshot) {
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ScanOptions(snapshot)));
  it->Seek(Slice(storage::kEventPrefix));
  if (!it->Valid()) return std::nullopt;
  auto first = storage::ParseSeqKey(View(it->key()), storage::kEventPrefix);
  it->Seek(storage::PrefixEnd(storage::kEventPrefix));
  it->Valid() ? it->Prev() : it->SeekToLast();
  if (!first || !it->Valid()) return std::nullopt;
  auto last = storage::ParseSeqKey(View(it->key()), storage::kEventPrefix);
  if (!last) return std::nullopt;
  return std::make_pair(*first, *last);
}

std::vector<Range> SeqRanges(uint64_t first, uint64_t last, int workers) {
  std::vector<Range> ranges;
  const uint64_t span = last - first + 1;
  for (int i = 0; i < workers; ++i) {
    const uint64_t b = first + span * i / workers;
    const uint64_t e = first + span * (i + 1) / workers;
    if (b == e) continue;
    ranges.push_back(Range{storage::EventKey(b), i + 1 == workers ? "" : storage::EventKey(e)});
  }
  return ranges;
}

// Calls target.progress about once a second until stopped.
class ProgressReporter {
 public:
  ProgressReporter(const RebuildTarget& target, const Shared& shared, uint64_t total)
      : target_(target),
        shared_(shared),
        total_(total),
        clock_(target.clock ? target.clock : SystemClock()),
        start_micros_(clock_->NowMicros()) {
    // A thread the system refuses costs only the ticks; the final report
    // still comes.
    if (target_.progress) (void)StartThread(&thread_, "the rebuild's progress", [this] { Loop(); });
  }
  ~ProgressReporter() {
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    // The final numbers: everything there was is done. events_total was an
    // upper bound (conflicts share the seq range), so it ends at events_done.
    if (target_.progress) Report(/*final=*/true);
  }

 private:
  void Loop() {
    MutexLock lock(&mu_);
    for (;;) {
      const int64_t next = clock_->NowMicros() + 1000000;
      while (!stop_ && clock_->NowMicros() < next) clock_->WaitUntil(lock.native(), cv_, next);
      if (stop_) return;
      Report();
    }
  }
  // Each stored event counts half when step 1 routes it and half when step
  // 2 writes and folds its log entry: the steps take comparable time, and
  // the ETA must not read 0 while the longer one is still ahead.
  void Report(bool final = false) {
    RebuildProgress p;
    const uint64_t read = shared_.events_done.load();
    const uint64_t logs = shared_.logs_total.load();
    const double written = logs ? static_cast<double>(shared_.logs_written.load()) / logs : 0;
    p.events_done =
        final || shared_.keeping_logs ? read : read / 2 + static_cast<uint64_t>(read * written / 2);
    p.events_total = final ? p.events_done : std::max(total_, p.events_done);
    p.entities_done = shared_.entities_done.load();
    p.seconds = static_cast<double>(clock_->NowMicros() - start_micros_) / 1e6;
    target_.progress(p);
  }

  const RebuildTarget& target_;
  const Shared& shared_;
  const uint64_t total_;
  Clock* const clock_;
  const int64_t start_micros_;
  Mutex mu_;
  std::condition_variable cv_;  // stop_ set
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace

Result<RebuildSummary> BuildGeneration(leveldb::DB* db, const leveldb::Snapshot* snapshot,
                                       const Profile& profile, const RebuildTarget& target) {
  Clock* clock = target.clock ? target.clock : SystemClock();
  const int64_t start = clock->NowMicros();
  const int workers = std::max(1, target.threads);
  // Declared first, removed last: the runs read files in it.
  ScratchDir scratch(target.env ? target.env : leveldb::Env::Default(), target.scratch_path);
  Status st = scratch.Reset();
  if (!st.ok()) return st;
  Shared shared;
  shared.keeping_logs = target.logs_from.has_value();
  // The build's totals: step 1's workers merge theirs into shared.sum, taken
  // once they are joined (nothing is counted here before).
  RebuildSummary total;
  // Step 1's sorted runs, likewise taken from shared.runs.
  std::vector<std::unique_ptr<RunCursor>> runs;
  const auto bounds = SeqBounds(db, snapshot);
  {
    ProgressReporter reporter(target, shared, bounds ? bounds->second - bounds->first + 1 : 0);
    if (target.logs_from) {
      st = CountUnrouted(db, snapshot, *target.logs_from, &shared, &total);
      StoredLogs logs(db, snapshot, *target.logs_from);
      if (st.ok()) {
        st = WriteGeneration(db, snapshot, profile, target, &logs, &scratch, &shared, &total);
      }
      if (!st.ok()) {
        return st.IsCorruption()
                   ? st.WithContext(
                         "folding the live logs (a rebuild that derives them anew from the "
                         "stored events does not read them: `eventfold replay --rederive-logs`)")
                   : st;
      }
      total.events += shared.logs_written.load();
    } else if (bounds) {
      RunWorkers(SeqRanges(bounds->first, bounds->second, workers), [&](size_t, const Range& r) {
        RebuildSummary sum;
        const size_t budget = target.sort_budget_bytes / workers;
        shared.Merge(
            sum, RouteRange(db, snapshot, profile, target.gen, r, budget, &scratch, &shared, &sum));
      });
      MutexLock lock(&shared.mu);  // uncontended: the workers are joined
      if (!shared.error.ok()) return shared.error;
      total = shared.sum;
      runs = std::move(shared.runs);
    }
    if (!target.logs_from) {
      shared.logs_total = total.events - total.unrouted;
      RunMerger merged(std::move(runs));
      RoutedLogs logs{&merged};
      st = WriteGeneration(db, snapshot, profile, target, &logs, &scratch, &shared, &total);
      if (!st.ok()) return st;
    }
  }
  // 3. Compacted entities start from their compaction snapshot.
  st = SeedCompacted(db, snapshot, profile,
                     storage::Generations{target.gen, target.logs_from.value_or(target.gen)},
                     target.snapshot_interval, &total);
  if (!st.ok()) return st;
  total.seconds = static_cast<double>(clock->NowMicros() - start) / 1e6;
  return total;
}

namespace {

// Deletes every key under `prefix`, then compacts the prefix's range so
// that its deletions do not slow later seeks (storage::CompactPrefix).
Status DropPrefix(leveldb::DB* db, const std::string& prefix) {
  BatchWriter w(db);
  storage::LongScan scan(db, nullptr, prefix, "dropping a generation");
  while (scan.Next()) {
    Status st = w.Delete(scan.key());
    if (!st.ok()) return st;
  }
  if (!scan.status().ok()) return scan.status();
  if (Status st = w.Flush(); !st.ok()) return st;
  storage::CompactPrefix(db, prefix);
  return Status::OK();
}

}  // namespace

Status DropGeneration(leveldb::DB* db, uint32_t gen) {
  return DropPrefix(db, storage::GenerationPrefix(gen));
}

Status DropDeadFamilies(leveldb::DB* db, uint32_t gen, const storage::Generations& live) {
  if (gen != live.projections && gen != live.logs) return DropGeneration(db, gen);
  for (std::string_view family : storage::kGenerationFamilies) {
    if (storage::IsLiveFamily(live, gen, family)) continue;
    Status st = DropPrefix(db, storage::FamilyPrefix(gen, family));
    if (!st.ok()) return st;
  }
  return Status::OK();
}

}  // namespace eventfold
