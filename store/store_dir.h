// What the functions that work on a store's directory from outside a Store
// (check, repair, restore, destroy) share: the Env they go through, a check
// of the path they are given, and DirLock, LevelDB's own lock on the
// directory, held from when they take it to their last step so that no Store
// opens it meanwhile and none has it open now. What they open themselves
// under it (LevelDB's repairer, a DB or a Store) goes through the lock's
// env(), which tells LevelDB the lock is taken when it asks for it.
//
// Thread-compatible: a DirLock has one owner. Its env() is thread-safe, as
// the Env it wraps.

#ifndef EVENTFOLD_STORE_STORE_DIR_H_
#define EVENTFOLD_STORE_STORE_DIR_H_

#include <leveldb/env.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/leveldb_file_names.h"
#include "eventfold/options.h"
#include "eventfold/status.h"
#include "storage/dir_sync.h"
#include "storage/file_locks.h"
#include "storage/leveldb_status.h"
#include "store/quarantine_log.h"

namespace eventfold {

// The Env the offline functions work through: Options::env, else LevelDB's
// (storage/file_locks.h).
inline leveldb::Env* EnvOf(const Options& options) { return storage::EnvOrDefault(options.env); }

// The quarantine's own database below a store directory (or a backup).
inline std::string QuarantineDir(const std::string& dir) {
  return dir + "/" + storage::kQuarantineSubdir;
}

// kInvalidArgument for an empty path, which LevelDB would read as the root
// directory ("" + "/LOCK").
inline Status CheckStorePath(std::string_view what, const std::string& path) {
  if (path.empty()) return Status::InvalidArgument(std::string(what) + ": an empty path");
  return Status::OK();
}

// Whether `dir` holds a file LevelDB names: a store, maybe a damaged one,
// and not some other directory.
inline bool HoldsLevelDbFiles(leveldb::Env* env, const std::string& dir) {
  std::vector<std::string> names;
  if (!env->GetChildren(dir, &names).ok()) return false;
  return std::any_of(names.begin(), names.end(), IsLevelDbFileName);
}

// Whether `inner` is `outer` or lies below it, comparing the paths with
// `.`, `..` and symbolic links resolved as far as they exist. A backup
// written into its own store, or a restore into its own backup, would copy
// into what it is copying.
inline bool IsWithin(const std::string& inner, const std::string& outer) {
  namespace fs = std::filesystem;
  std::error_code ec1, ec2;
  const fs::path in = fs::weakly_canonical(fs::absolute(inner, ec1), ec1);
  const fs::path out = fs::weakly_canonical(fs::absolute(outer, ec2), ec2);
  if (ec1 || ec2) return false;
  auto i = in.begin();
  for (auto o = out.begin(); o != out.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == in.end() || *i != *o) return false;
  }
  return true;
}

// The nearest directory above `path` that holds a store (LevelDB's CURRENT
// and LOCK files; a store's quarantine counts), or "" when none does. A
// backup or a restore must not nest a store inside another: a store's
// directory is its own (a restore from a store with one nested in it fails
// on the nested directory, and whoever removes or copies the outer one
// takes it along).
inline std::string EnclosingStore(leveldb::Env* env, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return "";
  while (p.has_relative_path()) {
    p = p.parent_path();
    if (env->FileExists((p / "CURRENT").string()) && env->FileExists((p / "LOCK").string())) {
      return p.string();
    }
  }
  return "";
}

// kInvalidArgument when `dir` is the quarantine's database below a store
// (`STORE/quarantine`, STORE holding its CURRENT file): a LevelDB database
// without a store's profile record, which an open as a store would take for
// an empty one and make a store, moving its refusals into a quarantine of
// its own below it (and out of STORE's `eventfold refused`). Nothing there
// is opened or written.
inline Status RefuseAStoresQuarantine(leveldb::Env* env, const std::string& dir) {
  std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "DIR/" as "DIR"
  if (p.filename() != storage::kQuarantineSubdir) return Status::OK();
  const std::string store = p.has_parent_path() ? p.parent_path().string() : ".";
  if (!env->FileExists(store + "/CURRENT")) return Status::OK();
  return Status::InvalidArgument(dir + " is the quarantine database of the store at " + store +
                                 ", not a store: use " + store +
                                 " (`eventfold refused` lists its refusals); nothing was opened");
}

// Creates the directory `dir` through `env`; `context` says what for.
// LevelDB's Env says NotFound when mkdir(2) fails with ENOENT (a parent
// removed meanwhile, a path under /proc), which callers, and the command's
// exit codes, would read as "no such store or backup" (exit 1): a
// directory that cannot be made is an I/O error, whatever errno says.
inline Status CreateDirectory(leveldb::Env* env, const std::string& dir, std::string_view context) {
  leveldb::Status s = env->CreateDir(dir);
  if (s.IsNotFound()) {
    constexpr std::string_view kPrefix = "NotFound: ";
    std::string why = s.ToString();
    if (why.starts_with(kPrefix)) why.erase(0, kPrefix.size());
    s = leveldb::Status::IOError(why);
  }
  return storage::FromLevelDb(s, context);
}

// LevelDB creates a store's own directory but not its parents: these create
// them too, so that `Open("data/webhooks")`, a backup into `bk/today` and a
// restore into `data/new` work on a fresh machine. The directories made are
// appended to `*created` (when given), outermost first, for a caller that
// must remove them again.
inline Status CreateParentDirs(leveldb::Env* env, const std::string& path,
                               std::vector<std::string>* created = nullptr) {
  std::vector<std::string> missing;
  for (std::filesystem::path p = std::filesystem::path(path).lexically_normal().parent_path();
       !p.empty() && p != p.root_path() && !env->FileExists(p.string()); p = p.parent_path()) {
    missing.push_back(p.string());
  }
  for (auto dir = missing.rbegin(); dir != missing.rend(); ++dir) {
    Status st = CreateDirectory(env, *dir, "creating parent directory " + *dir + " of " + path);
    if (!st.ok() && !env->FileExists(*dir)) return st;
    if (st.ok() && created) created->push_back(*dir);
  }
  return Status::OK();
}

// Makes the entries of a store directory and of its quarantine's directory
// durable, and of their lost/ directories (where LevelDB's repairer
// archives). Run by a tool that changed files there before it reports
// success: LevelDB renames its CURRENT file after its last directory sync,
// and a copied or renamed file's name is not synced by its own Sync.
inline Status SyncStoreDirEntries(leveldb::Env* env, const std::string& dir) {
  const std::string quarantine = QuarantineDir(dir);
  for (const std::string& d : {quarantine + "/lost", quarantine, dir + "/lost", dir}) {
    if (!env->FileExists(d)) continue;  // e.g. a store without refusals has no quarantine
    if (Status st = storage::SyncDir(env, d); !st.ok()) return st;
  }
  return Status::OK();
}

// The same for a store directory a tool has just made (a backup, a
// restore), and also the name of `dir` in its parent and the name of each
// parent made for it (`created`, from CreateParentDirs): a backup or a
// restore that said it was done is still there after a power cut.
inline Status SyncNewStoreDir(leveldb::Env* env, const std::string& dir,
                              const std::vector<std::string>& created) {
  if (Status st = SyncStoreDirEntries(env, dir); !st.ok()) return st;
  std::vector<std::string> parents = {storage::ParentDir(dir)};
  for (const std::string& c : created) parents.push_back(storage::ParentDir(c));
  for (const std::string& p : parents) {
    if (Status st = storage::SyncDir(env, p); !st.ok()) return st;
  }
  return Status::OK();
}

// Makes the removals at or under `path` durable: syncs `path` when it is
// still there, else the nearest directory above it that is (where the name
// of the highest directory removed was). Until then a power cut can bring
// a removed file back.
inline Status SyncAfterRemovals(leveldb::Env* env, const std::string& path) {
  std::string left = path;
  while (!env->FileExists(left)) {
    std::string up = storage::ParentDir(left);
    if (up == left) return Status::OK();  // nothing left to sync
    left = std::move(up);
  }
  return storage::SyncDir(env, left);
}

class DirLock {
 public:
  explicit DirLock(leveldb::Env* env) : env_(env), held_env_(env, this) {}
  ~DirLock() { Unlock(); }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  // kBusy when a Store (in any process) holds the directory; another error
  // when the lock file cannot be made (no directory, no permission).
  Status Lock(const std::string& dir) {
    leveldb::Status s = env_->LockFile(dir + "/LOCK", &lock_);
    if (s.ok()) {
      lock_path_ = dir + "/LOCK";
      return Status::OK();
    }
    lock_ = nullptr;
    return storage::FromLevelDb(s, "locking the store at " + dir);
  }
  bool held() const { return lock_ != nullptr; }
  void Unlock() {
    if (lock_) (void)env_->UnlockFile(lock_);
    lock_ = nullptr;
    lock_path_.clear();
  }

  // The Env to open the locked directory through while the lock is held: it
  // is the wrapped Env, except that LevelDB's request for this lock file
  // succeeds without locking again. (LevelDB refuses a second lock of one
  // file in one process, and letting go for the open would leave a window
  // in which another Store could open the directory.) Valid while this
  // DirLock lives; any other lock file is locked as usual.
  leveldb::Env* env() { return &held_env_; }

 private:
  class HeldLockEnv : public storage::DirSyncEnv {
   public:
    HeldLockEnv(leveldb::Env* target, const DirLock* owner)
        : storage::DirSyncEnv(target), owner_(owner) {}
    // The wrapped Env's own (see storage/dir_sync.h).
    leveldb::Status SyncDir(const std::string& dir) override {
      return storage::SyncDirOf(target(), dir);
    }
    leveldb::Status LockFile(const std::string& name, leveldb::FileLock** lock) override {
      if (owner_->lock_ && name == owner_->lock_path_) {
        *lock = &already_held_;
        return leveldb::Status::OK();
      }
      return target()->LockFile(name, lock);
    }
    leveldb::Status UnlockFile(leveldb::FileLock* lock) override {
      if (lock == &already_held_) return leveldb::Status::OK();  // the DirLock lets go
      return target()->UnlockFile(lock);
    }

   private:
    class AlreadyHeld : public leveldb::FileLock {};
    const DirLock* owner_;
    AlreadyHeld already_held_;
  };

  leveldb::Env* env_;
  leveldb::FileLock* lock_ = nullptr;
  std::string lock_path_;
  HeldLockEnv held_env_;
};

}  // namespace eventfold

#endif  // EVENTFOLD_STORE_STORE_DIR_H_
