// The offline functions of eventfold/repair.h: the file check and repair
// (the record reconciliation is store/salvage.cc).

#include "eventfold/repair.h"

#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/filter_policy.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "eventfold/store.h"
#include "replay/file_check.h"
#include "storage/background_env.h"
#include "storage/dir_sync.h"
#include "storage/leveldb_status.h"
#include "storage/leveldb_util.h"
#include "storage/record_codec.h"
#include "store/backup_manifest.h"
#include "store/quarantine_log.h"
#include "store/repair_journal.h"
#include "store/salvage.h"
#include "store/store_dir.h"
#include "store/unfinished_copy.h"

namespace eventfold {
namespace {

// LevelDB's repairer reads tables without verifying block checksums, so a
// damaged block that still parses would be kept: each damaged table is
// rewritten first with the entries of its intact blocks, and one that cannot
// be opened at all is moved to dir/lost/ (where the repairer archives too).
// `on_rewrite` (when given) runs with a rewritten table's name and new size
// before it replaces the damaged one, and its error stops the repair.
Status SetDamagedTablesRight(
    const std::string& dir, leveldb::Env* env, const std::vector<FileDamage>& damage,
    const std::function<Status(const std::string& table, uint64_t size)>& on_rewrite = nullptr) {
  std::vector<std::string> tables;
  for (const FileDamage& d : damage) {
    if ((d.file.ends_with(".ldb") || d.file.ends_with(".sst")) &&
        std::find(tables.begin(), tables.end(), d.file) == tables.end()) {
      tables.push_back(d.file);
    }
  }
  for (const std::string& t : tables) {
    if (!env->FileExists(dir + "/" + t)) continue;  // missing: nothing to set right
    Result<uint64_t> kept = RewriteIntactEntries(dir, t, env, [&](uint64_t size) {
      return on_rewrite ? on_rewrite(t, size) : Status::OK();
    });
    if (kept.ok()) continue;
    // A write that failed (a full disk, the journal's sync) is no reason to
    // give up a table whose intact blocks could be kept.
    if (!kept.status().IsCorruption()) return kept.status();
    (void)env->CreateDir(dir + "/lost");
    Status st = storage::FromLevelDb(env->RenameFile(dir + "/" + t, dir + "/lost/" + t),
                                     "moving the unreadable table " + t + " aside");
    // Its new name durable before LevelDB's repairer rewrites the MANIFEST
    // without it (which syncs the store directory, not lost/).
    if (st.ok()) st = storage::SyncDir(env, dir + "/lost");
    if (!st.ok()) return st;
  }
  return Status::OK();
}

// Salvages the quarantine's own database: its damaged tables set right and
// LevelDB's repairer, as for the store, then every record that does not
// decode deleted. What is lost there is diagnostics (refusals the sender
// will not resend anyway): reported as one kRecords line, not as events,
// and `before_write` runs after the report and before the records go.
Status RepairQuarantine(const std::string& dir, leveldb::Env* env, const leveldb::Options& raw,
                        const LostDataFn& on_lost, const std::function<Status()>& before_write,
                        RepairSummary* summary) {
  const std::string qdir = QuarantineDir(dir);
  if (!env->FileExists(qdir)) return Status::OK();
  std::vector<FileDamage> damage;
  Result<FileCheckSummary> files =
      CheckFiles(qdir, env, [&](const FileDamage& d) { damage.push_back(d); });
  if (!files.ok()) return files.status();
  summary->damaged += damage.size();
  Status st = SetDamagedTablesRight(qdir, env, damage);
  if (!st.ok()) return st;
  st = storage::FromLevelDb(leveldb::RepairDB(qdir, raw), "LevelDB repair of " + qdir);
  if (!st.ok()) return st;
  leveldb::DB* db_raw = nullptr;
  st = storage::FromLevelDb(leveldb::DB::Open(raw, qdir, &db_raw), "opening " + qdir);
  if (!st.ok()) return st;
  std::unique_ptr<leveldb::DB> db(db_raw);
  leveldb::WriteBatch unreadable;
  uint64_t dropped = 0;
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (storage::DecodeRefused(storage::View(it->key()), storage::View(it->value())).ok()) continue;
    unreadable.Delete(it->key());
    ++dropped;
  }
  if (dropped == 0 && damage.empty()) return Status::OK();
  LostData lost;
  lost.kind = LostData::Kind::kRecords;
  lost.detail = "quarantine: " + std::to_string(damage.size()) + " damaged places, " +
                std::to_string(dropped) +
                " unreadable refused deliveries dropped (diagnostics only; nothing to resend)";
  on_lost(lost);
  st = before_write();
  if (!st.ok()) return st;
  st = storage::FromLevelDb(db->Write(storage::Synced(), &unreadable), "cleaning " + qdir);
  if (!st.ok()) return st;
  summary->dropped += dropped;
  return Status::OK();
}

leveldb::Options RawOptions(leveldb::Env* env, const leveldb::FilterPolicy* filter) {
  leveldb::Options lo;
  lo.env = env;
  lo.filter_policy = filter;
  lo.paranoid_checks = false;  // salvage: keep going past damage
  return lo;
}

}  // namespace

Result<FileCheckSummary> CheckStoreFiles(const std::string& dir, const Options& options,
                                         const FileDamageFn& on_damage) {
  if (Status st = CheckStorePath("checking a store", dir); !st.ok()) return st;
  DirLock lock(EnvOf(options));
  Status st = lock.Lock(dir);
  if (!st.ok()) return st;
  // A copy cut short is no store, and its files were never whole: no
  // damage of theirs is reported.
  if (std::string copy = UnfinishedCopyOf(EnvOf(options), dir); !copy.empty()) {
    FileCheckSummary unfinished;
    unfinished.unfinished_copy = std::move(copy);
    return unfinished;
  }
  Result<FileCheckSummary> sum = CheckFiles(dir, EnvOf(options), on_damage);
  if (!sum.ok()) return sum;
  Result<UnfinishedRepairs> unfinished = RepairJournal::Unfinished(EnvOf(options), dir);
  if (!unfinished.ok()) return unfinished.status();
  sum->unfinished_repairs = std::move(unfinished->journals);
  const std::string quarantine = QuarantineDir(dir);
  if (!sum.ok() || !EnvOf(options)->FileExists(quarantine)) return sum;
  // The quarantine's own database, its damage named quarantine/<file>.
  Result<FileCheckSummary> q = CheckFiles(quarantine, EnvOf(options), [&](const FileDamage& d) {
    FileDamage named = d;
    named.file = std::string(storage::kQuarantineSubdir) + "/" + d.file;
    on_damage(named);
  });
  if (!q.ok()) return q.status();
  sum->tables += q->tables;
  sum->data_blocks += q->data_blocks;
  sum->entries += q->entries;
  sum->logs += q->logs;
  sum->log_records += q->log_records;
  sum->torn_tails += q->torn_tails;
  for (const std::string& u : q->unreferenced) {
    sum->unreferenced.push_back(std::string(storage::kQuarantineSubdir) + "/" + u);
  }
  sum->damaged += q->damaged;
  return sum;
}

Result<RepairSummary> RepairStore(const std::string& dir, const Options& options,
                                  const LostDataFn& on_lost) {
  leveldb::Env* env = EnvOf(options);
  Clock* clock = options.clock ? options.clock : SystemClock();
  const int64_t start = clock->NowMicros();
  if (Status st = CheckStorePath("repairing a store", dir); !st.ok()) return st;
  // A store's quarantine is repaired with its store (RepairQuarantine).
  if (Status st = RefuseAStoresQuarantine(env, dir); !st.ok()) return st;
  // A copy that did not finish lacks what was not copied yet; nothing in it
  // needs saving (its source has it all), and a repair would make it look whole.
  if (Status st = RefuseUnfinishedCopy(env, dir); !st.ok()) return st;
  // A damaged store may have lost CURRENT, but some file of LevelDB's is
  // left: without one this is no store, and repair would make one there.
  if (!HoldsLevelDbFiles(env, dir)) return Status::NotFound("no store at " + dir);
  RepairSummary summary;
  std::vector<FileDamage> damage;
  std::unique_ptr<const leveldb::FilterPolicy> filter(leveldb::NewBloomFilterPolicy(10));
  // The store's lock from the first read to the last check: LevelDB's
  // repairer takes none, and the opens below take it through lock.env(), so
  // no Store opens the directory while it is being set right.
  DirLock lock(env);
  if (Status st = lock.Lock(dir); !st.ok()) return st;
  // A backup set right is no longer what it wrote: the manifest a restore
  // would hold it to goes before anything is changed (the journal lists
  // what was lost), so the repaired backup restores as one without it.
  if (const std::string manifest = dir + "/" + kBackupManifestFile; env->FileExists(manifest)) {
    Status st = storage::FromLevelDb(env->RemoveFile(manifest), "removing " + manifest);
    if (st.ok()) st = storage::SyncDir(env, dir);
    if (!st.ok()) return st;
  }
  // The raw opens' background work on a thread asked for here, where a
  // refusal is a Status (storage/background_env.h).
  storage::BackgroundEnv background(lock.env());
  if (Status st = background.Start(); !st.ok()) return st;
  leveldb::Env* held = &background;
  // What an earlier repair that stopped halfway had found: its damage is
  // this repair's too (the files it named may be set right already, the
  // keys around them still say what to resend), and its losses are
  // reported again.
  Result<UnfinishedRepairs> earlier = RepairJournal::Unfinished(env, dir);
  if (!earlier.ok()) return earlier.status();
  Result<std::unique_ptr<RepairJournal>> journal = RepairJournal::Create(env, dir, start);
  if (!journal.ok()) return journal.status();
  summary.journal = (*journal)->path();
  summary.resumed = earlier->journals.size();
  // Each loss is in the journal before the caller hears of it, and on disk
  // before the write that drops what it names (sync_journal). Counted here,
  // once each, whoever found it: this repair's salvage, or an earlier
  // repair whose journal this one takes over.
  const LostDataFn report = [&](const LostData& l) {
    if (!(*journal)->AddLost(l)) return;
    on_lost(l);
    if (l.kind == LostData::Kind::kEvent) ++summary.lost_events;
    if (l.kind == LostData::Kind::kWindow) ++summary.lost_windows;
  };
  const std::function<Status()> sync_journal = [&] { return (*journal)->Sync(); };
  {
    // A table an earlier repair rewrote before it stopped is checked as
    // the table it is: what the rewrite left out is in that repair's
    // damage, not the whole table.
    Result<FileCheckSummary> files = CheckFiles(
        dir, env, [&](const FileDamage& d) { damage.push_back(d); }, earlier->rewritten);
    if (!files.ok()) return files.status();
    summary.damaged = damage.size();
    const std::vector<FileDamage> found_now = damage;
    for (const FileDamage& d : earlier->damage) {
      const auto same = [&](const FileDamage& o) {
        return o.file == d.file && o.offset == d.offset && o.end == d.end && o.message == d.message;
      };
      if (std::none_of(damage.begin(), damage.end(), same)) damage.push_back(d);
    }
    for (const FileDamage& d : damage) (*journal)->AddDamage(d);
    for (const LostData& l : earlier->lost) report(l);
    // On disk before the damage is set right: a rewritten table no longer
    // shows it, and LevelDB's repairer drops what it cannot read.
    Status st = sync_journal();
    if (!st.ok()) return st;
    // Each rewrite in the journal, on disk, before the table it replaces
    // goes.
    st = SetDamagedTablesRight(dir, env, found_now, [&](const std::string& table, uint64_t size) {
      (*journal)->AddRewrite(table, size);
      return sync_journal();
    });
    if (!st.ok()) return st;
    st = storage::FromLevelDb(leveldb::RepairDB(dir, RawOptions(held, filter.get())),
                              "LevelDB repair of " + dir);
    if (!st.ok()) return st;
    st = RepairQuarantine(dir, env, RawOptions(held, nullptr), report, sync_journal, &summary);
    if (!st.ok()) return st;
  }
  {
    leveldb::DB* raw = nullptr;
    Status st = storage::FromLevelDb(leveldb::DB::Open(RawOptions(held, filter.get()), dir, &raw),
                                     "opening " + dir);
    if (!st.ok()) return st;
    std::unique_ptr<leveldb::DB> db(raw);
    st = SalvageRecords(db.get(), damage, report, sync_journal, &summary);
    if (!st.ok()) return st;
  }
  // Everything derived, rebuilt from the salvaged events; then the checks.
  Options o = options;
  o.env = held;
  o.create_if_missing = false;
  o.upgrade_format = true;  // a salvage may restore a lost m/format as format 1
  o.gc_interval_micros = 0;
  o.profile.reset();
  {
    Result<std::unique_ptr<Store>> store = Store::Open(dir, o);
    if (!store.ok()) return store.status();
    RebuildOptions rebuild;
    rebuild.rederive_logs = true;  // the salvage may have dropped log records
    Result<RebuildSummary> rebuilt = (*store)->maintenance().Rebuild(rebuild);
    if (!rebuilt.ok()) return rebuilt.status();
  }
  Result<FileCheckSummary> files = CheckFiles(dir, env, [](const FileDamage&) {});
  if (!files.ok()) return files.status();
  summary.problems_left = files->damaged;
  {
    Result<std::unique_ptr<Store>> store = Store::Open(dir, o);
    if (!store.ok()) return store.status();
    Result<CheckSummary> check = (*store)->maintenance().Check([](const CheckProblem&) {});
    if (!check.ok()) return check.status();
    summary.problems_left += check->problems;
  }
  // The names it wrote (the new tables, CURRENT, what LevelDB's repairer
  // archived in lost/) durable before the journal says the repair ran to
  // its end.
  if (Status st = SyncStoreDirEntries(env, dir); !st.ok()) return st;
  if (Status st = (*journal)->Finish(summary.problems_left, earlier->journals); !st.ok()) {
    return st;
  }
  summary.seconds = static_cast<double>(clock->NowMicros() - start) / 1e6;
  return summary;
}

}  // namespace eventfold
