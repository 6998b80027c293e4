#include "storage/key_upgrade.h"

#include <leveldb/write_batch.h>

#include <memory>
#include <optional>
#include <string>

#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"

namespace eventfold::storage {
namespace {

// A batch is written once it holds this many bytes.
constexpr size_t kBatchBytes = 1 << 20;

// The format 8 form of `key`, an old-grammar key of generation `g`: its
// generation, and a log or snapshot key's fold position, in the new grammar.
Result<std::string> Rewritten(std::string_view key, const GenerationKeyView& g) {
  std::string out = GenerationPrefix(g.gen).append(g.rest);
  if (!g.rest.starts_with(kLogFamily) && !g.rest.starts_with(kSnapshotFamily)) {
    return out;  // p/ and u/ keys: only the generation changes
  }
  const std::optional<LogKeyView> parts = SplitLogKey(out);
  std::optional<FoldKey> fold = parts ? DecodeLegacyFoldKey(parts->fold) : std::nullopt;
  if (!fold) return Status::Corruption("malformed fold key in \"" + Printable(key) + "\"");
  out.resize(out.size() - parts->fold.size());
  return out.append(EncodeFoldKey(*fold));
}

}  // namespace

Result<uint64_t> UpgradeGenerationKeys(leveldb::DB* db,
                                       const std::function<void(uint64_t)>& progress) {
  leveldb::ReadOptions scan;
  scan.fill_cache = false;
  // The iterator reads the database as of its creation: the keys written
  // below do not come back to it.
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(scan));
  leveldb::WriteBatch batch;
  uint64_t rewritten = 0;
  const std::string prefix(kGenerationPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::string_view key = View(it->key());
    const std::optional<GenerationKeyView> old = ParseLegacyGenerationKey(key);
    if (!old) continue;  // format 8's already (an earlier run got to it)
    Result<std::string> now = Rewritten(key, *old);
    if (!now.ok()) return now.status();
    batch.Delete(it->key());
    batch.Put(*now, it->value());
    ++rewritten;
    if (batch.ApproximateSize() >= kBatchBytes) {
      Status st = FromLevelDb(db->Write(leveldb::WriteOptions(), &batch), "rewriting keys");
      if (!st.ok()) return st;
      batch.Clear();
      if (progress) progress(rewritten);
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading keys to rewrite");
  Status st = FromLevelDb(db->Write(leveldb::WriteOptions(), &batch), "rewriting keys");
  if (!st.ok()) return st;
  if (progress) progress(rewritten);
  // The old keys sort together at the front of g/ (an old generation's
  // first byte is 0): their deletions are compacted away. Also when nothing
  // was rewritten here: a run cut short after its rewrite left them too.
  CompactPrefix(db, prefix + '\0');
  return rewritten;
}

}  // namespace eventfold::storage
