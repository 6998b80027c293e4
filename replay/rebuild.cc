#include "replay/rebuild.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include <leveldb/write_batch.h>

#include "core/decode.h"
#include "replay/compaction.h"
#include "replay/materializer.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/record_codec.h"

namespace eventfold {
namespace {

using storage::FromLevelDb;
using SteadyClock = std::chrono::steady_clock;

constexpr size_t kBatchBytes = 4 << 20;
constexpr size_t kSamplesPerWorker = 256;
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
  RebuildSummary sum;                 // merged per-worker totals
  std::vector<std::string> samples;   // log keys seen in step 1
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

// Step 1 for one seq range: one log entry per routed event.
Status RouteRange(leveldb::DB* db, const leveldb::Snapshot* snapshot, const Profile& profile,
                  uint32_t gen, const Range& range, uint64_t seed, Shared* shared,
                  RebuildSummary* sum) {
  BatchWriter w(db);
  std::mt19937_64 rng(seed);
  std::vector<std::string> samples;
  uint64_t routed = 0;
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
    std::string key = storage::LogKey(gen, ref, KeyOf(entry.ranked.event, entry.ranked.rank));
    // Reservoir sample of log keys: where to split the fold step.
    if (samples.size() < kSamplesPerWorker) {
      samples.push_back(key);
    } else if (const uint64_t j = rng() % (routed + 1); j < kSamplesPerWorker) {
      samples[j] = key;
    }
    ++routed;
    Status st = w.Put(key, storage::EncodeLog(entry));
    if (!st.ok()) return st;
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "rebuild scan");
  std::lock_guard lock(shared->mu);
  shared->samples.insert(shared->samples.end(), samples.begin(), samples.end());
  return w.Flush();
}

// Step 2 for one log key range: fold each entity (consecutive keys, already
// in fold order).
Status FoldRange(leveldb::DB* db, const Profile& profile, const RebuildTarget& target,
                 const Range& range, Shared* shared, RebuildSummary* sum) {
  BatchWriter w(db);
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ScanOptions(nullptr)));
  std::optional<EntityRef> current;
  std::vector<RankedEvent> events;
  auto flush_entity = [&]() -> Status {
    if (!current) return Status::OK();
    const EntityType* type = profile.FindEntity(current->entity);
    if (!type) return Status::Corruption("log of unknown entity " + current->entity);
    storage::ProjectionState state;
    std::vector<storage::ProjectionState> snapshots;
    FoldOnto(*type, *current, events, target.snapshot_interval, &state, &snapshots);
    ++sum->entities;
    shared->entities_done.fetch_add(1, std::memory_order_relaxed);
    sum->applied += state.projection.applied;
    sum->rejected += state.projection.rejected.size();
    events.clear();
    for (const storage::ProjectionState& s : snapshots) {
      Status st = w.Put(storage::SnapshotKey(target.gen, *current, s.last),
                        storage::EncodeProjection(s));
      if (!st.ok()) return st;
    }
    return w.Put(storage::ProjectionKey(target.gen, *current), storage::EncodeProjection(state));
  };
  const std::string family = storage::LogFamilyPrefix(target.gen);
  const leveldb::Slice prefix = Slice(family);
  for (it->Seek(Slice(range.begin)); InRange(*it, prefix, range); it->Next()) {
    auto parsed = storage::ParseLogKey(View(it->key()));
    if (!parsed) return Status::Corruption("malformed log key");
    if (parsed->first != current) {
      Status st = flush_entity();
      if (!st.ok()) return st;
      current = std::move(parsed->first);
    }
    Result<storage::LogEntry> e = storage::DecodeLog(View(it->key()), View(it->value()));
    if (!e.ok()) return e.status();
    events.push_back(std::move(e->ranked));
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "rebuild scan");
  Status st = flush_entity();
  if (!st.ok()) return st;
  return w.Flush();
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

// Fold ranges split at entity boundaries near the sampled keys' quantiles.
std::vector<Range> LogRanges(uint32_t gen, std::vector<std::string> samples, int workers) {
  std::sort(samples.begin(), samples.end());
  std::vector<std::string> cuts;
  for (int i = 1; i < workers && !samples.empty(); ++i) {
    auto parsed = storage::ParseLogKey(samples[samples.size() * i / workers]);
    if (!parsed) continue;
    std::string cut = storage::LogPrefix(gen, parsed->first);
    if (cuts.empty() || cuts.back() < cut) cuts.push_back(std::move(cut));
  }
  std::vector<Range> ranges;
  std::string begin = storage::LogFamilyPrefix(gen);
  for (std::string& cut : cuts) {
    if (cut <= begin) continue;
    ranges.push_back(Range{begin, cut});
    begin = std::move(cut);
  }
  ranges.push_back(Range{begin, ""});
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
  Shared shared;
  const auto bounds = SeqBounds(db, snapshot);
  {
    ProgressReporter reporter(target, shared,
                              bounds ? bounds->second - bounds->first + 1 : 0);
    if (bounds) {
      RunWorkers(SeqRanges(bounds->first, bounds->second, workers),
                 [&](size_t i, const Range& r) {
                   RebuildSummary sum;
                   Status st = RouteRange(db, snapshot, profile, target.gen, r, i + 1,
                                          &shared, &sum);
                   shared.Merge(sum, st);
                 });
    }
    if (!shared.error.ok()) return shared.error;
    RunWorkers(LogRanges(target.gen, std::move(shared.samples), workers),
               [&](size_t, const Range& r) {
                 RebuildSummary sum;
                 Status st = FoldRange(db, profile, target, r, &shared, &sum);
                 shared.Merge(sum, st);
               });
    if (!shared.error.ok()) return shared.error;
  }
  // 3. Compacted entities start from their compaction snapshot.
  Status st = SeedCompacted(db, snapshot, profile, target.gen, target.snapshot_interval,
                            &shared.sum);
  if (!st.ok()) return st;
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
