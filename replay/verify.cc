#include "replay/verify.h"

#include <chrono>
#include <memory>

#include <leveldb/write_batch.h>

#include "replay/rebuild.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/record_codec.h"

namespace eventfold {
namespace {

using storage::FromLevelDb;

std::string_view View(const leveldb::Slice& s) { return {s.data(), s.size()}; }

Status CopyEvents(leveldb::DB* from, const leveldb::Snapshot* snap, leveldb::DB* to) {
  leveldb::ReadOptions ro;
  ro.snapshot = snap;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(from->NewIterator(ro));
  const leveldb::Slice prefix(storage::kEventPrefix.data(), storage::kEventPrefix.size());
  leveldb::WriteBatch batch;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    batch.Put(it->key(), it->value());
    if (batch.ApproximateSize() >= (4 << 20)) {
      Status st = FromLevelDb(to->Write(leveldb::WriteOptions(), &batch), "verify copy");
      if (!st.ok()) return st;
      batch.Clear();
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "verify scan");
  return FromLevelDb(to->Write(leveldb::WriteOptions(), &batch), "verify copy");
}

// Decodes the projection under the iterator, or nullopt when exhausted.
Result<std::optional<storage::ProjectionState>> At(leveldb::Iterator* it) {
  const leveldb::Slice prefix(storage::kProjectionPrefix.data(),
                              storage::kProjectionPrefix.size());
  if (!it->Valid() || !it->key().starts_with(prefix)) {
    return std::optional<storage::ProjectionState>();
  }
  Result<storage::ProjectionState> p =
      storage::DecodeProjection(View(it->key()), View(it->value()));
  if (!p.ok()) return p.status();
  return std::optional<storage::ProjectionState>(std::move(*p));
}

Result<VerifySummary> Compare(leveldb::DB* live, const leveldb::Snapshot* snap,
                              leveldb::DB* rebuilt, const DifferenceFn& on_difference) {
  VerifySummary sum;
  leveldb::ReadOptions lro;
  lro.snapshot = snap;
  lro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> a(live->NewIterator(lro));
  std::unique_ptr<leveldb::Iterator> b(rebuilt->NewIterator(leveldb::ReadOptions()));
  const leveldb::Slice prefix(storage::kProjectionPrefix.data(),
                              storage::kProjectionPrefix.size());
  a->Seek(prefix);
  b->Seek(prefix);
  while (true) {
    auto pa = At(a.get());
    if (!pa.ok()) return pa.status();
    auto pb = At(b.get());
    if (!pb.ok()) return pb.status();
    if (!*pa && !*pb) break;
    ++sum.entities;
    int order = !*pa ? 1 : !*pb ? -1 : a->key().compare(b->key());
    std::optional<Projection> left, right;
    if (order <= 0) left = (*pa)->projection;
    if (order >= 0) right = (*pb)->projection;
    const bool same = order == 0 && left == right && (*pa)->events == (*pb)->events;
    if (!same) {
      ++sum.differences;
      on_difference(left, right);
    }
    if (order <= 0) a->Next();
    if (order >= 0) b->Next();
  }
  if (!a->status().ok()) return FromLevelDb(a->status(), "verify scan");
  if (!b->status().ok()) return FromLevelDb(b->status(), "verify scan");
  return sum;
}

}  // namespace

Result<VerifySummary> VerifyAside(leveldb::DB* live, const VerifyOptions& options,
                                  const DifferenceFn& on_difference) {
  const auto start = std::chrono::steady_clock::now();
  leveldb::Options lo;
  if (options.env) lo.env = options.env;
  leveldb::DestroyDB(options.scratch_path, lo);  // leftovers of a crashed verify
  lo.create_if_missing = true;
  lo.error_if_exists = true;
  leveldb::DB* raw = nullptr;
  Status st = FromLevelDb(leveldb::DB::Open(lo, options.scratch_path, &raw),
                          "opening verify scratch store " + options.scratch_path);
  if (!st.ok()) return st;
  std::unique_ptr<leveldb::DB> scratch(raw);
  const leveldb::Snapshot* snap = live->GetSnapshot();

  Result<VerifySummary> result = [&]() -> Result<VerifySummary> {
    Status s = CopyEvents(live, snap, scratch.get());
    if (!s.ok()) return s;
    Result<RebuildSummary> rebuilt = RebuildProjections(scratch.get(), *options.profile);
    if (!rebuilt.ok()) return rebuilt.status();
    return Compare(live, snap, scratch.get(), on_difference);
  }();

  live->ReleaseSnapshot(snap);
  scratch.reset();
  leveldb::DestroyDB(options.scratch_path, lo);
  if (result.ok()) {
    result->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return result;
}

}  // namespace eventfold
