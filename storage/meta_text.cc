#include "storage/meta_text.h"

#include <memory>

#include "core/parse_number.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/record_codec.h"

namespace eventfold::storage {

Result<std::optional<std::string>> ReadText(leveldb::DB* db, const leveldb::ReadOptions& options,
                                            const std::string& key) {
  std::string value;
  const leveldb::Status s = db->Get(options, key, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return FromLevelDb(s, "reading " + key);
  Result<std::string> text = DecodeText(key, value);
  if (!text.ok()) return text.status();
  return std::optional<std::string>(std::move(*text));
}

Result<std::optional<uint64_t>> ReadNumber(leveldb::DB* db, const leveldb::ReadOptions& options,
                                           const std::string& key) {
  Result<std::optional<std::string>> text = ReadText(db, options, key);
  if (!text.ok()) return text.status();
  if (!*text) return std::optional<uint64_t>();
  const std::optional<uint64_t> n = ParseU64(**text);
  if (!n) return Status::Corruption(key + " is not a 64-bit decimal number");
  return n;
}

void PutText(leveldb::WriteBatch* batch, std::string_view key, std::string_view text) {
  batch->Put(leveldb::Slice(key.data(), key.size()), EncodeText(text));
}

void PutNumber(leveldb::WriteBatch* batch, std::string_view key, uint64_t n) {
  PutText(batch, key, std::to_string(n));
}

Result<uint64_t> FrameLegacyText(leveldb::DB* db, leveldb::WriteBatch* batch) {
  uint64_t framed = 0;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ScanOptions()));
  for (std::string_view family : {kCheckpointPrefix, kMetaPrefix}) {
    const std::string prefix(family);
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      const std::string_view key = View(it->key());
      const std::string_view value = View(it->value());
      if (DecodeText(key, value).ok()) continue;
      PutText(batch, key, value);
      ++framed;
    }
  }
  if (!it->status().ok()) return FromLevelDb(it->status(), "reading the store's metadata");
  return framed;
}

}  // namespace eventfold::storage
