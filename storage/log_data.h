// Log data: the event data of a lean log record, read from the one stored
// copy of the delivery.
//
// Since format 2 an entity's log record (g/<gen>/l/...) holds only what the
// fold order needs (its key's fold position and the seq; before format 8
// also the type and received_at); the event's `data` lives once, in the
// verbatim body at a/<seq>, beside its received_at. A fold of logged events
// first fills their data here. A record that carries its data (format 1) is
// left as it is. Thread-safe as LevelDB reads are.

#ifndef EVENTFOLD_STORAGE_LOG_DATA_H_
#define EVENTFOLD_STORAGE_LOG_DATA_H_

#include <leveldb/db.h>

#include "eventfold/profile.h"
#include "eventfold/status.h"
#include "storage/record_codec.h"

namespace eventfold::storage {

// Fills entry->ranked.event.data and entry->received_at from a/<entry->seq>,
// read with `options`
// (pass the snapshot the log was read under), decoding the body under
// `profile` (the profile the log was routed under). OK and unchanged when
// the record carried its data. Corruption naming the seq when the stored
// event is missing, is another event, or no longer decodes; a LevelDB
// error as its Status.
Status LoadLogData(leveldb::DB* db, const leveldb::ReadOptions& options, const Profile& profile,
                   LogEntry* entry);

// The same, reading a/<entry->seq> with `it` (whose position it moves): for
// a reader that must make no new use of the database while it holds one.
Status LoadLogData(leveldb::Iterator* it, const Profile& profile, LogEntry* entry);

// The received_at of the event stored at a/<seq>, without decoding its body
// (a check of arrival times needs no data). Corruption when it is missing
// or damaged; a LevelDB error as its Status.
Result<int64_t> ReadReceivedAt(leveldb::DB* db, const leveldb::ReadOptions& options, uint64_t seq);

}  // namespace eventfold::storage

#endif  // EVENTFOLD_STORAGE_LOG_DATA_H_
