// Salvage: reconciles the stored records of a database LevelDB's repairer
// has salvaged (RepairStore, store/repair.cc). What is unreadable goes; a
// dedup entry whose event is gone names a lost event, reported and deleted
// so a resend is accepted; an event without its dedup entry gets it back;
// feed gaps get placeholders; lost metadata its first value; each damaged
// place of the file check that reached into the events is reported as the
// received-at window to resend. Derived records (g/) are left to the
// Store's rebuild. Memory: 16 bytes per stored event.

#ifndef EVENTFOLD_STORE_SALVAGE_H_
#define EVENTFOLD_STORE_SALVAGE_H_

#include <leveldb/db.h>

#include <functional>
#include <vector>

#include "eventfold/repair.h"
#include "eventfold/status.h"

namespace eventfold {

// `before_write` runs before each write that deletes or changes a record:
// every loss reported until then names what that write may drop.
Status SalvageRecords(leveldb::DB* db, const std::vector<FileDamage>& damage,
                      const LostDataFn& on_lost, const std::function<Status()>& before_write,
                      RepairSummary* summary);

}  // namespace eventfold

#endif  // EVENTFOLD_STORE_SALVAGE_H_
