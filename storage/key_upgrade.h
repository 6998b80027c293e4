// Key upgrade: rewrites the derived keys (under g/) of formats 1-7 into
// format 8's grammar (storage/key_codec.h), in place.
//
// Formats 1-7 wrote a key's generation in four bytes, and a fold key's
// version in nine and its rank in four; format 8 writes them in one, two and
// one or two, so the keys of an older store change, not only its values.
// An old key is told apart from a new one by its first generation byte (0
// in an old one, never in a new one), so the rewrite is resumable: a run
// cut short (a crash) leaves some keys rewritten, and the next run rewrites
// the rest. Each record's delete and put are in one batch, so none is lost
// or doubled. Every generation's keys are rewritten, a dead one's too (the
// Open that follows drops it and must read its keys for that). The caller
// records the new format only after this returns OK, in a synced write
// (which makes the unsynced rewrites before it durable too). Not
// thread-safe: run it while nothing else uses the database (Store::Open's
// upgrade).

#ifndef EVENTFOLD_STORAGE_KEY_UPGRADE_H_
#define EVENTFOLD_STORAGE_KEY_UPGRADE_H_

#include <leveldb/db.h>

#include <cstdint>
#include <functional>

#include "eventfold/status.h"

namespace eventfold::storage {

// Rewrites every key under g/ still in the old grammar. Returns how many it
// rewrote (0 for a store already rewritten), and calls `progress` (when not
// empty) with the count so far after each batch written. Corruption naming
// the key when a log or snapshot key's fold position is in neither grammar;
// a LevelDB error as its Status.
Result<uint64_t> UpgradeGenerationKeys(leveldb::DB* db,
                                       const std::function<void(uint64_t)>& progress = {});

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_KEY_UPGRADE_H_
