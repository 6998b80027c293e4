#include "replay/rebuild.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <leveldb/write_batch.h>

#include "core/decode.h"
#include "replay/materializer.h"
#include "replay/run_file.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/record_codec.h"

namespace eventfold {
namespace {

using storage::FromLevelDb;
using SteadyClock = std::chrono::steady_clock;

constexpr size_t kBatchBytes = 4 << 20;
const size_t kEmptyBatchBytes = leveldb::WriteBatch().ApproximateSize();

std::string_view View(const leveldb::Slice& s) { return {s.data(), s.size()}; }
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
  Status MaybeFlush() {
    return batch_.ApproximateSize() >= kBatchBytes ? Flush() : Status::OK();
  }
  leveldb::DB* db_;
  leveldb::WriteBatch batch_;
};

leveldb::ReadOptions ScanOptions(const leveldb::Snapshot* snapshot) {
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  ro.snapshot = snapshot;
  return ro;
}

// [begin, end) key ranges, one per worker.
struct Range {
  std::string begin, end;  // end empty: to the end of the family
};

// Shared by the workers of one build.
struct Shared {
  std::atomic<uint64_t> events_done{0};
  std::atomic<uint64_t> entities_done{0};
  std::mutex mu;
  RebuildSummary sum;                            // merged per-worker totals
  std::vector<std::unique_ptr<RunCursor>> runs;  // step 1's sorted runs
  Status error;

  void Merge(const RebuildSummary& s, Status st) {
    std::lock_guard lock(mu);
    sum.entities += s.entities;
    sum.events += s.events;
    sum.applied += s.applied;
    sum.rejected += s.rejected;
    sum.unrouted += s.unrouted;
    if (error.ok() && !st.ok()) error = st;
  }
};

// Runs fn(i, range) on one thread per range and waits.
template <typename Fn>
void RunWorkers(const std::vector<Range>& ranges, Fn fn) {
  std::vector<std::thread> workers;
  for (size_t i = 0; i < ranges.size(); ++i) workers.emplace_back(fn, i, std::cref(ranges[i]));
  for (std::thread& t : workers) t.join();
}

bool InRange(const leveldb::Iterator& it, const leveldb::Slice& prefix, const Range& r) {
  return it.Valid() && it.key().starts_with(prefix) &&
         (r.end.empty() || it.key().compare(Slice(r.end)) < 0);
}

// Step 1 for one seq range: one log entry per routed event, into sorted
// runs of at most `budget` bytes (all spilled but the last).
Status RouteRange(leveldb::DB* db, const leveldb::Snapshot* snapshot, const Profile& profile,
                  uint32_t gen, const Range& range, size_t budget, ScratchDir* scratch,
                  Shared* shared, RebuildSummary* sum) {
  RunBuffer buffer;
  std::vector<std::unique_ptr<RunCursor>> runs;
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
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ScanOptions(snapshot)));
  const leveldb::Slice prefix = Slice(storage::kEventPrefix);
  for (it->Seek(Slice(range.begin)); InRange(*it, prefix, range); it->Next()) {
    Result<storage::StoredEvent> stored =
        storage::DecodeStoredEvent(View(it->key()), View(it->value()));
    if (!stored.ok()) return stored.status();
    ++sum->events;
    shared->events_done.fetch_add(1, std::memory_order_relaxed);
    Result<DecodedEvent> decoded = DecodeEvent(stored->body, profile);
    // A body the profile cannot route (say, its key path is missing) stays
    // stored, unrouted: accepted events are never dropped.
    if (!decoded.ok() || !decoded->entity) {
      ++sum->unrouted;
      continue;
    }
    const EntityRef& ref = *decoded->entity;
    storage::LogEntry entry{RankedEvent{std::move(decoded->event), decoded->rank},
                            stored->seq, stored->received_at};
    buffer.Add(storage::LogKey(gen, ref, KeyOf(entry.ranked.event, entry.ranked.rank)),
               storage::EncodeLog(entry));
    if (buffer.bytes() >= budget) {
      Status st = spill();
      if (!st.ok()) return st;
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "rebuild scan");
  buffer.Sort();
  runs.push_back(ReadBuffer(std::move(buffer)));
  std::lock_guard lock(shared->mu);
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

// Step 2: writes the merged logs in key order and folds each entity as its
// events stream by (they are consecutive and in fold order), so memory does
// not depend on an entity's length. Projections and snapshots come out in
// key order too, but in other key ranges: they go to run files and reach
// the database after the logs, so that each range is one ascending sequence
// of writes.
Status WriteGeneration(leveldb::DB* db, const Profile& profile, const RebuildTarget& target,
                       RunMerger* merged, ScratchDir* scratch, Shared* shared,
                       RebuildSummary* sum) {
  Result<std::unique_ptr<RunWriter>> projections =
      RunWriter::Create(scratch->env(), scratch->NewFileName());
  if (!projections.ok()) return projections.status();
  Result<std::unique_ptr<RunWriter>> snapshots =
      RunWriter::Create(scratch->env(), scratch->NewFileName());
  if (!snapshots.ok()) return snapshots.status();
  BatchWriter logs(db);
  std::optional<EntityRef> current;
  const EntityType* type = nullptr;
  storage::ProjectionState state;
  auto finish_entity = [&]() -> Status {
    if (!current) return Status::OK();
    ++sum->entities;
    shared->entities_done.fetch_add(1, std::memory_order_relaxed);
    sum->applied += state.projection.applied;
    sum->rejected += state.projection.rejected.size();
    return (*projections)->Add(storage::ProjectionKey(target.gen, *current),
                               storage::EncodeProjection(state));
  };
  while (merged->Next()) {
    const std::string_view key = merged->key();
    Status st = logs.Put(key, merged->value());
    if (!st.ok()) return st;
    auto parsed = storage::ParseLogKey(key);
    if (!parsed) return Status::Corruption("malformed log key");
    if (parsed->first != current) {
      st = finish_entity();
      if (!st.ok()) return st;
      current = std::move(parsed->first);
      type = profile.FindEntity(current->entity);
      if (!type) return Status::Corruption("log of unknown entity " + current->entity);
      StartFromNone(*current, &state);
    }
    Result<storage::LogEntry> e = storage::DecodeLog(key, merged->value());
    if (!e.ok()) return e.status();
    ApplyToState(*type, e->ranked, &state);
    if (target.snapshot_interval > 0 && state.events % target.snapshot_interval == 0) {
      st = (*snapshots)->Add(storage::SnapshotKey(target.gen, *current, state.last),
                             storage::EncodeProjection(state));
      if (!st.ok()) return st;
    }
  }
  if (!merged->status().ok()) return merged->status();
  Status st = finish_entity();
  if (st.ok()) st = logs.Flush();
  if (st.ok()) st = (*projections)->Close();
  if (st.ok()) st = (*snapshots)->Close();
  if (st.ok()) st = WriteRun(db, scratch, (*projections)->name());
  if (st.ok()) st = WriteRun(db, scratch, (*snapshots)->name());
  return st;
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
      : target_(target), shared_(shared), total_(total), start_(SteadyClock::now()) {
    if (target_.progress) thread_ = std::thread([this] { Loop(); });
  }
  ~ProgressReporter() {
    {
      std::lock_guard lock(mu_);
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
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) Report();
  }
  void Report(bool final = false) {
    RebuildProgress p;
    p.events_done = shared_.events_done.load();
    p.events_total = final ? p.events_done : std::max(total_, p.events_done);
    p.entities_done = shared_.entities_done.load();
    p.seconds = std::chrono::duration<double>(SteadyClock::now() - start_).count();
    target_.progress(p);
  }

  const RebuildTarget& target_;
  const Shared& shared_;
  const uint64_t total_;
  const SteadyClock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

Result<RebuildSummary> BuildGeneration(leveldb::DB* db, const leveldb::Snapshot* snapshot,
                                       const Profile& profile, const RebuildTarget& target) {
  const auto start = SteadyClock::now();
  const int workers = std::max(1, target.threads);
  // Declared first, removed last: the runs read files in it.
  ScratchDir scratch(target.env ? target.env : leveldb::Env::Default(), target.scratch_path);
  Status st = scratch.Reset();
  if (!st.ok()) return st;
  Shared shared;
  const auto bounds = SeqBounds(db, snapshot);
  {
    ProgressReporter reporter(target, shared,
                              bounds ? bounds->second - bounds->first + 1 : 0);
    if (bounds) {
      RunWorkers(SeqRanges(bounds->first, bounds->second, workers),
                 [&](size_t, const Range& r) {
                   RebuildSummary sum;
                   const size_t budget = target.sort_budget_bytes / workers;
                   shared.Merge(sum, RouteRange(db, snapshot, profile, target.gen, r, budget,
                                                &scratch, &shared, &sum));
                 });
    }
    if (!shared.error.ok()) return shared.error;
    RunMerger merged(std::move(shared.runs));
    st = WriteGeneration(db, profile, target, &merged, &scratch, &shared, &shared.sum);
    if (!st.ok()) return st;
  }
  shared.sum.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  return shared.sum;
}

Status DropGeneration(leveldb::DB* db, uint32_t gen) {
  BatchWriter w(db);
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ScanOptions(nullptr)));
  const std::string prefix = storage::GenerationPrefix(gen);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Status st = w.Delete(View(it->key()));
    if (!st.ok()) return st;
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "dropping a generation");
  return w.Flush();
}

}  // namespace eventfold
