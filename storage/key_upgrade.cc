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

// The format 8 form of `key`, an old-grammar key of generation `g`.
Result<std::string> Rewritten(std::string_view key, const GenerationKeyView& g) {
  std::string out = GenerationPrefix(g.gen);
  const bool folded = g.rest.starts_with(kLogFamily) || g.rest.starts_with(kSnapshotFamily);
  if (!folded) return out.append(g.rest);  // p/ and u/ keys: only the generation changes
  // "<family><entity>\0<id>\0<fold>", the fold position in the old grammar.
  const std::string_view rest = g.rest;
  const size_t nul1 = rest.find('\0', kLogFamily.size());
  const size_t nul2 = nul1 == std::string_view::npos ? nul1 : rest.find('\0', nul1 + 1);
  std::optional<FoldKey> fold;
  if (nul2 != std::string_view::npos) fold = DecodeLegacyFoldKey(rest.substr(nul2 + 1));
  if (!fold) return Status::Corruption("malformed fold key in \"" + Printable(key) + "\"");
  return out.append(rest.substr(0, nul2 + 1)).append(EncodeFoldKey(*fold));
}

}  // namespace

Result<uint64_t> UpgradeGenerationKeys(leveldb::DB* db) {
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
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading keys to rewrite");
  Status st = FromLevelDb(db->Write(leveldb::WriteOptions(), &batch), "rewriting keys");
  if (!st.ok()) return st;
  return rewritten;
}

}  // namespace eventfold::storage
