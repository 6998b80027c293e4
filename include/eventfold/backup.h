// Backups: an online, consistent copy of a running store (Maintenance::Backup)
// and putting one back (RestoreStore).
//
// A backup is itself a store directory: a fresh LevelDB written from one
// LevelDB snapshot of the live store, so it holds exactly the writes that
// had returned when the backup began — every family (events, dedup entries,
// logs, projections, the change feed, checkpoints, the quarantine) in one
// consistent cut — while ingest goes on. It is synced, then verified before
// it is reported written: every file's checksums, every record read back
// against what was copied, and the store's own integrity check on it. Its
// names are synced too (its files, its directory in its parent, each parent
// made for it), so a backup or restore reported done survives a power cut.
// Until then the target holds a mark, written and synced before the first
// file is copied and removed last: a backup or a restore stopped midway
// (killed, a power cut) leaves a directory that Store::Open, repair and a
// restore from it refuse (kCorruption, naming it and the way out: remove it
// and run the copy again), never one that passes for a whole store.
// A verified backup also holds a manifest of what it wrote (records, bytes
// and a digest of its store and of its quarantine); a restore puts back
// exactly that or refuses.
// Thread-safety: as Store; RestoreStore may run for different directories
// at once.

#ifndef EVENTFOLD_BACKUP_H_
#define EVENTFOLD_BACKUP_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "eventfold/options.h"
#include "eventfold/status.h"

namespace eventfold {

// The mark's file in a backup's or a restore's target, there from before
// the first file is copied until the copy is verified and durable. Not a
// name LevelDB gives its files.
inline constexpr char kUnfinishedCopyFile[] = "UNFINISHED-COPY";

// How Maintenance::Backup runs.
struct BackupOptions {
  // nullptr (the default): the backup runs to its end. Else, once this turns
  // true (a receiver that is stopping sets it), the backup stops at its next
  // check (after each batch of records it copies or reads back, and between
  // its steps), removes what it wrote, and returns kUnavailable, so a
  // shutdown waits for no long copy. The flag must outlive the call.
  const std::atomic<bool>* abandon = nullptr;
};

// What a backup or a restore wrote.
struct BackupSummary {
  uint64_t records = 0;  // LevelDB records copied
  uint64_t bytes = 0;    // their keys and values
  double seconds = 0;
};

// What Maintenance::Backup of the store at `store_dir` into `out` would
// refuse before copying anything, found without opening that store (for a
// tool that would otherwise open a store, recovering its log, only to have
// the backup refused): kInvalidArgument for an empty `out`, one within
// `store_dir` or within another store, or one that exists and is not empty
// (naming a backup that did not finish, when it holds one); kBusy while
// another backup or a Store is writing `out`. Writes nothing: an `out`
// holding a lock file is locked for the look and let go. OK promises
// nothing of the backup itself (a directory may be written meanwhile, the
// disk may fail): Backup checks all of this again.
Status CheckBackupTarget(const std::string& store_dir, const std::string& out,
                         const Options& options);

// Restores the backup at `backup` (a directory Maintenance::Backup wrote) into
// `dir`, which must not exist or be empty (its missing parents are
// created): refuses a non-empty `dir`, an empty path, or a `dir` and
// `backup` of which one lies within the other, with kInvalidArgument naming
// it, kNotFound when `backup` holds no backup, and kCorruption when it
// holds a backup that did not finish, whose CURRENT file is gone, or
// that is not what its manifest says it wrote (a quarantine missing, files
// changed or swapped: checked before the restored store is opened).
// Verifies the backup's files first (a damaged backup is refused with
// kCorruption), copies them synced through options.env, reads every
// record back, then opens the restored store and runs its integrity check,
// all under LevelDB's lock on `dir` (a Store opening `dir` meanwhile fails
// with kBusy). On failure after the copy began, what it
// wrote is removed: `dir` is empty or absent again, as are the parents it
// created. When `dir` cannot be locked (kBusy: a Store or another
// restore is writing there), nothing in it is touched.
Result<BackupSummary> RestoreStore(const std::string& backup, const std::string& dir,
                                   const Options& options);

}  // namespace eventfold

#endif  // EVENTFOLD_BACKUP_H_
