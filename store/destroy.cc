// DestroyStore (eventfold/store.h): deletes a store's own files, as
// leveldb::DestroyDB does for one database, and nothing else.

#include <leveldb/db.h>
#include <leveldb/env.h>

#include <algorithm>
#include <string>
#include <vector>

#include "eventfold/store.h"
#include "storage/leveldb_status.h"
#include "store/backup_manifest.h"
#include "store/quarantine_log.h"
#include "store/store_dir.h"
#include "store/unfinished_copy.h"

namespace eventfold {

Status DestroyStore(const std::string& path, const Options& options) {
  if (Status st = CheckStorePath("destroying a store", path); !st.ok()) return st;
  leveldb::Env* env = EnvOf(options);
  if (!env->FileExists(path)) return Status::OK();  // nothing to delete
  std::vector<std::string> children;
  Status listed = storage::FromLevelDb(env->GetChildren(path, &children), "listing " + path);
  if (!listed.ok()) return listed;  // e.g. no permission: nothing deleted
  if (children.empty()) return Status::OK();
  // Deleted with its store, never as one.
  if (Status st = RefuseAStoresQuarantine(env, path); !st.ok()) return st;
  const bool unfinished_copy = HoldsUnfinishedCopy(env, path);
  if (!unfinished_copy && std::none_of(children.begin(), children.end(), IsLevelDbFileName)) {
    return Status::InvalidArgument(path + " holds no eventfold store; nothing deleted");
  }
  // The store's lock first, held to the end: while a Store has it open
  // (here or in another process) nothing is deleted, its quarantine
  // included, and none opens it between the quarantine's deletion and the
  // store's.
  DirLock lock(env);
  if (Status st = lock.Lock(path); !st.ok()) return st;
  leveldb::Options lo;
  lo.env = env;
  const std::string quarantine = QuarantineDir(path);
  Status st = storage::FromLevelDb(leveldb::DestroyDB(quarantine, lo), "deleting " + quarantine);
  if (!st.ok()) return st;
  (void)env->RemoveFile(path + "/RECOVERY-PROBE");          // left by a recovery cut short
  (void)env->RemoveFile(path + "/" + kBackupManifestFile);  // when it is a backup
  // DestroyDB deletes only LevelDB's own files, then the directory when
  // nothing else is left in it; it asks for the lock through lock.env().
  lo.env = lock.env();
  st = storage::FromLevelDb(leveldb::DestroyDB(path, lo), "deleting " + path);
  if (!st.ok()) return st;
  if (unfinished_copy) {
    // Last, so that a destroy stopped halfway leaves the copy refused still;
    // then the directory, which DestroyDB left for the mark.
    st =
        storage::FromLevelDb(env->RemoveFile(path + "/" + kUnfinishedCopyFile), "deleting " + path);
    if (!st.ok()) return st;
    (void)env->RemoveDir(path);  // fails, as DestroyDB's does, when other files keep it
  }
  // Without this a power cut could bring the deleted store back: the store
  // directory is synced when other files kept it, else its parent.
  st = SyncAfterRemovals(env, path);
  if (!st.ok()) {
    return Status::IOError("deleted " + path +
                           ", but a power cut could bring it back: " + st.message());
  }
  return Status::OK();
}

}  // namespace eventfold
