#include "replay/verify.h"

#include <leveldb/write_batch.h>

#include <memory>

#include "replay/rebuild.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/projection_read.h"
#include "storage/record_codec.h"
#include "storage/scratch_space.h"

namespace eventfold {
namespace {

using storage::FromLevelDb;
using storage::View;

constexpr uint32_t kScratchGen = 1;

Status CopyEvents(leveldb::DB* from, const leveldb::Snapshot* snap, leveldb::DB* to) {
  leveldb::ReadOptions ro;
  ro.snapshot = snap;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(from->NewIterator(ro));
  leveldb::WriteBatch batch;
  // The rebuild's input: stored events and compacted entities' snapshots.
  for (std::string_view family : {storage::kEventPrefix, storage::kCompactionPrefix}) {
    const leveldb::Slice prefix(family.data(), family.size());
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      batch.Put(it->key(), it->value());
      if (batch.ApproximateSize() >= (4 << 20)) {
        Status st = FromLevelDb(to->Write(leveldb::WriteOptions(), &batch), "verify copy");
        if (!st.ok()) return st;
        batch.Clear();
      }
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "verify scan");
  return FromLevelDb(to->Write(leveldb::WriteOptions(), &batch), "verify copy");
}

// One side of the comparison: a generation's projection range.
class Side {
 public:
  Side(leveldb::DB* db, const leveldb::Snapshot* snap, const storage::Generations& gens,
       const Profile& profile)
      : prefix_(storage::ProjectionScanPrefix(gens.projections, "")),
        reader_(db, storage::ScanOptions(snap), gens, profile) {
    it_.reset(db->NewIterator(storage::ScanOptions(snap)));
    it_->Seek(prefix_);
  }
  bool Done() const { return !it_->Valid() || !it_->key().starts_with(prefix_); }
  // The key below the generation prefix: "<entity>\0<id>".
  std::string_view Entity() const { return View(it_->key()).substr(prefix_.size()); }
  // The whole projection, folded from the log when the record is a cursor.
  Result<storage::ProjectionState> Read() {
    return reader_.Read(View(it_->key()), View(it_->value()));
  }
  void Next() { it_->Next(); }
  Status status() const { return FromLevelDb(it_->status(), "verify scan"); }

 private:
  std::string prefix_;
  storage::ProjectionReader reader_;
  std::unique_ptr<leveldb::Iterator> it_;
};

Result<VerifySummary> Compare(Side& live, Side& rebuilt, const DifferenceFn& on_difference) {
  VerifySummary sum;
  while (!live.Done() || !rebuilt.Done()) {
    ++sum.entities;
    const int order = live.Done()      ? 1
                      : rebuilt.Done() ? -1
                                       : live.Entity().compare(rebuilt.Entity());
    std::optional<storage::ProjectionState> a, b;
    if (order <= 0) {
      Result<storage::ProjectionState> p = live.Read();
      if (!p.ok()) return p.status();
      a = std::move(*p);
    }
    if (order >= 0) {
      Result<storage::ProjectionState> p = rebuilt.Read();
      if (!p.ok()) return p.status();
      b = std::move(*p);
    }
    const bool same = a && b && a->projection == b->projection && a->events == b->events;
    if (!same) {
      ++sum.differences;
      on_difference(a ? std::optional<Projection>(a->projection) : std::nullopt,
                    b ? std::optional<Projection>(b->projection) : std::nullopt);
    }
    if (order <= 0) live.Next();
    if (order >= 0) rebuilt.Next();
  }
  Status st = live.status();
  if (st.ok()) st = rebuilt.status();
  if (!st.ok()) return st;
  return sum;
}

}  // namespace

Result<VerifySummary> VerifyAside(leveldb::DB* live, const VerifyOptions& options,
                                  const DifferenceFn& on_difference) {
  Clock* clock = options.clock ? options.clock : SystemClock();
  const int64_t start = clock->NowMicros();
  leveldb::Options lo;
  if (options.env) lo.env = options.env;
  // Empties what a crashed verify left, but never a directory of that name
  // that is not eventfold's (storage/scratch_space.h).
  Status st = storage::ClaimScratch(lo.env, options.scratch_path);
  if (!st.ok()) return st;
  lo.create_if_missing = true;
  lo.error_if_exists = true;
  leveldb::DB* raw = nullptr;
  st = FromLevelDb(leveldb::DB::Open(lo, options.scratch_path, &raw),
                   "opening verify scratch store " + options.scratch_path);
  if (!st.ok()) {
    (void)storage::ReleaseScratch(lo.env, options.scratch_path);
    return st;
  }
  std::unique_ptr<leveldb::DB> scratch(raw);

  Result<VerifySummary> result = [&]() -> Result<VerifySummary> {
    Status s = CopyEvents(live, options.snapshot, scratch.get());
    if (!s.ok()) return s;
    RebuildTarget target;
    target.gen = kScratchGen;
    target.snapshot_interval = options.snapshot_interval;
    target.scratch_path = options.scratch_path + ".runs";
    target.env = lo.env;
    Result<RebuildSummary> rebuilt =
        BuildGeneration(scratch.get(), nullptr, *options.profile, target);
    if (!rebuilt.ok()) return rebuilt.status();
    Side a(live, options.snapshot, options.live,
           options.live_profile ? *options.live_profile : *options.profile);
    Side b(scratch.get(), nullptr, storage::Generations{kScratchGen, kScratchGen},
           *options.profile);
    Result<VerifySummary> sum = Compare(a, b, on_difference);
    if (sum.ok()) sum->unrouted = rebuilt->unrouted;
    return sum;
  }();

  scratch.reset();
  // Ours, marked above: an error here leaves only scratch files behind.
  (void)storage::ReleaseScratch(lo.env, options.scratch_path);
  if (result.ok()) {
    result->seconds = static_cast<double>(clock->NowMicros() - start) / 1e6;
  }
  return result;
}

}  // namespace eventfold
