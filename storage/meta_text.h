// The store's metadata (m/<name>) and subscription checkpoints
// (k/<subscription>): short texts — the format, the profile's JSON, decimal
// numbers. Since format 3 each is framed as a TextRecord (record_codec.h),
// so a damaged value fails its checksum instead of being read as another
// number; formats 1 and 2 stored the bare text, which FrameLegacyText
// rewrites when Open upgrades such a store.
//
// Thread-safe as the database is: these are single reads and batch edits.

#ifndef EVENTFOLD_STORAGE_META_TEXT_H_
#define EVENTFOLD_STORAGE_META_TEXT_H_

#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "eventfold/status.h"

namespace eventfold::storage {

// The text at `key`; nullopt when there is none. kCorruption naming the key
// when the stored value does not verify; kIOError (etc.) from LevelDB.
Result<std::optional<std::string>> ReadText(leveldb::DB* db, const leveldb::ReadOptions& options,
                                            const std::string& key);

// The decimal number at `key`; nullopt when there is none. kCorruption
// naming the key when the value does not verify or is not a 64-bit decimal
// number.
Result<std::optional<uint64_t>> ReadNumber(leveldb::DB* db, const leveldb::ReadOptions& options,
                                           const std::string& key);

// Puts `text` (or the decimal `n`) at `key`, framed, into `batch`.
void PutText(leveldb::WriteBatch* batch, std::string_view key, std::string_view text);
void PutNumber(leveldb::WriteBatch* batch, std::string_view key, uint64_t n);

// Adds to `batch` the framed form of every m/ and k/ value of `db` that is
// still bare text (a format 1 or 2 store's), and returns how many. A value
// that verifies already (written by this build, e.g. by a salvage) stays.
Result<uint64_t> FrameLegacyText(leveldb::DB* db, leveldb::WriteBatch* batch);

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_META_TEXT_H_
