// The physical pass of `eventfold check` (CheckStoreFiles, eventfold/repair.h):
// seeded random byte flips in every kind of LevelDB file — table data, filter,
// meta index and index blocks, footers, write-ahead logs, the MANIFEST — are
// each reported, nothing crashes, and the command exits 1 without changing
// the directory; repair afterwards leaves a store that checks clean. (The
// outside case of issue 13, a SIGKILLed store, is in file_check_crash_test.cc:
// it forks, so it has its own binary.)

#include <gtest/gtest.h>
#include <leveldb/db.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "eventfold/clock.h"
#include "eventfold/repair.h"
#include "eventfold/store.h"
#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_seed.h"
#include "tests/reliability/file_damage_util.h"
#include "tools/history.h"

#ifndef EVENTFOLD_CLI
#error "EVENTFOLD_CLI must name the eventfold binary"
#endif

namespace eventfold::reliability {
namespace {

namespace fs = std::filesystem;
using test_util::CliResult;
using test_util::ReadFile;
using test_util::RunCli;
using test_util::ScratchDir;
using test_util::TempDir;

// A closed store with tables (flushed memtables) and an unflushed log tail.
void Populate(const std::string& dir, uint64_t seed, int receipts) {
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = receipts;
  ho.products = receipts / 4;
  ho.conflicts = 2;
  const sim::History h = sim::GenerateHistory(ho);
  Result<std::unique_ptr<Store>> store = Store::Open(dir, SmallTables());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (const Delivery& d : h.deliveries) (void)(*store)->Ingest(d);
}

std::vector<std::string> Manifests(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("MANIFEST-", 0) == 0) out.push_back(name);
  }
  return out;
}

uint64_t Varint(const std::string& s, size_t* pos) {
  uint64_t v = 0;
  for (int shift = 0; *pos < s.size(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(s[(*pos)++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) break;
  }
  return v;
}

// Where a table's parts lie, from its footer: data blocks, then the filter
// block, the meta index block, the index block, the 48-byte footer.
struct TableLayout {
  uint64_t meta = 0, index = 0, footer = 0;
};

TableLayout Layout(const std::string& path) {
  const std::string bytes = ReadFile(path);
  TableLayout t;
  t.footer = bytes.size() - 48;
  const std::string footer = bytes.substr(t.footer);
  size_t pos = 0;
  t.meta = Varint(footer, &pos);
  (void)Varint(footer, &pos);
  t.index = Varint(footer, &pos);
  return t;
}

enum class Region { kData, kFilter, kMetaIndex, kIndex, kFooter, kLog, kManifest };
const char* Name(Region r) {
  static const char* names[] = {"table data",   "filter block", "meta index block", "index block",
                                "table footer", "log",          "MANIFEST"};
  return names[static_cast<int>(r)];
}

class FileCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = test_util::TestSeed("FileCheckTest", 1300);
    Populate(pristine_.path(), seed_, 400);
  }
  // A fresh copy of the pristine store at dir_.
  void Reset() {
    fs::remove_all(dir_.path());
    fs::copy(pristine_.path(), dir_.path(), fs::copy_options::recursive);
  }
  uint64_t seed_ = 0;
  ScratchDir pristine_{"pristine"};
  ScratchDir dir_{"flipped"};
};

TEST_F(FileCheckTest, IntactStoreHasNoDamage) {
  FileCheckSummary s;
  const std::vector<FileDamage> ds = Damages(pristine_.path(), &s);
  EXPECT_TRUE(ds.empty()) << Describe(ds);
  EXPECT_GE(s.tables, 2u);
  EXPECT_GE(s.logs, 2u);  // the write-ahead log and the MANIFEST
  EXPECT_GT(s.entries, 1000u);
  EXPECT_GT(s.log_records, 10u);
  EXPECT_EQ(s.damaged, 0u);
}

// One byte flipped per round, at a seeded random offset inside a region
// chosen round-robin; every such byte is live data (or a checksum, a length,
// padding LevelDB wrote as zeros), so every flip must be reported. Every
// other round `repair` follows and must leave a store that checks clean.
TEST_F(FileCheckTest, EveryFlippedByteInEveryKindOfFileIsReported) {
  std::mt19937_64 rng(seed_);
  // Only files the MANIFEST lists hold live data: a table a compaction was
  // writing when the store closed is a left-over LevelDB deletes on open.
  FileCheckSummary pristine;
  ASSERT_TRUE(Damages(pristine_.path(), &pristine).empty());
  auto live = [&](std::vector<std::string> names) {
    std::erase_if(names, [&](const std::string& n) {
      return fs::file_size(pristine_.path() + "/" + n) == 0 ||
             std::find(pristine.unreferenced.begin(), pristine.unreferenced.end(), n) !=
                 pristine.unreferenced.end();
    });
    return names;
  };
  const std::vector<std::string> tables = live(FilesEndingIn(pristine_.path(), ".ldb"));
  const std::vector<std::string> logs = live(FilesEndingIn(pristine_.path(), ".log"));
  ASSERT_FALSE(tables.empty());
  ASSERT_FALSE(logs.empty());
  constexpr int kRounds = 70;
  for (int round = 0; round < kRounds; ++round) {
    const Region region = static_cast<Region>(round % 7);
    Reset();
    std::string file;
    uint64_t lo = 0, hi = 0;  // the region's bytes: [lo, hi)
    if (region == Region::kLog || region == Region::kManifest) {
      file = region == Region::kLog ? logs[rng() % logs.size()] : Manifests(dir_.path()).at(0);
      hi = fs::file_size(dir_.path() + "/" + file);
    } else {
      file = tables[rng() % tables.size()];
      const TableLayout t = Layout(dir_.path() + "/" + file);
      switch (region) {
        case Region::kData:
          hi = t.meta / 2;
          break;
        case Region::kFilter:
          lo = t.meta - 21, hi = t.meta;
          break;  // its tail and trailer
        case Region::kMetaIndex:
          lo = t.meta, hi = t.index;
          break;
        case Region::kIndex:
          lo = t.index, hi = t.footer;
          break;
        default:
          lo = t.footer, hi = t.footer + 48;
          break;
      }
    }
    ASSERT_LT(lo, hi) << Name(region) << " in " << file;
    const uint64_t offset = lo + rng() % (hi - lo);
    const char mask = static_cast<char>(1 + rng() % 255);
    SCOPED_TRACE("round " + std::to_string(round) + ": " + Name(region) + " of " + file +
                 ", byte " + std::to_string(offset) + " ^ " + std::to_string(uint8_t(mask)));
    XorBytes(dir_.path() + "/" + file, offset, std::string(1, mask));
    const std::vector<FileDamage> ds = Damages(dir_.path());
    ASSERT_FALSE(ds.empty()) << "not reported";
    EXPECT_TRUE(std::any_of(ds.begin(), ds.end(), [&](const FileDamage& d) {
      return d.file == file && d.offset <= offset && (d.end == 0 || offset < d.end);
    })) << Describe(ds);
    if (round % 2 != 0) continue;
    // Every other round, repair: it must end with a clean check.
    uint64_t lost = 0;
    Result<RepairSummary> r = RepairStore(dir_.path(), Options(), [&](const LostData&) { ++lost; });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->problems_left, 0u);
    if (r->problems_left != 0) {
      TempDir tmp;
      const CliResult c =
          RunCli(EVENTFOLD_CLI, {"check", "--data", dir_.path()}, tmp.path() + "/c");
      std::printf("after repair, eventfold check:\n%s%s", c.err.substr(0, 4000).c_str(),
                  c.out.c_str());
    }
    EXPECT_TRUE(Damages(dir_.path()).empty());
    std::printf("round %d (%s): repaired, %llu losses listed\n", round, Name(region),
                static_cast<unsigned long long>(lost));
  }
}

// The command: damage is reported with exit 1, the logical pass still runs
// (on a scratch copy), and the directory is left byte for byte as it was.
TEST_F(FileCheckTest, CheckCommandReportsDamageAndLeavesTheDirectoryAlone) {
  Reset();
  const std::string table = FilesEndingIn(dir_.path(), ".ldb").front();
  const TableLayout t = Layout(dir_.path() + "/" + table);
  XorBytes(dir_.path() + "/" + table, t.meta / 3, "\x5a");
  std::vector<std::pair<std::string, std::string>> before;
  for (const auto& e : fs::directory_iterator(dir_.path())) {
    before.emplace_back(e.path().filename().string(), ReadFile(e.path().string()));
  }
  std::sort(before.begin(), before.end());
  TempDir tmp;
  const CliResult cli = RunCli(EVENTFOLD_CLI, {"check", "--data", dir_.path()}, tmp.path() + "/c");
  std::printf("eventfold check, exit %d:\n%s%s", cli.exit_code, cli.err.c_str(), cli.out.c_str());
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.err.find(table + ": bytes "), std::string::npos) << cli.err;
  EXPECT_NE(cli.err.find("checksum mismatch"), std::string::npos) << cli.err;
  EXPECT_NE(cli.err.find("`eventfold repair --data " + dir_.path() + "`"), std::string::npos)
      << cli.err;
  EXPECT_EQ(cli.err.find("--rederive-logs"), std::string::npos) << cli.err;
  EXPECT_NE(cli.out.find("\"ok\":false"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("\"damaged\":1"), std::string::npos) << cli.out;
  std::vector<std::pair<std::string, std::string>> after;
  for (const auto& e : fs::directory_iterator(dir_.path())) {
    after.emplace_back(e.path().filename().string(), ReadFile(e.path().string()));
  }
  std::sort(after.begin(), after.end());
  EXPECT_TRUE(before == after) << "check changed the store directory";
  EXPECT_FALSE(fs::exists(dir_.path() + ".check-copy"));
}

// Issue 13: with paranoid checks (the default) a compaction that reads a
// damaged data block stops the store's writes (503: the sender retries)
// instead of carrying the damage into new tables; `eventfold check` then
// names the damaged table.
TEST_F(FileCheckTest, ACompactionMeetingADamagedBlockStopsWrites) {
  Reset();
  // The largest live table: a table a compaction was writing when the store
  // closed is a left-over that LevelDB deletes on open, damage and all.
  FileCheckSummary pristine;
  ASSERT_TRUE(Damages(pristine_.path(), &pristine).empty());
  uintmax_t largest_size = 0;
  const std::string largest = LargestLiveTable(dir_.path(), pristine.unreferenced, &largest_size);
  ASSERT_FALSE(largest.empty()) << "no table in the pristine store";
  const std::string path = dir_.path() + "/" + largest;
  // A quarter into the data blocks (they end before the filter block, which
  // precedes the meta index).
  XorBytes(path, Layout(path).meta / 4, std::string(8, '\xa5'));

  // A still clock: the store's background recovery does not reopen it while
  // the test looks.
  ManualClock clock(1764400000000000);
  Options o = SmallTables();
  ASSERT_TRUE(o.paranoid_checks) << "the default";
  o.clock = &clock;
  {
    Result<std::unique_ptr<Store>> store = Store::Open(dir_.path(), o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const Status compacted = (*store)->maintenance().Compact();
    const std::string body =
        R"({"event_id":"evt_after_damage","type":"receipt.issued",)"
        R"("occurred_at":"2026-11-29T10:15:30Z","data":{"receipt_id":"rcp_after","amount":1}})";
    const IngestResult r = (*store)->Ingest(Delivery{{{"Content-Type", "application/json"}}, body});
    EXPECT_EQ(r.outcome, Outcome::kStorageError)
        << "compact: " << compacted.ToString() << "; ingest: " << r.ResponseBody();
    EXPECT_EQ(r.http_status(), 503);
  }
  TempDir tmp;
  const CliResult check =
      RunCli(EVENTFOLD_CLI, {"check", "--data", dir_.path()}, tmp.path() + "/c");
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_NE(check.err.find(largest + ": bytes "), std::string::npos) << check.err;
}

// A MANIFEST's version edits (LevelDB's db/version_edit.cc tags), each
// with where its record starts; the MANIFEST is one 32 KiB block here.
struct Edit {
  size_t start = 0;
  bool sets_log = false;
  std::vector<std::pair<uint64_t, uint64_t>> added;  // (level, table number)
  std::vector<uint64_t> deleted;
};
std::vector<Edit> Edits(const std::string& manifest) {
  std::vector<Edit> edits;
  for (size_t pos = 0; pos + 7 <= manifest.size() && pos < (32u << 10);) {
    const size_t length =
        static_cast<uint8_t>(manifest[pos + 4]) | (static_cast<uint8_t>(manifest[pos + 5]) << 8);
    const std::string r = manifest.substr(pos + 7, length);
    Edit e;
    e.start = pos;
    for (size_t i = 0; i < r.size();) {
      const uint64_t tag = Varint(r, &i);
      if (tag == 1) {
        i += Varint(r, &i);
      } else if (tag == 2 || tag == 3 || tag == 4 || tag == 9) {
        (void)Varint(r, &i);
        e.sets_log = e.sets_log || tag == 2;
      } else if (tag == 5) {
        (void)Varint(r, &i);
        i += Varint(r, &i);
      } else if (tag == 6) {
        (void)Varint(r, &i);
        e.deleted.push_back(Varint(r, &i));
      } else if (tag == 7) {
        const uint64_t level = Varint(r, &i), number = Varint(r, &i);
        (void)Varint(r, &i);
        i += Varint(r, &i);
        i += Varint(r, &i);
        e.added.emplace_back(level, number);
      } else {
        ADD_FAILURE() << "unknown edit tag " << tag;
        return edits;
      }
    }
    edits.push_back(std::move(e));
    pos += 7 + length;
  }
  return edits;
}

// A MANIFEST that lost its latest edit (cut at a record boundary, so it
// still parses) no longer lists the table a memtable flush added, and the
// log that table replaced is gone: the table alone holds those writes. The
// file pass must call that damage of the MANIFEST (an open would delete the
// table; `check` then leaves the directory alone and `repair` rebuilds the
// MANIFEST from every table). Before, it was an "unreferenced" left-over,
// `check` opened the store in place and LevelDB deleted it. Cut after its
// first record, a MANIFEST names no log or next file number and LevelDB
// cannot open it: damage too. LevelDB's own API makes the flushes here
// (the store has no call for one): writes, a flush, writes, a flush.
TEST_F(FileCheckTest, AManifestThatLostItsLatestEditsIsDamage) {
  ScratchDir dir{"lost-edit"};
  {
    leveldb::Options lo;
    lo.create_if_missing = true;
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(lo, dir.path(), &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    const leveldb::Slice past_every_key("~");
    for (const char* batch : {"first", "second"}) {
      for (int i = 0; i < 100; ++i) {
        ASSERT_TRUE(
            db->Put(leveldb::WriteOptions(), std::string(batch) + std::to_string(i), "v").ok());
      }
      // A manual compaction flushes the memtable first; of a range no
      // table holds, it compacts nothing.
      db->CompactRange(&past_every_key, &past_every_key);
    }
  }
  const std::vector<std::string> manifests = Manifests(dir.path());
  ASSERT_EQ(manifests.size(), 1u);
  const std::string manifest = dir.path() + "/" + manifests[0];
  const std::vector<Edit> edits = Edits(ReadFile(manifest));
  ASSERT_GE(edits.size(), 3u);
  const Edit& flush = edits.back();
  ASSERT_EQ(flush.added.size(), 1u);
  ASSERT_TRUE(flush.deleted.empty());
  char table[32];
  std::snprintf(table, sizeof(table), "%06llu.ldb",
                static_cast<unsigned long long>(flush.added[0].second));
  ASSERT_TRUE(fs::exists(dir.path() + "/" + table));
  FileCheckSummary summary;
  ASSERT_TRUE(Damages(dir.path(), &summary).empty());

  fs::resize_file(manifest, flush.start);
  std::vector<FileDamage> ds = Damages(dir.path(), &summary);
  ASSERT_EQ(ds.size(), 1u) << Describe(ds);
  EXPECT_EQ(ds[0].file, manifests[0]);
  EXPECT_NE(ds[0].message.find(std::string("does not list ") + table + ", which holds 100 writes"),
            std::string::npos)
      << ds[0].message;
  EXPECT_NE(ds[0].message.find("has lost its latest edits"), std::string::npos) << ds[0].message;

  fs::resize_file(manifest, edits.at(1).start);
  ds = Damages(dir.path(), &summary);
  ASSERT_FALSE(ds.empty());
  EXPECT_EQ(ds[0].file, manifests[0]);
  EXPECT_NE(ds[0].message.find("LevelDB cannot open it"), std::string::npos) << ds[0].message;
}

// A log cut inside its last record reads as an append a crash cut short:
// not a problem (exit 0), but check says on stderr that it cannot tell that
// from bytes lost from the log's end.
TEST_F(FileCheckTest, ALogEndingInsideARecordIsNamedNotAProblem) {
  Reset();
  std::string log;
  for (const std::string& name : FilesEndingIn(dir_.path(), ".log")) {
    if (fs::file_size(dir_.path() + "/" + name) > 100) log = dir_.path() + "/" + name;
  }
  ASSERT_FALSE(log.empty()) << "the pristine store has an unflushed log tail";
  fs::resize_file(log, fs::file_size(log) - 3);
  TempDir tmp;
  const CliResult check =
      RunCli(EVENTFOLD_CLI, {"check", "--data", dir_.path()}, tmp.path() + "/c");
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("\"torn_tails\":1"), std::string::npos) << check.out;
  EXPECT_NE(check.err.find("1 write-ahead log(s) end inside a record"), std::string::npos)
      << check.err;
  EXPECT_NE(check.err.find("cannot tell apart"), std::string::npos) << check.err;
}

TEST_F(FileCheckTest, CheckRefusesAStoreInUse) {
  Reset();
  Result<std::unique_ptr<Store>> store = Store::Open(dir_.path(), SmallTables());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<FileCheckSummary> r = CheckStoreFiles(dir_.path(), Options(), [](const FileDamage&) {});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsBusy()) << r.status().ToString();
}

}  // namespace
}  // namespace eventfold::reliability
