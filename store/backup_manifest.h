// The manifest of a backup: what Store::Backup copied, written into the
// backup's directory once the copy is verified, so that a restore can hold
// the backup to it.
//
// Without it a restore can only check that the backup is a sound store: a
// backup whose quarantine/ was deleted, or whose table files were swapped
// for another backup's, restores as "verified", short of what was copied.
// With it, a restore counts and hashes every record it put back (store and
// quarantine) against what the backup wrote, and refuses any difference.
//
// File `BACKUP-MANIFEST` (text, synced with its name before the copy's
// unfinished mark goes):
//   eventfold backup manifest 1
//   store RECORDS BYTES HASH
//   quarantine RECORDS BYTES HASH      (absent: no quarantine was copied)
// numbers in decimal, HASH DbDigest::hash. A backup written before the
// manifest existed has none, and is restored as before.
//
// Thread-compatible: one backup or restore owns its directory.

#ifndef EVENTFOLD_STORE_BACKUP_MANIFEST_H_
#define EVENTFOLD_STORE_BACKUP_MANIFEST_H_

#include <leveldb/env.h>

#include <optional>
#include <string>

#include "eventfold/status.h"
#include "replay/db_copy.h"

namespace eventfold {

// Its name in a backup's directory. Not a name LevelDB gives its files, and
// never copied into a restored store.
inline constexpr char kBackupManifestFile[] = "BACKUP-MANIFEST";

struct BackupManifest {
  DbDigest store;
  std::optional<DbDigest> quarantine;  // nullopt: none was copied
};

// Writes `manifest` into `dir`, synced (its name is synced with the
// directory by the caller, as the backup's other files are).
[[nodiscard]] Status WriteBackupManifest(leveldb::Env* env, const std::string& dir,
                                         const BackupManifest& manifest);

// The manifest in `dir`; nullopt when there is none (a backup written
// before manifests); kCorruption naming the file and line when it cannot
// be read as one.
Result<std::optional<BackupManifest>> ReadBackupManifest(leveldb::Env* env, const std::string& dir);

}  // namespace eventfold

#endif  // EVENTFOLD_STORE_BACKUP_MANIFEST_H_
