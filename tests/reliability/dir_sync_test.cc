// The names the tools write are durable before they report success: a
// backup, a restore and a repair leave no directory entry a power cut could
// still take (a file's Sync makes its bytes durable, not its name), and a
// repair makes its journal's name durable before it changes anything in the
// store; a destroy, and a failed restore's clean-up, leave no removal a
// power cut could undo. DirEntryEnv keeps the entries made, and the ones
// removed, since their directory's last sync, as a file system that does
// not commit names with a file's data may lose them.

#include "storage/dir_sync.h"

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/env.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "eventfold/backup.h"
#include "eventfold/maintenance.h"
#include "eventfold/repair.h"
#include "eventfold/store.h"
#include "store/backup_manifest.h"
#include "store/unfinished_copy.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"
#include "tests/reliability/file_damage_util.h"
#include "tools/history.h"

namespace eventfold::reliability {
namespace {

using test_util::ScratchDir;

std::string Normal(const std::string& path) {
  std::string p = std::filesystem::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// The default Env, keeping every entry made (a file or directory created, a
// rename's new name) until its directory is synced: by SyncDir, or, as
// LevelDB's POSIX Env does, by the Sync of a MANIFEST file in it. Before
// each change directly in `watched` (a file made, renamed or removed there),
// `before_change` runs with the entries not yet synced.
class DirEntryEnv : public storage::DirSyncEnv {
 public:
  DirEntryEnv() : storage::DirSyncEnv(leveldb::Env::Default()) {}

  // The entries under `path` (it included) that are not synced yet.
  std::vector<std::string> Unsynced(const std::string& path) { return Under(pending_, path); }
  // The removals under `path` (it included) whose directory is not synced
  // yet: names a power cut could bring back.
  std::vector<std::string> UnsyncedRemovals(const std::string& path) {
    return Under(removed_, path);
  }
  int dir_syncs() {
    std::lock_guard<std::mutex> l(mu_);
    return dir_syncs_;
  }
  void Watch(const std::string& dir, std::function<void(const std::string& change)> fn) {
    watched_ = Normal(dir);
    before_change_ = std::move(fn);
  }

  leveldb::Status SyncDir(const std::string& dir) override {
    std::lock_guard<std::mutex> l(mu_);
    ++dir_syncs_;
    SyncedLocked(Normal(dir));
    return leveldb::Status::OK();
  }
  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override {
    BeforeChange(f);
    const bool existed = target()->FileExists(f);
    leveldb::Status s = target()->NewWritableFile(f, r);
    if (!s.ok()) return s;
    if (!existed) Made(f);
    if (std::filesystem::path(f).filename().string().starts_with("MANIFEST")) {
      *r = new ManifestFile(this, storage::ParentDir(Normal(f)), *r);
    }
    return s;
  }
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override {
    const bool existed = target()->FileExists(f);
    leveldb::Status s = target()->NewAppendableFile(f, r);
    if (s.ok() && !existed) Made(f);
    return s;
  }
  leveldb::Status CreateDir(const std::string& d) override {
    const bool existed = target()->FileExists(d);
    leveldb::Status s = target()->CreateDir(d);
    if (s.ok() && !existed) Made(d);
    return s;
  }
  leveldb::Status RenameFile(const std::string& from, const std::string& to) override {
    BeforeChange(from);
    leveldb::Status s = target()->RenameFile(from, to);
    if (s.ok()) {
      Gone(from);
      Made(to);
    }
    return s;
  }
  leveldb::Status RemoveFile(const std::string& f) override {
    BeforeChange(f);
    leveldb::Status s = target()->RemoveFile(f);
    if (s.ok()) Gone(f);
    return s;
  }
  leveldb::Status RemoveDir(const std::string& d) override {
    leveldb::Status s = target()->RemoveDir(d);
    if (s.ok()) Gone(d);
    return s;
  }

 private:
  // LevelDB's POSIX Env syncs a MANIFEST's directory with each of its syncs.
  class ManifestFile : public leveldb::WritableFile {
   public:
    ManifestFile(DirEntryEnv* env, std::string dir, leveldb::WritableFile* base)
        : env_(env), dir_(std::move(dir)), base_(base) {}
    leveldb::Status Append(const leveldb::Slice& data) override { return base_->Append(data); }
    leveldb::Status Close() override { return base_->Close(); }
    leveldb::Status Flush() override { return base_->Flush(); }
    leveldb::Status Sync() override {
      leveldb::Status s = base_->Sync();
      if (s.ok()) {
        std::lock_guard<std::mutex> l(env_->mu_);
        env_->SyncedLocked(dir_);
      }
      return s;
    }

   private:
    DirEntryEnv* env_;
    const std::string dir_;
    std::unique_ptr<leveldb::WritableFile> base_;
  };

  // The paths of `set` at or under `path`.
  std::vector<std::string> Under(const std::set<std::string>& set, const std::string& path) {
    const std::string p = Normal(path);
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::string> out;
    for (const std::string& e : set) {
      if (e == p || e.starts_with(p + "/")) out.push_back(e);
    }
    return out;
  }

  void BeforeChange(const std::string& path) {
    if (!before_change_ || storage::ParentDir(Normal(path)) != watched_) return;
    // One call at a time: LevelDB's background work changes files too.
    std::lock_guard<std::mutex> l(watch_mu_);
    before_change_(Normal(path));
  }
  void Made(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    pending_.insert(Normal(path));
  }
  // A name made and removed before its directory was synced leaves nothing
  // to lose, nor does anything removed inside it; one removed after that is
  // a removal a power cut can undo until its directory is synced.
  void Gone(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    const std::string p = Normal(path);
    if (pending_.erase(p) == 0) {
      removed_.insert(p);
    } else {
      ForgetRemovalsInLocked(p);
    }
  }
  void ForgetRemovalsInLocked(const std::string& dir) {
    const std::string inside = dir + "/";
    for (auto it = removed_.lower_bound(inside); it != removed_.end() && it->starts_with(inside);) {
      it = removed_.erase(it);
    }
  }
  void SyncedLocked(const std::string& dir) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      it = storage::ParentDir(*it) == dir ? pending_.erase(it) : std::next(it);
    }
    std::vector<std::string> done;
    for (const std::string& r : removed_) {
      if (storage::ParentDir(r) == dir) done.push_back(r);
    }
    for (const std::string& r : done) {
      removed_.erase(r);
      ForgetRemovalsInLocked(r);  // a directory durably removed, with all in it
    }
  }

  std::mutex mu_;
  std::set<std::string> pending_;  // full paths whose name is not synced
  std::set<std::string> removed_;  // full paths whose removal is not synced
  int dir_syncs_ = 0;
  std::string watched_;
  std::function<void(const std::string&)> before_change_;
  std::mutex watch_mu_;  // taken before mu_ (the callback reads Unsynced)
};

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A store of a seeded history with a refusal, written through `env`.
void FillStore(const std::string& dir, Options options) {
  Result<std::unique_ptr<Store>> s = Store::Open(dir, options);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  sim::HistoryOptions ho;
  ho.seed = test_util::TestSeed("DirSync", 5151);
  ho.receipts = 60;
  ho.products = 15;
  for (const Delivery& d : sim::GenerateHistory(ho).deliveries) (void)(*s)->Ingest(d);
  ASSERT_EQ((*s)->Ingest("{not json").outcome, Outcome::kInvalid);
}

TEST(DirSync, ABackupAndARestoreLeaveNoNameAPowerCutCouldTake) {
  ScratchDir scratch("dir-sync");
  DirEntryEnv env;
  Options o;
  o.env = &env;
  const std::string store = scratch.path() + "/store";
  FillStore(store, o);
  // Parents the tools make, two deep, and the store directories themselves.
  const std::string backup = scratch.path() + "/made/for/backup";
  {
    Result<std::unique_ptr<Store>> s = Store::Open(store, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    Result<BackupSummary> b = (*s)->maintenance().Backup(backup);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
  }
  ASSERT_TRUE(env.FileExists(backup + "/quarantine/CURRENT")) << "the test needs a quarantine";
  EXPECT_EQ(Join(env.Unsynced(scratch.path() + "/made")), "")
      << "names the backup wrote that a power cut could take";
  const int after_backup = env.dir_syncs();
  EXPECT_GT(after_backup, 0);

  const std::string restored = scratch.path() + "/also/made/restored";
  Result<BackupSummary> r = RestoreStore(backup, restored, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Join(env.Unsynced(scratch.path() + "/also")), "")
      << "names the restore wrote that a power cut could take";
  EXPECT_GT(env.dir_syncs(), after_backup);
}

// A backup's and a restore's mark of a copy under way (store/unfinished_copy.h)
// is durable before any other change in the target, and goes only once every
// name the copy wrote is durable: after a power cut at any point the target
// is either marked unfinished or a whole store.
TEST(DirSync, ACopyIsMarkedUnfinishedUntilItsLastNameIsDurable) {
  ScratchDir scratch("dir-sync");
  DirEntryEnv env;
  Options o;
  o.env = &env;
  const std::string store = scratch.path() + "/store";
  FillStore(store, o);
  const std::string backup = scratch.path() + "/made/backup";
  const std::string restored = scratch.path() + "/made/restored";
  for (const std::string& target : {backup, restored}) {
    SCOPED_TRACE(target);
    const std::string mark = target + "/" + kUnfinishedCopyFile;
    int changes = 0;
    bool cleared = false;
    env.Watch(target, [&](const std::string& change) {
      if (change == mark && !env.FileExists(mark)) return;  // the mark itself is made
      if (change == mark) {  // and removed: all else is durable by now
        cleared = true;
        EXPECT_EQ(Join(env.Unsynced(scratch.path() + "/made")), "");
        return;
      }
      ++changes;
      EXPECT_FALSE(cleared) << change << " after the mark went";
      EXPECT_TRUE(env.FileExists(mark)) << change << " before the mark";
      EXPECT_EQ(Join(env.Unsynced(mark)), "") << change << " before the mark's name is durable";
    });
    if (target == backup) {
      Result<std::unique_ptr<Store>> s = Store::Open(store, o);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      Result<BackupSummary> b = (*s)->maintenance().Backup(backup);
      ASSERT_TRUE(b.ok()) << b.status().ToString();
    } else {
      Result<BackupSummary> r = RestoreStore(backup, restored, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
    env.Watch("", nullptr);
    EXPECT_TRUE(cleared);
    EXPECT_GT(changes, 3);
    EXPECT_FALSE(env.FileExists(mark));
    EXPECT_EQ(Join(env.UnsyncedRemovals(target)), "") << "the mark's removal";
  }
}

// A destroyed store stays destroyed: every removal, its quarantine's and
// its own, is in a directory synced before DestroyStore returns; the
// store's directory itself when another file keeps it, else its parent.
TEST(DirSync, ADestroyLeavesNoRemovalAPowerCutCouldUndo) {
  ScratchDir scratch("dir-sync");
  for (const bool keep_dir : {false, true}) {
    DirEntryEnv env;
    Options o;
    o.env = &env;
    const std::string store = scratch.path() + (keep_dir ? "/kept" : "/store");
    FillStore(store, o);
    if (keep_dir) std::ofstream(store + "/notes.txt") << "not the store's\n";
    const Status st = DestroyStore(store, o);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(env.FileExists(store), keep_dir);
    EXPECT_EQ(Join(env.UnsyncedRemovals(scratch.path())), "") << (keep_dir ? "kept" : "removed");
  }
}

// A restore whose check fails removes what it copied into the empty
// directory it was given, and syncs that directory: a power cut does not
// bring back half a store for the next restore to refuse.
TEST(DirSync, AFailedRestoreLeavesNoRemovalAPowerCutCouldUndo) {
  ScratchDir scratch("dir-sync");
  DirEntryEnv env;
  Options o;
  o.env = &env;
  const std::string store = scratch.path() + "/store", backup = scratch.path() + "/backup";
  FillStore(store, o);
  {
    Result<std::unique_ptr<Store>> s = Store::Open(store, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->maintenance().Backup(backup).ok());
  }
  {
    // A key of no family eventfold writes: the files are intact, the
    // restored store's check fails.
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(leveldb::Options(), backup, &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), "zz/not-ours", "x").ok());
  }
  // As a backup written before manifests, which only the check refuses.
  std::filesystem::remove(backup + "/" + kBackupManifestFile);
  const std::string target = scratch.path() + "/empty";
  std::filesystem::create_directories(target);  // there, and durable, before
  Result<BackupSummary> r = RestoreStore(backup, target, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("integrity check"), std::string::npos)
      << r.status().ToString();
  EXPECT_TRUE(std::filesystem::is_empty(target));
  EXPECT_EQ(Join(env.UnsyncedRemovals(target)), "");
}

TEST(DirSync, ARepairMakesItsJournalsNameDurableBeforeItChangesAnything) {
  ScratchDir scratch("dir-sync-repair");
  const std::string dir = scratch.path() + "/store";
  FillStore(dir, SmallTables());
  // A table whose footer is gone cannot be opened: the repair moves it to
  // lost/, a rename across two directories.
  FileCheckSummary pristine;
  ASSERT_TRUE(Damages(dir, &pristine).empty());
  uintmax_t size = 0;
  const std::string table = LargestLiveTable(dir, pristine.unreferenced, &size);
  ASSERT_FALSE(table.empty());
  XorBytes(dir + "/" + table, size - 16, std::string(16, '\x5a'));

  DirEntryEnv env;
  int changes = 0;
  std::vector<std::string> early;  // changes made while the journal's name could be lost
  env.Watch(dir, [&](const std::string& change) {
    ++changes;
    for (const std::string& e : env.Unsynced(dir + "/lost")) {
      // lost/ itself, the journal in it and the table moved there (not what
      // LevelDB's repairer archives there as it goes, synced at the end).
      if (e == dir + "/lost" || e.starts_with(dir + "/lost/repair-") ||
          e == dir + "/lost/" + table) {
        early.push_back(change + " while " + e + " was not synced");
      }
    }
  });
  Options o;
  o.env = &env;
  Result<RepairSummary> r = RepairStore(dir, o, [](const LostData&) {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(changes, 0) << "the repair changed nothing the test saw";
  EXPECT_EQ(Join(early), "");
  EXPECT_TRUE(env.FileExists(dir + "/lost/" + table)) << "the unreadable table was not moved";
  EXPECT_EQ(Join(env.Unsynced(dir)), "") << "names the repair wrote that a power cut could take";
}

// A synced write is acknowledged only once the name of the file it is in,
// and of every file LevelDB needs to find it (CURRENT, the MANIFEST), is
// durable: at the open, and after each memtable switch (a new log file),
// with parents the open makes.
TEST(DirSync, EveryAcknowledgedWriteIsInAFileWhoseNameIsDurable) {
  ScratchDir scratch("dir-sync-store");
  DirEntryEnv env;
  Options o = SmallTables();  // a memtable switch every 64 KiB
  o.durability = Durability::kSync;
  o.env = &env;
  const std::string dir = scratch.path() + "/made/store";
  Result<std::unique_ptr<Store>> s = Store::Open(dir, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const auto needed = [&] {
    std::vector<std::string> out;
    for (const std::string& e : env.Unsynced(scratch.path() + "/made")) {
      // The quarantine's database is written unsynced: nothing of it is
      // acknowledged as durable.
      if (e.starts_with(dir + "/quarantine")) continue;
      const std::string name = std::filesystem::path(e).filename().string();
      if (e == scratch.path() + "/made" || e == dir || name.ends_with(".log") ||
          name == "CURRENT" || name.starts_with("MANIFEST")) {
        out.push_back(e);
      }
    }
    return Join(out);
  };
  EXPECT_EQ(needed(), "") << "after the open";
  // The quarantine's directory, too: its refusals are written unsynced, but
  // a power cut must not take the directory with all it has kept.
  const std::vector<std::string> quarantine = env.Unsynced(dir + "/quarantine");
  EXPECT_EQ(std::count(quarantine.begin(), quarantine.end(), dir + "/quarantine"), 0)
      << Join(quarantine);
  sim::HistoryOptions ho;
  ho.seed = test_util::TestSeed("DirSync", 5151);
  ho.receipts = 150;
  ho.products = 30;
  std::set<std::string> logs;
  int acknowledged = 0;
  for (const Delivery& d : sim::GenerateHistory(ho).deliveries) {
    if ((*s)->Ingest(d).outcome != Outcome::kAccepted) continue;
    ++acknowledged;
    const std::string unsynced = needed();
    ASSERT_EQ(unsynced, "") << "after acknowledgement " << acknowledged;
    for (const std::string& f : FilesEndingIn(dir, ".log")) logs.insert(f);
  }
  EXPECT_GT(logs.size(), 3u) << "too few memtable switches to show anything";
}

}  // namespace
}  // namespace eventfold::reliability
