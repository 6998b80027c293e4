// Verify: rebuild aside, then compare with the live projections.
//
// Copies every stored event of a snapshot of the live store into a scratch
// LevelDB, builds a generation there (replay/rebuild.h), and walks both
// projection ranges side by side. The scratch store is destroyed afterwards,
// also on failure. Memory stays bounded by one entity's log.

#ifndef EVENTFOLD_REPLAY_VERIFY_H_
#define EVENTFOLD_REPLAY_VERIFY_H_

#include <leveldb/db.h>
#include <leveldb/env.h>

#include <cstdint>
#include <string>

#include "eventfold/clock.h"
#include "eventfold/profile.h"
#include "eventfold/store.h"
#include "storage/key_codec.h"

namespace eventfold {

struct VerifyOptions {
  std::string scratch_path;          // eventfold's scratch space (storage/scratch_space.h)
  leveldb::Env* env = nullptr;       // nullptr: LevelDB's default
  const Profile* profile = nullptr;  // the rebuild's: the live one's to verify
  // The live generation's (its projections are folded under it on read);
  // nullptr: `profile`.
  const Profile* live_profile = nullptr;
  storage::Generations live;                    // the generations to compare
  const leveldb::Snapshot* snapshot = nullptr;  // the live state to compare
  uint64_t snapshot_interval = 1000;
  Clock* clock = nullptr;  // times VerifySummary::seconds; nullptr: SystemClock()
};

Result<VerifySummary> VerifyAside(leveldb::DB* live, const VerifyOptions& options,
                                  const DifferenceFn& on_difference);

}  // namespace eventfold

#endif  // EVENTFOLD_REPLAY_VERIFY_H_
