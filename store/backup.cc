// Store::Backup and RestoreStore (eventfold/backup.h).

#include "eventfold/backup.h"

#include <leveldb/env.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "replay/db_copy.h"
#include "replay/file_check.h"
#include "storage/background_env.h"
#include "storage/key_codec.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "store/backup_manifest.h"
#include "store/quarantine_log.h"
#include "store/store_dir.h"
#include "store/store_impl.h"
#include "store/unfinished_copy.h"

namespace eventfold {
namespace {

// A backup or restore goes only into a new or empty directory. One that
// holds a copy that did not finish is named as such (still the caller's to
// mend: kInvalidArgument, as any target that is not empty). `ignore_lock`:
// a LevelDB lock file the caller made there itself (by locking it) does
// not count.
Status RefuseNonEmpty(leveldb::Env* env, const std::string& dir, bool ignore_lock = false) {
  if (Status st = RefuseUnfinishedCopy(env, dir); !st.ok()) {
    return Status::InvalidArgument(st.message());
  }
  std::vector<std::string> names;
  if (!env->GetChildren(dir, &names).ok()) return Status::OK();  // does not exist
  for (const std::string& n : names) {
    if (n != "." && n != ".." && !(ignore_lock && n == "LOCK")) {
      return Status::InvalidArgument(dir + " is not empty: refusing to write over it");
    }
  }
  return Status::OK();
}

// kInvalidArgument when `dir` lies within another store's directory.
Status RefuseNested(const std::string& what, const std::string& dir, leveldb::Env* env) {
  const std::string outer = EnclosingStore(env, dir);
  if (outer.empty()) return Status::OK();
  return Status::InvalidArgument(what + " " + dir + ": it lies within the store at " + outer);
}

// A backup's target in one spelling ("OUT/" and "OUT" alike): LevelDB's
// table of the locks this process holds goes by the path as written.
std::string BackupTargetPath(const std::string& out_as_given) {
  std::string out = std::filesystem::path(out_as_given).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// kInvalidArgument when a backup of the store at `store` into `out` (one
// spelling) would write within that store or within another one.
Status RefuseBackupPlacement(leveldb::Env* env, const std::string& store, const std::string& out) {
  if (IsWithin(out, store)) {
    return Status::InvalidArgument("backup into " + out + ": it lies within the store it copies (" +
                                   store + ")");
  }
  return RefuseNested("backup into", out, env);
}

Status FilesIntact(const std::string& dir, leveldb::Env* env, const std::string& what) {
  std::string first;
  Result<FileCheckSummary> files = CheckFiles(dir, env, [&](const FileDamage& d) {
    if (first.empty()) first = d.file + ": " + d.message;
  });
  if (!files.ok()) return files.status();
  if (files->damaged > 0) {
    return Status::Corruption(what + " " + dir + " has " + std::to_string(files->damaged) +
                              " damaged places; the first: " + first);
  }
  return Status::OK();
}

// Opens the store at `dir` and runs its integrity check: OK when clean.
// The copy's mark is still there (it goes once the check passed), so the
// store is opened past Store::Open's refusal of it.
Status CheckStoreAt(const std::string& dir, const Options& options, const std::string& what) {
  Options o = options;
  o.create_if_missing = false;
  o.error_if_exists = false;
  o.gc_interval_micros = 0;
  Result<std::unique_ptr<Store>> store = storage::StoreImpl::Open(dir, o);
  if (!store.ok()) return store.status();
  std::string first;
  Result<CheckSummary> check = (*store)->maintenance().Check([&](const CheckProblem& p) {
    if (first.empty()) first = p.key + ": " + p.message;
  });
  if (!check.ok()) return check.status();
  if (check->problems > 0) {
    return Status::Corruption(what + " " + dir + " fails its integrity check with " +
                              std::to_string(check->problems) + " problems; the first: " + first);
  }
  return Status::OK();
}

Status CopyFile(leveldb::Env* env, const std::string& from, const std::string& to) {
  leveldb::SequentialFile* in_raw = nullptr;
  leveldb::Status s = env->NewSequentialFile(from, &in_raw);
  std::unique_ptr<leveldb::SequentialFile> in(in_raw);
  leveldb::WritableFile* out_raw = nullptr;
  if (s.ok()) s = env->NewWritableFile(to, &out_raw);
  std::unique_ptr<leveldb::WritableFile> out(out_raw);
  std::string buf(1 << 16, '\0');
  while (s.ok()) {
    leveldb::Slice got;
    s = in->Read(buf.size(), &got, buf.data());
    if (!s.ok() || got.empty()) break;
    s = out->Append(got);
  }
  if (s.ok()) s = out->Sync();
  if (s.ok()) s = out->Close();
  return storage::FromLevelDb(s, "copying " + from + " to " + to);
}

// Copies the files of the LevelDB at `from` into `to` (created), synced:
// those LevelDB names (CURRENT, its MANIFEST, logs and tables) but its lock,
// which belongs to the directory. Nothing else there is the database's: its
// info logs, the quarantine's database below a store directory (copied on
// its own), a backup's manifest, a repair's journals in lost/.
Status CopyDir(leveldb::Env* env, const std::string& from, const std::string& to) {
  std::vector<std::string> names;
  Status st = storage::FromLevelDb(env->GetChildren(from, &names), "listing " + from);
  if (!st.ok()) return st;
  (void)env->CreateDir(to);
  for (const std::string& n : names) {
    if (!IsLevelDbFileName(n) || n == "LOCK") continue;
    st = CopyFile(env, from + "/" + n, to + "/" + n);
    if (!st.ok()) return st;
  }
  return Status::OK();
}

// Removes what a failed restore or backup wrote into `dir` (which it found
// empty or absent): the files when `remove_files`, the quarantine's
// directory, `dir` itself unless it was there before (`keep_dir`), and the
// parents it created for it (`created`). A directory that is not empty stays.
void RemoveCopied(leveldb::Env* env, const std::string& dir, bool remove_files, bool keep_dir,
                  const std::vector<std::string>& created) {
  for (const std::string& d : {QuarantineDir(dir), dir}) {
    if (!remove_files) {
      if (d != dir || !keep_dir) (void)env->RemoveDir(d);
      continue;
    }
    std::vector<std::string> names;
    if (!env->GetChildren(d, &names).ok()) continue;
    for (const std::string& n : names) {
      if (n != "." && n != ".." && n != storage::kQuarantineSubdir)
        (void)env->RemoveFile(d + "/" + n);
    }
    if (d != dir || !keep_dir) (void)env->RemoveDir(d);
  }
  for (auto d = created.rbegin(); d != created.rend(); ++d) (void)env->RemoveDir(*d);
  // Durable, so a power cut brings back no half-restored store for the next
  // restore to refuse. Best effort, as the removals are.
  (void)SyncAfterRemovals(env, dir);
}

// The manifest of the backup at `out` as it is: its store's digest, and its
// quarantine's when it has one.
Result<BackupManifest> ManifestOf(const std::string& out, leveldb::Env* env) {
  BackupManifest m;
  Result<DbDigest> store = DigestDatabase(out, env);
  if (!store.ok()) return store.status();
  m.store = *store;
  const std::string quarantine = QuarantineDir(out);
  if (env->FileExists(quarantine + "/CURRENT")) {
    Result<DbDigest> q = DigestDatabase(quarantine, env);
    if (!q.ok()) return q.status();
    m.quarantine = *q;
  }
  return m;
}

// Takes LevelDB's lock on the target `dir` of a copy of `kind` ("backup",
// "restore"): kBusy, naming it, when another such copy or a Store (in any
// process) is writing there.
Status LockCopyTarget(DirLock* lock, const std::string& dir, const std::string& kind) {
  Status st = lock->Lock(dir);
  if (!st.IsBusy()) return st;
  return Status::Busy(kind + " into " + dir + ": another " + kind +
                      " or a store is writing there (" + st.message() +
                      "); nothing in it was touched");
}

// A copy's target must be new or empty. Where `dir` has a lock file (a copy
// under way there, or a store), its lock is taken first, into `lock`, and
// what `dir` holds is looked at only under it: while another copy writes
// there this one hears kBusy, not that the other's copy did not finish
// and is to be removed.
Status LockedOrEmptyTarget(leveldb::Env* env, DirLock* lock, const std::string& dir,
                           const std::string& kind) {
  if (env->FileExists(dir + "/LOCK")) {
    if (Status st = LockCopyTarget(lock, dir, kind); !st.ok()) return st;
  }
  return RefuseNonEmpty(env, dir, /*ignore_lock=*/lock->held());
}

// kCorruption unless the records restored from `backup`'s database `what`
// are those its manifest says the backup wrote.
Status SameAsWritten(const DbDigest& restored, const DbDigest& written, const std::string& backup,
                     const std::string& what) {
  if (restored == written) return Status::OK();
  return Status::Corruption("the backup at " + backup + " is not what was written: its " + what +
                            " reads back " + std::to_string(restored.records) + " records (" +
                            std::to_string(restored.bytes) + " bytes), its " + kBackupManifestFile +
                            " says " + std::to_string(written.records) + " (" +
                            std::to_string(written.bytes) +
                            " bytes) with another digest; its files were changed or swapped since");
}

// kInvalidArgument unless the database copied from `backup` into `dir` is
// a store's: Store::Open tells a store from an empty database by its
// profile record, which every store has from its creation on (backups
// written before manifests included).
Status RefuseNoStore(const std::string& dir, leveldb::Env* env, const std::string& backup) {
  Result<bool> holds = DatabaseHoldsKey(dir, env, storage::MetaKey("profile"));
  if (!holds.ok()) return holds.status();
  if (*holds) return Status::OK();
  std::string what = "it holds a LevelDB database but no eventfold store (no " +
                     storage::MetaKey("profile") + " record)";
  std::filesystem::path source = std::filesystem::path(backup).lexically_normal();
  if (!source.has_filename()) source = source.parent_path();  // "DIR/" as "DIR"
  const std::string parent = source.parent_path().string();
  if (source.filename() == storage::kQuarantineSubdir && env->FileExists(parent + "/CURRENT")) {
    what += ": it is the quarantine database of the store or backup at " + parent +
            "; restore that directory";
  }
  return Status::InvalidArgument(backup + " is not a backup: " + what);
}

}  // namespace

Result<BackupSummary> RestoreStore(const std::string& backup, const std::string& dir,
                                   const Options& options) {
  leveldb::Env* env = EnvOf(options);
  Clock* clock = options.clock ? options.clock : SystemClock();
  const int64_t start = clock->NowMicros();
  Status st = CheckStorePath("restoring: the backup", backup);
  if (st.ok()) st = CheckStorePath("restoring: the store directory", dir);
  if (st.ok() && (IsWithin(dir, backup) || IsWithin(backup, dir))) {
    st = Status::InvalidArgument("restoring " + backup + " into " + dir +
                                 ": one lies within the other");
  }
  if (st.ok()) st = RefuseNested("restoring into", dir, env);
  // LevelDB's lock on `dir` from before its first file is copied to the
  // last record read back: a Store opening `dir` meanwhile gets kBusy
  // instead of half a store, or one a failed check is about to remove (the
  // check opens it through lock.env()). Taken here already where `dir` has
  // a lock file.
  DirLock lock(env);
  if (st.ok()) st = LockedOrEmptyTarget(env, &lock, dir, "restore");
  if (!st.ok()) return st;
  // A store open on `backup` (a running serve, say) changes its files while
  // they are copied: what would be restored is no consistent cut, and the
  // checks could pass on it by chance. Its lock tells; held from here on,
  // no Store opens `backup` during the copy either. A lock that cannot be
  // taken for another reason (a read-only backup) is no store's: no store
  // writes there.
  DirLock source_lock(env);
  if (env->FileExists(backup + "/LOCK")) {
    if (Status held = source_lock.Lock(backup); held.IsBusy()) {
      return Status::Busy("restoring from " + backup +
                          ": a store has it open (a running `eventfold serve`?) and changes its "
                          "files while they would be copied; copy a live store with `eventfold "
                          "backup` and restore that copy; nothing was restored into " +
                          dir);
    }
  }
  st = RefuseUnfinishedCopy(env, backup);
  if (!st.ok()) return st.WithContext("restoring from " + backup);
  if (!env->FileExists(backup + "/CURRENT")) {
    // A backup's files without the one that names its manifest: damage, not
    // an absent backup (which a wrong path is).
    std::vector<std::string> names;
    if (env->GetChildren(backup, &names).ok()) {
      for (const std::string& n : names) {
        if (IsLevelDbFileName(n) && n != "LOCK") {
          return Status::Corruption("the backup at " + backup + " holds " + n +
                                    " but no CURRENT file: it is damaged; it was left as it is");
        }
      }
    }
    return Status::NotFound("no backup at " + backup);
  }
  st = FilesIntact(backup, env, "the backup");
  if (!st.ok()) return st;
  Result<std::optional<BackupManifest>> manifest = ReadBackupManifest(env, backup);
  if (!manifest.ok()) return manifest.status().WithContext("restoring from " + backup);
  const std::string quarantine = QuarantineDir(backup);
  const bool has_quarantine = env->FileExists(quarantine + "/CURRENT");
  if (*manifest && (*manifest)->quarantine.has_value() != has_quarantine) {
    return Status::Corruption(
        "restoring from " + backup + ": its " + kBackupManifestFile + " says " +
        (has_quarantine
             ? "no quarantine was copied, but " + quarantine + " holds one"
             : "its quarantine held " + std::to_string((*manifest)->quarantine->records) +
                   " records, but " + quarantine + " holds no database") +
        "; nothing was restored");
  }
  if (has_quarantine) {
    st = FilesIntact(quarantine, env, "the backup's quarantine");
    if (!st.ok()) return st;
  }
  BackupSummary summary;
  const bool dir_existed = env->FileExists(dir);
  std::vector<std::string> created;
  st = CreateParentDirs(env, dir, &created);
  if (st.ok() && !dir_existed) {
    st = CreateDirectory(env, dir, "creating the store directory " + dir);
  }
  if (st.ok() && !lock.held()) {
    st = LockCopyTarget(&lock, dir, "restore");
    // Empty still, now that no one else may write there: a restore that
    // finished between the check above and the lock is neither written
    // over nor removed below as this one's.
    if (st.ok()) {
      st = RefuseNonEmpty(env, dir, /*ignore_lock=*/true);
      if (!st.ok()) return st;
    }
  }
  // The digests' LevelDB background work on a thread asked for before
  // anything is copied, where a refusal is a Status
  // (storage/background_env.h).
  storage::BackgroundEnv background(lock.env());
  if (st.ok()) st = background.Start();
  // Durable before the first file is copied, gone once all is verified and
  // durable: a restore stopped in between is never opened as a store.
  if (st.ok()) st = MarkUnfinishedCopy(env, dir, "a restore of " + backup);
  // The summary counts the records' keys and values, as a backup's does
  // (read back below), not the files' bytes.
  if (st.ok()) st = CopyDir(env, backup, dir);
  // Before the store is opened below, which would create an empty one.
  if (st.ok() && has_quarantine) {
    st = CopyDir(env, quarantine, QuarantineDir(dir));
  }
  // Every record read back, before the store is opened; held to the
  // backup's manifest when it has one.
  if (st.ok()) {
    Result<BackupManifest> restored = ManifestOf(dir, &background);
    st = restored.status();
    if (st.ok()) {
      summary.records = restored->store.records;
      summary.bytes = restored->store.bytes;
      if (restored->quarantine) {
        summary.records += restored->quarantine->records;
        summary.bytes += restored->quarantine->bytes;
      }
    }
    if (st.ok() && *manifest) {
      st = SameAsWritten(restored->store, (*manifest)->store, backup, "store");
    }
    // Both or neither hold a quarantine: checked before the copy.
    if (st.ok() && *manifest && restored->quarantine) {
      st = SameAsWritten(*restored->quarantine, *(*manifest)->quarantine, backup, "quarantine");
    }
  }
  // Before the store is opened, which would make any LevelDB database a
  // store: one that holds no store's records (a store's quarantine, say)
  // passed every check as an empty store, restored as "verified" without
  // its events and dedup history.
  if (st.ok()) st = RefuseNoStore(dir, &background, backup);
  if (st.ok()) {
    Options o = options;
    o.env = lock.env();
    st = CheckStoreAt(dir, o, "the restored store");
  }
  if (st.ok()) st = SyncNewStoreDir(env, dir, created);
  if (st.ok()) st = ClearUnfinishedCopy(env, dir);
  if (!st.ok()) {
    // `dir` was empty: while it is locked, all in it is this restore's, and
    // a half-restored store must neither be opened by mistake nor block a
    // retry. Unlocked (a Store opened it first), its files are that Store's.
    RemoveCopied(env, dir, lock.held(), dir_existed, created);
    return st.WithContext("restoring " + backup + " (nothing is left of it in " + dir + ")");
  }
  summary.seconds = static_cast<double>(clock->NowMicros() - start) / 1e6;
  return summary;
}

Status CheckBackupTarget(const std::string& store_dir, const std::string& out,
                         const Options& options) {
  if (Status st = CheckStorePath("backup", out); !st.ok()) return st;
  leveldb::Env* env = EnvOf(options);
  const std::string target = BackupTargetPath(out);
  if (Status st = RefuseBackupPlacement(env, store_dir, target); !st.ok()) return st;
  DirLock lock(env);  // let go on return
  return LockedOrEmptyTarget(env, &lock, target, "backup");
}

namespace storage {

Result<BackupSummary> StoreImpl::Backup(const std::string& out_as_given,
                                        const BackupOptions& options) {
  leveldb::Env* env = env_.get();  // the copy's background work on the store's thread
  const int64_t start = clock_->NowMicros();
  Status st = CheckStorePath("backup", out_as_given);
  if (!st.ok()) return st;
  const std::string out = BackupTargetPath(out_as_given);
  st = RefuseBackupPlacement(env, path_, out);
  // LevelDB's lock on `out` from before the mark to the end: another backup
  // (in this process or another) into the same `out` gets kBusy and touches
  // nothing, instead of removing this one's files as its own when it fails.
  // Taken first where `out` has a lock file already (LockedOrEmptyTarget).
  // A directory without one gets none before it is known to be empty. The
  // copy and its checks open `out` through lock.env().
  DirLock lock(env);
  bool out_existed = env->FileExists(out);
  if (st.ok()) {
    st = LockedOrEmptyTarget(env, &lock, out, "backup");
    // Written meanwhile by a backup that made its lock file since: its own.
    if (st.IsInvalidArgument() && !lock.held() && env->FileExists(out + "/LOCK")) {
      if (Status busy = LockCopyTarget(&lock, out, "backup"); busy.IsBusy()) st = busy;
    }
  }
  std::vector<std::string> created;
  if (st.ok()) st = CreateParentDirs(env, out, &created);
  if (!st.ok()) return st;
  if (!out_existed) {
    st = CreateDirectory(env, out, "creating the backup directory " + out);
    // Made meanwhile by another backup into it: not this one's to remove;
    // the lock below decides which of the two writes there.
    if (!st.ok() && env->FileExists(out)) {
      out_existed = true;
      st = Status::OK();
    }
  }
  if (st.ok() && !lock.held()) {
    st = LockCopyTarget(&lock, out, "backup");
    if (st.IsBusy()) return st;
    // Any other failure (no permission) goes on to the removal below: of
    // the directories this backup made, empty, nothing else.
  }
  // Empty still, now that no one else may write there: a backup that
  // finished between the check above and the lock is not written over.
  if (st.ok()) {
    st = RefuseNonEmpty(env, out, /*ignore_lock=*/true);
    if (!st.ok()) return st;
  }
  // Durable before the copy begins, gone once it is verified and durable: a
  // backup stopped in between never passes for one (store/unfinished_copy.h).
  if (st.ok()) st = MarkUnfinishedCopy(env, out, "a backup of " + path_);
  Result<BackupSummary> summary =
      st.ok() ? CopyTo(out, lock.env(), created, options.abandon) : Result<BackupSummary>(st);
  if (summary.ok()) {
    st = ClearUnfinishedCopy(env, out);
    if (!st.ok()) summary = st;
  }
  if (!summary.ok()) {
    // `out` was empty and is locked: all in it is this backup's. A
    // half-written copy must neither pass for a backup nor block a retry,
    // nor keep the space a full disk needs back.
    RemoveCopied(env, out, /*remove_files=*/lock.held(), out_existed, created);
    return summary.status().WithContext("backup (nothing is left of it in " + out + ")");
  }
  summary->seconds = static_cast<double>(clock_->NowMicros() - start) / 1e6;
  return summary;
}

Result<BackupSummary> StoreImpl::CopyTo(const std::string& out, leveldb::Env* env,
                                        const std::vector<std::string>& created,
                                        const std::atomic<bool>* abandon) {
  // Checked between the steps too: each may take seconds on a big store.
  const auto abandoned = [abandon] { return abandon != nullptr && abandon->load(); };
  Status st;
  Result<DbDigest> copied = Status::IOError("the store's database is closed");
  {
    // One snapshot, released however the copy ends.
    struct Snapshot {
      GuardedDb* db;
      const leveldb::Snapshot* s;
      ~Snapshot() { db->ReleaseSnapshot(s); }
    } snap{db_.get(), db_->GetSnapshot()};
    if (snap.s) copied = CopyDatabase(db_.get(), snap.s, out, env, abandon);
  }
  if (!copied.ok()) return copied.status();
  if (abandoned()) return Abandoned();
  // Verified before it counts: the files' checksums, every record read back,
  // then the store's own integrity check.
  st = FilesIntact(out, env, "the backup");
  if (!st.ok()) return st;
  Result<DbDigest> read_back = DigestDatabase(out, env, abandon);
  if (!read_back.ok()) return read_back.status();
  if (!(*read_back == *copied)) {
    return Status::Corruption("the backup at " + out + " reads back " +
                              std::to_string(read_back->records) + " records, not the " +
                              std::to_string(copied->records) + " copied");
  }
  // The quarantine's own database, from a snapshot of its own: refusals are
  // diagnostics, so it is not cut at the same instant as the store. Left
  // out while it is closed after a failure (summary: the store's records).
  BackupSummary summary;
  quarantine_->Flush();
  if (std::shared_ptr<leveldb::DB> q = quarantine_->db()) {
    const std::string qout = QuarantineDir(out);
    Result<DbDigest> qcopied = Status::IOError("the quarantine is closed");
    {
      SnapshotGuard snap(q.get());
      qcopied = CopyDatabase(q.get(), snap.get(), qout, env, abandon);
    }
    if (!qcopied.ok()) return qcopied.status();
    if (abandoned()) return Abandoned();
    st = FilesIntact(qout, env, "the backup's quarantine");
    if (!st.ok()) return st;
    Result<DbDigest> qread = DigestDatabase(qout, env, abandon);
    if (!qread.ok()) return qread.status();
    if (!(*qread == *qcopied)) {
      return Status::Corruption("the backup's quarantine at " + qout +
                                " does not read back as copied");
    }
    summary.records = qcopied->records;
    summary.bytes = qcopied->bytes;
  }
  if (abandoned()) return Abandoned();
  Options o = options_;
  o.profile.reset();
  o.env = env;  // through the lock on `out`
  st = CheckStoreAt(out, o, "the backup");
  if (!st.ok()) return st;
  // What a restore holds the backup to: what `out` holds now. The check
  // opened it as a store, which may change it (an interrupted rebuild's
  // keys abandoned, an empty quarantine made where none was copied).
  Result<BackupManifest> manifest = ManifestOf(out, env);
  if (!manifest.ok()) return manifest.status();
  // Its name is synced with the rest.
  st = WriteBackupManifest(env, out, *manifest);
  if (!st.ok()) return st;
  st = SyncNewStoreDir(env, out, created);
  if (!st.ok()) return st;
  summary.records += copied->records;
  summary.bytes += copied->bytes;
  return summary;
}

}  // namespace storage
}  // namespace eventfold
