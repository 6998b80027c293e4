// Backups (Store::Backup, RestoreStore, eventfold/backup.h): a backup taken
// while another thread ingests is a consistent cut — it restores to exactly
// the projections, change feed and dedup answers of a store that ingested
// the same prefix of deliveries — and restore refuses a non-empty directory.

#include "eventfold/backup.h"

#include <gtest/gtest.h>
#include <leveldb/db.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "eventfold/repair.h"
#include "eventfold/store.h"
#include "store/backup_manifest.h"
#include "store/store_dir.h"
#include "store/unfinished_copy.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"
#include "tests/reliability/fault_env.h"
#include "tests/reliability/reliability_util.h"
#include "tools/history.h"

#ifndef EVENTFOLD_CLI
#error "EVENTFOLD_CLI must name the eventfold binary"
#endif

namespace eventfold::reliability {
namespace {

using test_util::ScratchDir;

std::unique_ptr<Store> Open(const std::string& dir, Clock* clock) {
  Options o;
  o.durability = Durability::kBuffered;
  o.write_buffer_bytes = 256 << 10;
  o.clock = clock;
  Result<std::unique_ptr<Store>> s = Store::Open(dir, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// Open(), then the first delivery of the default simulated history
// ingested: a store with one event.
std::unique_ptr<Store> OpenWithOneEvent(const std::string& dir, Clock* clock) {
  std::unique_ptr<Store> store = Open(dir, clock);
  if (store) (void)store->Ingest(sim::GenerateHistory(sim::HistoryOptions{}).deliveries.front());
  return store;
}

// Ingests the default simulated history (sim::HistoryOptions{}).
void IngestDefaultHistory(Store* store) {
  for (const Delivery& d : sim::GenerateHistory(sim::HistoryOptions{}).deliveries) {
    (void)store->Ingest(d);
  }
}

std::vector<Projection> AllProjections(Store* store) {
  std::vector<Projection> out;
  for (const EntityType& t : store->profile()->entities()) {
    EXPECT_TRUE(store
                    ->List(t.name,
                           [&](const Projection& p) {
                             out.push_back(p);
                             return true;
                           })
                    .ok());
  }
  return out;
}

TEST(Backup, TakenUnderIngestRestoresToAConsistentCut) {
  const uint64_t seed = test_util::TestSeed("Backup", 1313);
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 600;
  ho.products = 100;
  const sim::History h = sim::GenerateHistory(ho);
  ManualClock clock(1'800'000'000'000'000);  // fixed: both sides stamp the same times
  ScratchDir live("live"), backup("backup"), restored("restored"), reference("reference");

  std::unique_ptr<Store> store = Open(live.path(), &clock);
  ASSERT_TRUE(store);
  const size_t half = h.deliveries.size() / 2;
  std::vector<uint64_t> accepted_after(h.deliveries.size() + 1, 0);  // accepted after i deliveries
  uint64_t accepted = 0;
  for (size_t i = 0; i < half; ++i) {
    accepted += store->Ingest(h.deliveries[i]).outcome == Outcome::kAccepted;
    accepted_after[i + 1] = accepted;
  }
  std::atomic<size_t> done{0};  // deliveries the ingest thread has finished
  std::thread ingest([&] {
    uint64_t n = accepted;
    for (size_t i = half; i < h.deliveries.size(); ++i) {
      n += store->Ingest(h.deliveries[i]).outcome == Outcome::kAccepted;
      accepted_after[i + 1] = n;
      done.fetch_add(1);
    }
  });
  // The backup starts with the ingest well under way, and runs beside it.
  while (done.load() < 50) std::this_thread::yield();
  Result<BackupSummary> b = store->maintenance().Backup(backup.path());
  ingest.join();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_GT(b->records, 0u);

  Result<BackupSummary> r = RestoreStore(backup.path(), restored.path(), Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->records, b->records);
  // Both count the records' keys and values (a restore counted its files'
  // bytes, a third of the backup's figure for the same records).
  EXPECT_EQ(r->bytes, b->bytes);
  std::unique_ptr<Store> back = Open(restored.path(), &clock);
  ASSERT_TRUE(back);
  const uint64_t events = back->Stats().last_seq;
  ASSERT_GE(events, accepted_after[half + 50]);

  // The prefix of deliveries the backup holds: ingest is one thread, each
  // delivery atomic, so the cut falls after some delivery k.
  size_t k = half + 50;
  while (k < h.deliveries.size() && accepted_after[k] < events) ++k;
  ASSERT_EQ(accepted_after[k], events);
  std::printf("backup cut after %zu of %zu deliveries (%zu before it began)\n", k,
              h.deliveries.size(), half);
  std::unique_ptr<Store> ref = Open(reference.path(), &clock);
  ASSERT_TRUE(ref);
  for (size_t i = 0; i < k; ++i) (void)ref->Ingest(h.deliveries[i]);

  EXPECT_EQ(AllProjections(back.get()), AllProjections(ref.get()));
  EXPECT_EQ(AllChanges(back.get()), AllChanges(ref.get()));
  // Dedup answers: every delivery, old and new, answers the same on both.
  for (const Delivery& d : h.deliveries) {
    const IngestResult x = back->Ingest(d), y = ref->Ingest(d);
    ASSERT_EQ(x.outcome, y.outcome) << d.body.substr(0, 200);
  }
  EXPECT_EQ(AllProjections(back.get()), AllProjections(store.get()));
}

// The names and sizes of the files in `dir` and below.
std::map<std::string, uintmax_t> FilesIn(const std::string& dir) {
  std::map<std::string, uintmax_t> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    files[e.path().string()] = e.is_regular_file() ? e.file_size() : 0;
  }
  return files;
}

TEST(Backup, RefusesNonEmptyTargets) {
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), backup("backup"), other("other");
  std::unique_ptr<Store> store = OpenWithOneEvent(live.path(), &clock);
  ASSERT_TRUE(store);
  std::filesystem::create_directories(other.path());
  test_util::WriteFile(other.path() + "/keep", "x");
  Result<BackupSummary> b = store->maintenance().Backup(other.path());
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(b.status().IsInvalidArgument()) << b.status().ToString();
  ASSERT_TRUE(store->maintenance().Backup(backup.path()).ok());
  Result<BackupSummary> r = RestoreStore(backup.path(), other.path(), Options());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_NE(r.status().message().find(other.path()), std::string::npos);
}

// Two backups into one new directory at once (threads here; processes the
// same, through LevelDB's lock on it), one of them spelling it "OUT/": one
// writes a whole backup, the other is refused (kBusy while the first
// writes, kInvalidArgument "not empty" after) and touches none of it; it is
// never told the first one's copy did not finish (and to remove it). Before
// the lock, the refused one removed the other's files as its own.
TEST(Backup, TwoBackupsIntoOneDirectoryLeaveOneWholeBackup) {
  const uint64_t seed = test_util::TestSeed("Backup", 2929);
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir a_dir("a"), b_dir("b");
  std::unique_ptr<Store> stores[2] = {Open(a_dir.path(), &clock), Open(b_dir.path(), &clock)};
  ASSERT_TRUE(stores[0] && stores[1]);
  for (int i = 0; i < 2; ++i) {
    sim::HistoryOptions ho;
    ho.seed = seed + i;
    ho.receipts = 300;
    for (const Delivery& d : sim::GenerateHistory(ho).deliveries) (void)stores[i]->Ingest(d);
  }
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE(round);
    ScratchDir out("out"), restored("restored");
    std::atomic<int> ready{0};
    Result<BackupSummary> results[2] = {Status::IOError("not run"), Status::IOError("not run")};
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < 2) std::this_thread::yield();
        results[i] = stores[i]->maintenance().Backup(out.path() + (i == 1 ? "/" : ""));
      });
    }
    for (std::thread& t : threads) t.join();
    ASSERT_NE(results[0].ok(), results[1].ok())
        << results[0].status().ToString() << " / " << results[1].status().ToString();
    const int won = results[0].ok() ? 0 : 1;
    const Status& lost = results[1 - won].status();
    EXPECT_TRUE(lost.IsBusy() ||
                (lost.IsInvalidArgument() && lost.message().find("not empty") != std::string::npos))
        << lost.ToString();
    Result<BackupSummary> r = RestoreStore(out.path(), restored.path(), Options());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->records, results[won]->records);
    std::unique_ptr<Store> back = Open(restored.path(), &clock);
    ASSERT_TRUE(back);
    EXPECT_EQ(AllProjections(back.get()), AllProjections(stores[won].get()));
  }
}

// A backup set right by `repair` is no longer what it wrote (the repair
// rebuilds what is derived): the repair removes its manifest, and it
// restores as a backup without one would. Before, every restore of it was
// refused as changed.
TEST(Backup, ARepairedBackupRestoresWithoutItsManifest) {
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), backup("backup"), restored("restored");
  std::unique_ptr<Store> store = Open(live.path(), &clock);
  ASSERT_TRUE(store);
  IngestDefaultHistory(store.get());
  ASSERT_TRUE(store->maintenance().Backup(backup.path()).ok());
  Result<RepairSummary> repaired = RepairStore(backup.path(), Options(), [](const LostData&) {});
  ASSERT_TRUE(repaired.ok()) << repaired.status().ToString();
  EXPECT_EQ(repaired->problems_left, 0u);
  EXPECT_FALSE(std::filesystem::exists(backup.path() + "/" + kBackupManifestFile));
  Result<BackupSummary> r = RestoreStore(backup.path(), restored.path(), Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::unique_ptr<Store> back = Open(restored.path(), &clock);
  ASSERT_TRUE(back);
  EXPECT_EQ(AllProjections(back.get()), AllProjections(store.get()));
}

// A backup whose CURRENT file is gone is damaged, not absent: restore says
// so (kCorruption) and leaves its files; a directory with no backup at all
// is kNotFound.
TEST(Backup, RestoreOfABackupWithoutCurrentIsCorruptionNotAbsence) {
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), backup("backup"), restored("restored"), empty("empty");
  std::unique_ptr<Store> store = OpenWithOneEvent(live.path(), &clock);
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->maintenance().Backup(backup.path()).ok());
  std::filesystem::remove(backup.path() + "/CURRENT");
  auto count_files = [&] {
    return std::distance(std::filesystem::directory_iterator(backup.path()),
                         std::filesystem::directory_iterator());
  };
  const auto files = count_files();
  Result<BackupSummary> r = RestoreStore(backup.path(), restored.path(), Options());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("no CURRENT"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(count_files(), files);
  std::filesystem::create_directories(empty.path());
  r = RestoreStore(empty.path(), restored.path(), Options());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
}

// A directory holding a LevelDB database but no store is no backup. A
// store's (or a backup's) quarantine subdirectory was restored as an empty
// store, without the store's events and dedup history, and reported
// verified. Restore refuses it (kInvalidArgument, naming what it is) and
// leaves nothing in the target; so it does any other database without a
// store's records. The backup they came from still restores.
TEST(Backup, ARestoreRefusesADatabaseThatIsNoStore) {
  namespace fs = std::filesystem;
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), backup("backup"), other("other"), into("into");
  {
    std::unique_ptr<Store> store = OpenWithOneEvent(live.path(), &clock);
    ASSERT_TRUE(store);
    ASSERT_EQ(store->Ingest(Delivery{{}, "not json"}).outcome, Outcome::kInvalid);
    ASSERT_TRUE(store->maintenance().Backup(backup.path()).ok());
  }
  for (const std::string& from : {backup.path(), live.path()}) {
    const std::string quarantine = from + "/quarantine";
    ASSERT_TRUE(fs::exists(quarantine + "/CURRENT")) << quarantine;
    Result<BackupSummary> r = RestoreStore(quarantine, into.path(), Options());
    ASSERT_FALSE(r.ok()) << quarantine;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
    EXPECT_NE(r.status().message().find(quarantine + " is not a backup"), std::string::npos)
        << r.status().ToString();
    EXPECT_NE(r.status().message().find("the quarantine database of the store or backup at " +
                                        from + "; restore that directory"),
              std::string::npos)
        << r.status().ToString();
    EXPECT_FALSE(fs::exists(into.path())) << "a refused restore leaves nothing";
  }
  {
    leveldb::Options o;
    o.create_if_missing = true;
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(o, other.path(), &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), "a/1", "not a store's").ok());
  }
  Result<BackupSummary> r = RestoreStore(other.path(), into.path(), Options());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("no eventfold store (no m/profile record)"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_FALSE(fs::exists(into.path()));
  r = RestoreStore(backup.path(), into.path(), Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

// A store that is open (a running serve) changes its files while they are
// copied: restoring from its directory copied them anyway. Restore refuses
// it while the store's lock is held (kBusy, naming the backup command that
// copies a live store) and writes nothing; closed, the same directory
// restores, as a backup (itself a store) does.
TEST(Backup, ARestoreRefusesAStoreThatIsOpen) {
  namespace fs = std::filesystem;
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), into("into");
  std::unique_ptr<Store> store = OpenWithOneEvent(live.path(), &clock);
  ASSERT_TRUE(store);
  const std::map<std::string, uintmax_t> before = FilesIn(live.path());
  Result<BackupSummary> r = RestoreStore(live.path(), into.path(), Options());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsBusy()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("restoring from " + live.path() + ": a store has it open"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("copy a live store with `eventfold backup`"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_FALSE(fs::exists(into.path())) << "a refused restore writes nothing";
  EXPECT_EQ(FilesIn(live.path()), before);
  const std::vector<Projection> want = AllProjections(store.get());
  store.reset();
  r = RestoreStore(live.path(), into.path(), Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::unique_ptr<Store> back = Open(into.path(), &clock);
  ASSERT_TRUE(back);
  EXPECT_EQ(AllProjections(back.get()), want);
}

// A backup records what it wrote (BACKUP-MANIFEST); a restore puts back
// exactly that or refuses, leaving nothing: not a backup whose quarantine
// was deleted or whose store files were swapped for another backup's
// (both restored as "verified" before). A backup written before manifests
// restores as before, and no restored store holds the manifest.
TEST(Backup, ARestoreHoldsTheBackupToItsManifest) {
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), other_live("other"), work("work");
  std::unique_ptr<Store> store = Open(live.path(), &clock);
  std::unique_ptr<Store> other = Open(other_live.path(), &clock);
  ASSERT_TRUE(store && other);
  const sim::History h = sim::GenerateHistory(sim::HistoryOptions{});
  for (const Delivery& d : h.deliveries) (void)store->Ingest(d);
  for (size_t i = 0; i < h.deliveries.size() / 2; ++i) (void)other->Ingest(h.deliveries[i]);
  for (Store* s : {store.get(), other.get()}) {
    EXPECT_EQ(s->Ingest(Delivery{{}, "not json"}).outcome, Outcome::kInvalid);
  }
  namespace fs = std::filesystem;
  const fs::path root = work.path();
  fs::create_directories(root);
  ASSERT_TRUE(store->maintenance().Backup(root / "a").ok());
  ASSERT_TRUE(other->maintenance().Backup(root / "b").ok());
  ASSERT_TRUE(fs::exists(root / "a" / kBackupManifestFile));
  int n = 0;
  // Each case: a copy of backup `a`, changed by `change`; a restore of it
  // refused with kCorruption naming `says`, its target left empty.
  auto refused = [&](const std::string& says, const std::function<void(const fs::path&)>& change) {
    SCOPED_TRACE(says);
    const fs::path copy = root / ("case" + std::to_string(++n));
    fs::copy(root / "a", copy, fs::copy_options::recursive);
    change(copy);
    const fs::path into = root / ("into" + std::to_string(n));
    Result<BackupSummary> r = RestoreStore(copy, into, Options());
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().ToString();
    EXPECT_FALSE(fs::exists(into)) << "a refused restore leaves nothing";
  };
  refused("quarantine", [](const fs::path& b) { fs::remove_all(b / "quarantine"); });
  refused("not what was written", [&](const fs::path& b) {
    // The other backup's store files under this one's manifest.
    for (const fs::directory_entry& e : fs::directory_iterator(b)) {
      if (e.is_regular_file() && e.path().filename() != kBackupManifestFile) fs::remove(e.path());
    }
    for (const fs::directory_entry& e : fs::directory_iterator(root / "b")) {
      if (e.is_regular_file() && e.path().filename() != kBackupManifestFile) {
        fs::copy_file(e.path(), b / e.path().filename());
      }
    }
  });
  refused(kBackupManifestFile, [](const fs::path& b) {
    test_util::WriteFile((b / kBackupManifestFile).string(),
                         "eventfold backup manifest 1\nstore 1");
  });
  // Whole, it restores; without a manifest (an older backup), too.
  for (const bool keep_manifest : {true, false}) {
    SCOPED_TRACE(keep_manifest);
    const fs::path copy = root / ("whole" + std::to_string(keep_manifest));
    fs::copy(root / "a", copy, fs::copy_options::recursive);
    if (!keep_manifest) fs::remove(copy / kBackupManifestFile);
    const fs::path into = root / ("restored" + std::to_string(keep_manifest));
    Result<BackupSummary> r = RestoreStore(copy, into, Options());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(fs::exists(into / kBackupManifestFile));
    std::unique_ptr<Store> back = Open(into, &clock);
    ASSERT_TRUE(back);
    EXPECT_EQ(AllProjections(back.get()), AllProjections(store.get()));
  }
  // A backup is a store directory: destroying it leaves nothing.
  ASSERT_TRUE(DestroyStore((root / "a").string(), Options()).ok());
  EXPECT_FALSE(fs::exists(root / "a"));
}

// A backup is never written into the store it copies, nor a restore into
// the backup it reads (or the other way round); neither writes anything.
TEST(Backup, RefusesTargetsInsideWhatTheyCopy) {
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), backup("backup");
  std::unique_ptr<Store> store = OpenWithOneEvent(live.path(), &clock);
  ASSERT_TRUE(store);
  for (const std::string& inside : {live.path() + "/inner", live.path() + "/./x/../inner"}) {
    Result<BackupSummary> b = store->maintenance().Backup(inside);
    ASSERT_FALSE(b.ok()) << inside;
    EXPECT_TRUE(b.status().IsInvalidArgument()) << b.status().ToString();
    EXPECT_FALSE(std::filesystem::exists(live.path() + "/inner")) << inside;
  }
  EXPECT_TRUE(store->maintenance().Backup("").status().IsInvalidArgument());
  ASSERT_TRUE(store->maintenance().Backup(backup.path()).ok());
  store.reset();
  Result<BackupSummary> r = RestoreStore(backup.path(), backup.path() + "/sub", Options());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(backup.path() + "/sub"));
  EXPECT_TRUE(RestoreStore(backup.path(), "", Options()).status().IsInvalidArgument());
  EXPECT_TRUE(RestoreStore("", live.path() + "-x", Options()).status().IsInvalidArgument());

  // Nor inside another store (its quarantine included): that store's own
  // backups, restores and destroy would take the nested one along.
  for (const std::string& nested : {live.path() + "/restored", live.path() + "/quarantine/r"}) {
    Result<BackupSummary> n = RestoreStore(backup.path(), nested, Options());
    ASSERT_FALSE(n.ok()) << nested;
    EXPECT_TRUE(n.status().IsInvalidArgument()) << n.status().ToString();
    EXPECT_NE(n.status().message().find("lies within the store at"), std::string::npos)
        << n.status().ToString();
    EXPECT_FALSE(std::filesystem::exists(nested));
  }
  ScratchDir other("other");
  std::unique_ptr<Store> second = Open(other.path(), &clock);
  ASSERT_TRUE(second);
  Result<BackupSummary> b = second->maintenance().Backup(live.path() + "/copy");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("lies within the store at"), std::string::npos)
      << b.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(live.path() + "/copy"));
}

// CheckBackupTarget refuses what Backup refuses before copying, with the
// same status, without opening the store and without writing anything; it
// accepts what Backup accepts.
TEST(Backup, TheTargetIsCheckedAsBackupChecksItWithoutWriting) {
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), other("other"), empty("empty"), absent("absent"), busy("busy");
  std::unique_ptr<Store> store = OpenWithOneEvent(live.path(), &clock);
  ASSERT_TRUE(store);
  std::filesystem::create_directories(other.path());
  test_util::WriteFile(other.path() + "/keep", "x");
  std::filesystem::create_directories(empty.path());
  std::unique_ptr<Store> writing = Open(busy.path(), &clock);  // holds busy/LOCK
  ASSERT_TRUE(writing);

  struct Case {
    std::string out;
    bool refused;
  };
  const std::vector<Case> cases = {
      {"", true},
      {other.path(), true},
      {live.path(), true},
      {live.path() + "/./x/../inner", true},
      {busy.path() + "/nested", true},
      {busy.path(), true},
      {empty.path(), false},
      {absent.path() + "/", false},
  };
  for (const Case& c : cases) {
    Status checked = CheckBackupTarget(live.path(), c.out, Options());
    EXPECT_EQ(checked.ok(), !c.refused) << c.out << ": " << checked.ToString();
    EXPECT_FALSE(std::filesystem::exists(live.path() + "/inner"));
    EXPECT_FALSE(std::filesystem::exists(busy.path() + "/nested"));
    EXPECT_FALSE(std::filesystem::exists(absent.path())) << c.out;
    if (!c.refused) continue;
    Result<BackupSummary> b = store->maintenance().Backup(c.out);
    ASSERT_FALSE(b.ok()) << c.out;
    EXPECT_EQ(checked.ToString(), b.status().ToString()) << c.out;
  }
  EXPECT_TRUE(CheckBackupTarget(live.path(), busy.path(), Options()).IsBusy());
  writing.reset();  // a store no one writes: not empty
  Status closed = CheckBackupTarget(live.path(), busy.path(), Options());
  EXPECT_TRUE(closed.IsInvalidArgument()) << closed.ToString();
  EXPECT_NE(closed.message().find("not empty"), std::string::npos) << closed.ToString();
  // What passed the check is backed up.
  EXPECT_TRUE(store->maintenance().Backup(empty.path()).ok());
}

// A restore into a directory that another restore is writing (its mark of
// an unfinished copy there, its lock held) is kBusy and touches nothing;
// before, it was told the other's copy did not finish and to remove it.
// Once no one holds the lock, the copy left there is named as unfinished.
TEST(Backup, ARestoreIntoADirectoryAnotherIsWritingIsBusy) {
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), backup("backup"), target("target");
  {
    std::unique_ptr<Store> store = OpenWithOneEvent(live.path(), &clock);
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->maintenance().Backup(backup.path()).ok());
  }
  leveldb::Env* env = storage::EnvOrDefault(nullptr);
  std::filesystem::create_directories(target.path());
  DirLock other(env);  // the other restore, between its mark and its end
  ASSERT_TRUE(other.Lock(target.path()).ok());
  ASSERT_TRUE(MarkUnfinishedCopy(env, target.path(), "a restore of " + backup.path()).ok());
  const std::map<std::string, uintmax_t> before = FilesIn(target.path());

  Result<BackupSummary> busy = RestoreStore(backup.path(), target.path(), Options());
  ASSERT_FALSE(busy.ok());
  EXPECT_TRUE(busy.status().IsBusy()) << busy.status().ToString();
  EXPECT_EQ(busy.status().message().find("did not finish"), std::string::npos)
      << busy.status().ToString();
  EXPECT_EQ(FilesIn(target.path()), before);

  other.Unlock();  // it was killed
  Result<BackupSummary> left = RestoreStore(backup.path(), target.path(), Options());
  ASSERT_FALSE(left.ok());
  EXPECT_TRUE(left.status().IsInvalidArgument()) << left.status().ToString();
  EXPECT_NE(left.status().message().find("did not finish"), std::string::npos)
      << left.status().ToString();
  EXPECT_EQ(FilesIn(target.path()), before);
}

// A restore that fails after copying (here: the backup lost a table, which
// only opening the copy finds) leaves nothing behind: the target is as it
// was, so a retry from a good backup is not refused as "not empty".
TEST(Backup, AFailedRestoreLeavesNothingBehind) {
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), backup("backup"), absent("absent"), empty("empty");
  std::unique_ptr<Store> store = Open(live.path(), &clock);
  ASSERT_TRUE(store);
  IngestDefaultHistory(store.get());
  ASSERT_TRUE(store->maintenance().Compact().ok());  // tables, not only a log
  ASSERT_TRUE(store->maintenance().Backup(backup.path()).ok());
  store.reset();
  std::string table;
  for (const auto& e : std::filesystem::directory_iterator(backup.path())) {
    if (e.path().extension() == ".ldb") table = e.path().string();
  }
  ASSERT_FALSE(table.empty());
  const std::string kept = table + ".kept";
  std::filesystem::rename(table, kept);
  std::filesystem::create_directories(empty.path());
  // A target below directories that do not exist yet, then an absent one,
  // then an empty one.
  const std::string deep = absent.path() + "/a/b";
  for (const std::string& target : {deep, absent.path(), empty.path()}) {
    Result<BackupSummary> r = RestoreStore(backup.path(), target, Options());
    ASSERT_FALSE(r.ok()) << target;
    EXPECT_NE(r.status().message().find(backup.path()), std::string::npos) << r.status().ToString();
    if (target == deep) {
      EXPECT_FALSE(std::filesystem::exists(absent.path())) << "parents made for it stay";
    } else if (target == absent.path()) {
      EXPECT_FALSE(std::filesystem::exists(target)) << "a target that was absent stays absent";
    } else {
      EXPECT_TRUE(std::filesystem::is_empty(target)) << "an empty target stays empty";
    }
  }
  std::filesystem::rename(kept, table);
  Result<BackupSummary> again = RestoreStore(backup.path(), empty.path(), Options());
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

// The files in the backup directory `out` and in its quarantine, as `env`
// lists them (none when neither is there).
std::vector<std::string> FilesOfABackup(leveldb::Env* env, const std::string& out) {
  std::vector<std::string> files;
  for (const std::string& d : {out, out + "/quarantine"}) {
    std::vector<std::string> names;
    if (env->GetChildren(d, &names).ok()) files.insert(files.end(), names.begin(), names.end());
  }
  return files;
}

// A backup that fails while it copies (here: the disk fills) takes away
// what it wrote: the target is as it was, so neither a half-written copy
// that opens like a store nor the space it took stays behind, and a retry
// once there is room is not refused as "not empty".
TEST(Backup, AFailedBackupLeavesNothingBehind) {
  ManualClock clock(1'800'000'000'000'000);
  FaultEnv env;
  Options o;
  o.durability = Durability::kBuffered;
  o.write_buffer_bytes = 256 << 10;
  o.clock = &clock;
  o.env = &env;
  Result<std::unique_ptr<Store>> store = Store::Open("/live", o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  IngestDefaultHistory(store->get());
  env.SetFaultPrefix("/out");
  env.SetSpaceLeft(64 << 10);
  Result<BackupSummary> r = (*store)->maintenance().Backup("/out/a/b");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("No space left on device"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("nothing is left of it in /out/a/b"), std::string::npos)
      << r.status().ToString();
  const std::vector<std::string> left = FilesOfABackup(&env, "/out/a/b");
  EXPECT_TRUE(left.empty()) << left.size() << " files left, the first " << left.front();

  env.ClearFaults();
  Result<BackupSummary> again = (*store)->maintenance().Backup("/out/a/b");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  store->reset();
  Options ro;
  ro.env = &env;
  Result<BackupSummary> restored = RestoreStore("/out/a/b", "/restored", ro);
  EXPECT_TRUE(restored.ok()) << restored.status().ToString();
}

// LevelDB's Env says NotFound when mkdir(2) fails with ENOENT (a parent
// gone meanwhile, a path under /proc). A backup or restore whose directory
// could not be made so returned kNotFound, which the command reads as
// "what you asked for does not exist" (exit 1) instead of a storage error
// (exit 2). It is kIOError, naming the directory and the reason.
class NoMkdirEnv final : public leveldb::EnvWrapper {
 public:
  NoMkdirEnv(leveldb::Env* target, std::string dir) : EnvWrapper(target), dir_(std::move(dir)) {}
  leveldb::Status CreateDir(const std::string& dir) override {
    if (dir == dir_) return leveldb::Status::NotFound(dir, "No such file or directory");
    return target()->CreateDir(dir);
  }

 private:
  const std::string dir_;
};

TEST(Backup, ADirectoryThatCannotBeMadeIsAStorageError) {
  ManualClock clock(1'800'000'000'000'000);
  FaultEnv mem;
  for (const std::string refused : {"/out/a", "/out/a/b"}) {
    NoMkdirEnv env(&mem, refused);
    Options o;
    o.durability = Durability::kBuffered;
    o.clock = &clock;
    o.env = &env;
    Result<std::unique_ptr<Store>> store = Store::Open(refused + "-live", o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    IngestDefaultHistory(store->get());
    Result<BackupSummary> r = (*store)->maintenance().Backup("/out/a/b");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsIOError()) << r.status().ToString();
    EXPECT_NE(r.status().message().find(refused + ": No such file or directory"), std::string::npos)
        << r.status().ToString();
    const std::string good = refused + "-backup";
    ASSERT_TRUE((*store)->maintenance().Backup(good).ok());
    store->reset();
    Options ro;
    ro.env = &env;
    ro.clock = &clock;
    Result<BackupSummary> restored = RestoreStore(good, "/out/a/b", ro);
    ASSERT_FALSE(restored.ok());
    EXPECT_TRUE(restored.status().IsIOError()) << restored.status().ToString();
    EXPECT_NE(restored.status().message().find(refused + ": No such file or directory"),
              std::string::npos)
        << restored.status().ToString();
  }
}

// Turns `flag` true the first time a file under `dir` is opened as its
// `kind` says: for writing (the copy has begun) or for reading as a table
// (the copy is written, its verification has begun).
class FlagOnFirstOpen final : public leveldb::EnvWrapper {
 public:
  enum Kind { kWrite, kReadTable };
  FlagOnFirstOpen(leveldb::Env* target, std::string dir, Kind kind, std::atomic<bool>* flag)
      : EnvWrapper(target), prefix_(std::move(dir) + "/"), kind_(kind), flag_(flag) {}
  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override {
    if (kind_ == kWrite && f.starts_with(prefix_)) flag_->store(true);
    return target()->NewWritableFile(f, r);
  }
  leveldb::Status NewRandomAccessFile(const std::string& f,
                                      leveldb::RandomAccessFile** r) override {
    if (kind_ == kReadTable && f.starts_with(prefix_) && f.ends_with(".ldb")) flag_->store(true);
    return target()->NewRandomAccessFile(f, r);
  }

 private:
  const std::string prefix_;
  const Kind kind_;
  std::atomic<bool>* flag_;
};

// A backup abandoned (BackupOptions::abandon: a receiver that is stopping)
// while it copies, or while it verifies its copy, stops there, removes what
// it wrote and says so as kUnavailable; the store goes on, and a backup
// without the flag then runs whole.
TEST(Backup, AnAbandonedBackupRemovesWhatItWroteAndSaysSo) {
  ManualClock clock(1'800'000'000'000'000);
  for (const FlagOnFirstOpen::Kind kind : {FlagOnFirstOpen::kWrite, FlagOnFirstOpen::kReadTable}) {
    SCOPED_TRACE(kind == FlagOnFirstOpen::kWrite ? "abandoned while copying"
                                                 : "abandoned while verifying");
    FaultEnv mem;
    std::atomic<bool> abandon{false};
    FlagOnFirstOpen env(&mem, "/out/a/b", kind, &abandon);
    Options o;
    o.durability = Durability::kBuffered;
    o.clock = &clock;
    o.env = &env;
    Result<std::unique_ptr<Store>> store = Store::Open("/live", o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    IngestDefaultHistory(store->get());
    BackupOptions bo;
    bo.abandon = &abandon;
    Result<BackupSummary> r = (*store)->maintenance().Backup("/out/a/b", bo);
    ASSERT_TRUE(abandon.load()) << "the flag was never raised: the test aims at nothing";
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsUnavailable()) << r.status().ToString();
    EXPECT_NE(r.status().message().find("abandoned"), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find("nothing is left of it in /out/a/b"), std::string::npos)
        << r.status().ToString();
    const std::vector<std::string> left = FilesOfABackup(&mem, "/out/a/b");
    EXPECT_TRUE(left.empty()) << left.size() << " files left, the first " << left.front();

    Result<BackupSummary> whole = (*store)->maintenance().Backup("/out/a/b");
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    EXPECT_GT(whole->records, 0u);
  }
}

// A backup whose files are intact but whose records do not check (a key of
// no family eventfold writes): the restore copies it, its check fails, and
// the copy goes with the directories made for it.
TEST(Backup, ARestoreWhoseCheckFailsRemovesTheDirectoriesItMade) {
  ManualClock clock(1'800'000'000'000'000);
  ScratchDir live("live"), backup("backup"), absent("absent");
  {
    std::unique_ptr<Store> store = Open(live.path(), &clock);
    ASSERT_TRUE(store);
    IngestDefaultHistory(store.get());
    ASSERT_TRUE(store->maintenance().Backup(backup.path()).ok());
  }
  {
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(leveldb::Options(), backup.path(), &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), "zz/not-ours", "x").ok());
  }
  // As a backup written before manifests: else the restore refuses it by
  // its manifest before the check (ARestoreHoldsTheBackupToItsManifest).
  std::filesystem::remove(backup.path() + "/" + kBackupManifestFile);
  const std::string deep = absent.path() + "/a/b";
  Result<BackupSummary> r = RestoreStore(backup.path(), deep, Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("integrity check"), std::string::npos)
      << "not refused by the check after the copy: " << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(absent.path())) << "the directories made for it stay";
}

TEST(Backup, CommandsBackUpAndRestore) {
  ScratchDir live("live"), backup("backup"), restored("restored");
  {
    ManualClock clock(1'800'000'000'000'000);
    std::unique_ptr<Store> store = Open(live.path(), &clock);
    ASSERT_TRUE(store);
    IngestDefaultHistory(store.get());
  }
  test_util::TempDir tmp;
  test_util::CliResult c = test_util::RunCli(
      EVENTFOLD_CLI, {"backup", "--data", live.path(), backup.path()}, tmp.path() + "/b");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("\"verified\":true"), std::string::npos) << c.out;
  c = test_util::RunCli(EVENTFOLD_CLI, {"restore", backup.path(), "--data", restored.path()},
                        tmp.path() + "/r");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  c = test_util::RunCli(EVENTFOLD_CLI, {"restore", backup.path(), "--data", restored.path()},
                        tmp.path() + "/r2");
  EXPECT_EQ(c.exit_code, 1) << c.err;
  EXPECT_NE(c.err.find("not empty"), std::string::npos) << c.err;
  c = test_util::RunCli(EVENTFOLD_CLI, {"check", "--data", restored.path()}, tmp.path() + "/c");
  EXPECT_EQ(c.exit_code, 0) << c.err << c.out;
}

// `eventfold backup --data DIR OUT` refused for its OUT leaves DIR as it
// was: it is refused before the store is opened, which would recover its
// log into new files.
TEST(Backup, ARefusedBackupCommandDoesNotOpenTheStore) {
  ScratchDir live("live"), other("other");
  {
    ManualClock clock(1'800'000'000'000'000);
    std::unique_ptr<Store> store = Open(live.path(), &clock);
    ASSERT_TRUE(store);
    IngestDefaultHistory(store.get());
  }
  std::filesystem::create_directories(other.path());
  test_util::WriteFile(other.path() + "/keep", "x");
  const std::map<std::string, uintmax_t> before = FilesIn(live.path());
  test_util::TempDir tmp;
  test_util::CliResult c = test_util::RunCli(
      EVENTFOLD_CLI, {"backup", "--data", live.path(), other.path()}, tmp.path() + "/b");
  EXPECT_EQ(c.exit_code, 1) << c.err;
  EXPECT_NE(c.err.find("not empty"), std::string::npos) << c.err;
  EXPECT_EQ(FilesIn(live.path()), before);
  c = test_util::RunCli(EVENTFOLD_CLI, {"backup", "--data", live.path(), live.path() + "/inner"},
                        tmp.path() + "/b2");
  EXPECT_EQ(c.exit_code, 1) << c.err;
  EXPECT_NE(c.err.find("lies within the store it copies"), std::string::npos) << c.err;
  EXPECT_EQ(FilesIn(live.path()), before);
}

}  // namespace
}  // namespace eventfold::reliability
