// The integrity check (Store::Check, `eventfold check`): a clean store
// passes; damage made with raw LevelDB after closing the store — a flipped
// byte in any family's value, a deleted log entry, a tampered projection, an
// event stored twice, a dedup entry without its event, a feed gap, a stray
// generation, an unknown key — is reported naming the key, and the command
// exits 1.

#include "replay/check.h"

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "eventfold/store.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "tests/reliability/reliability_util.h"
#include "tests/storage/storage_test_util.h"
#include "tools/history.h"

#ifndef EVENTFOLD_CLI
#error "EVENTFOLD_CLI must name the eventfold binary"
#endif

namespace eventfold::reliability {
namespace {

using storage_test::ScratchDir;

// A store with every family in it: events (some late, so snapshots get
// replaced), duplicates, conflicts, refused deliveries, fold snapshots
// (interval 2), the change feed.
void Populate(const std::string& dir, uint64_t seed) {
  sim::HistoryOptions ho;
  ho.seed = seed;
  ho.receipts = 60;
  ho.products = 15;
  ho.malformed = 3;
  ho.conflicts = 2;
  const sim::History h = sim::GenerateHistory(ho);
  Options o;
  o.durability = Durability::kBuffered;
  o.snapshot_interval = 2;
  Result<std::unique_ptr<Store>> store = Store::Open(dir, o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (const Delivery& d : h.deliveries) (void)(*store)->Ingest(d);
  const Counters c = (*store)->counters();
  ASSERT_GT(c.accepted, 100u);
  ASSERT_GT(c.conflict, 0u);
  ASSERT_GT(c.late, 0u);
}

std::unique_ptr<Store> OpenStore(const std::string& dir) {
  Options o;
  o.create_if_missing = false;
  o.snapshot_interval = 2;
  Result<std::unique_ptr<Store>> store = Store::Open(dir, o);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

// Runs fn on the raw LevelDB of the closed store.
void Raw(const std::string& dir, const std::function<void(leveldb::DB*)>& fn) {
  leveldb::DB* raw = nullptr;
  leveldb::Status s = leveldb::DB::Open(leveldb::Options(), dir, &raw);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<leveldb::DB> db(raw);
  fn(db.get());
}

// The n-th key (from 0) starting with `prefix`.
std::string NthKey(leveldb::DB* db, const std::string& prefix, size_t n = 0) {
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (n-- == 0) return it->key().ToString();
  }
  ADD_FAILURE() << "no key " << n << " under " << storage::Printable(prefix);
  return "";
}

std::string Value(leveldb::DB* db, const std::string& key) {
  std::string v;
  EXPECT_TRUE(db->Get(leveldb::ReadOptions(), key, &v).ok()) << storage::Printable(key);
  return v;
}

std::vector<CheckProblem> Problems(Store* store, CheckSummary* summary = nullptr) {
  std::vector<CheckProblem> out;
  Result<CheckSummary> r =
      store->maintenance().Check([&](const CheckProblem& p) { out.push_back(p); });
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) {
    EXPECT_EQ(r->problems, out.size());
    if (summary) *summary = *r;
  }
  return out;
}

std::string Describe(const std::vector<CheckProblem>& problems) {
  std::string s;
  for (const CheckProblem& p : problems) s += "  " + p.key + ": " + p.message + "\n";
  return s;
}

bool Reported(const std::vector<CheckProblem>& problems, const std::string& key,
              const std::string& words) {
  for (const CheckProblem& p : problems) {
    if (p.key == storage::Printable(key) && p.message.find(words) != std::string::npos) return true;
  }
  return false;
}

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

CliResult RunCheckCli(const std::string& dir) {
  ScratchDir tmp;
  std::filesystem::create_directories(tmp.path());
  const std::string out = tmp.path() + "/out", err = tmp.path() + "/err";
  const std::string cmd =
      std::string(EVENTFOLD_CLI) + " check --data '" + dir + "' >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  CliResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = read(out);
  r.err = read(err);
  return r;
}

class CheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = storage_test::TestSeed(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                                   9100);
    Populate(dir_.path(), seed_);
  }
  ScratchDir dir_;
  uint64_t seed_ = 0;
};

TEST_F(CheckTest, CleanStorePasses) {
  {
    std::unique_ptr<Store> store = OpenStore(dir_.path());
    ASSERT_TRUE(store);
    CheckSummary s;
    const std::vector<CheckProblem> problems = Problems(store.get(), &s);
    EXPECT_TRUE(problems.empty()) << Describe(problems);
    EXPECT_GT(s.events, 100u);
    EXPECT_EQ(s.dedup, s.events);
    EXPECT_GT(s.conflicts, 0u);
    EXPECT_GT(s.refused, 0u);
    EXPECT_GE(s.log_entries, s.events - 5);
    EXPECT_GT(s.projections, 50u);
    EXPECT_GT(s.snapshots, 0u);
    EXPECT_EQ(s.first_change, 1u);
    EXPECT_EQ(s.last_change, store->feed().LastSeq());
    EXPECT_EQ(s.verified, s.projections);
    EXPECT_GT(s.records, s.events + s.dedup + s.log_entries);
    // A rebuild (a new generation, the old one dropped) stays clean.
    Result<RebuildSummary> r = store->maintenance().Rebuild(nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const std::vector<CheckProblem> after = Problems(store.get());
    EXPECT_TRUE(after.empty()) << Describe(after);
  }
  const CliResult cli = RunCheckCli(dir_.path());
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("\"ok\":true"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("\"problems\":0"), std::string::npos) << cli.out;
  EXPECT_TRUE(cli.err.empty()) << cli.err;
}

// A flipped byte in one value of each family: the masked CRC-32C catches it
// and the check names the key.
TEST_F(CheckTest, FlippedByteInAnyFamilyIsReportedWithItsKey) {
  const std::string gen = storage::GenerationPrefix(1);
  const std::vector<std::string> prefixes = {"a/", "d/",       "c/",       "q/",
                                             "f/", gen + "l/", gen + "p/", gen + "s/"};
  ScratchDir pristine;
  std::filesystem::copy(dir_.path(), pristine.path(), std::filesystem::copy_options::recursive);
  for (const std::string& prefix : prefixes) {
    SCOPED_TRACE("family " + storage::Printable(prefix));
    std::filesystem::remove_all(dir_.path());
    std::filesystem::copy(pristine.path(), dir_.path(), std::filesystem::copy_options::recursive);
    // Refused deliveries live in the quarantine's own database, and their
    // keys are reported as quarantine/<key>.
    const bool quarantine = prefix == "q/";
    std::string key;
    Raw(quarantine ? dir_.path() + "/quarantine" : dir_.path(), [&](leveldb::DB* db) {
      key = NthKey(db, prefix, 1);
      std::string value = Value(db, key);
      value[value.size() / 2] = static_cast<char>(value[value.size() / 2] ^ 0x10);
      ASSERT_TRUE(db->Put(leveldb::WriteOptions(), key, value).ok());
    });
    if (quarantine) key = "quarantine/" + key;
    {
      std::unique_ptr<Store> store = OpenStore(dir_.path());
      ASSERT_TRUE(store);
      const std::vector<CheckProblem> problems = Problems(store.get());
      EXPECT_TRUE(Reported(problems, key, "checksum mismatch")) << Describe(problems);
    }
    const CliResult cli = RunCheckCli(dir_.path());
    if (prefix == prefixes.front()) {
      std::printf("eventfold check, exit %d:\n%s%s", cli.exit_code, cli.err.c_str(),
                  cli.out.c_str());
    }
    EXPECT_EQ(cli.exit_code, 1) << cli.out << cli.err;
    EXPECT_NE(cli.err.find(storage::Printable(key) + ": record at key"), std::string::npos)
        << cli.err;
    EXPECT_NE(cli.err.find("checksum mismatch"), std::string::npos) << cli.err;
    EXPECT_NE(cli.out.find("\"ok\":false"), std::string::npos) << cli.out;
  }
}

TEST_F(CheckTest, DeletedLogEntryIsReported) {
  const std::string gen = storage::GenerationPrefix(1);
  std::string log_key, event_key, projection_key;
  Raw(dir_.path(), [&](leveldb::DB* db) {
    log_key = NthKey(db, gen + "l/", 3);
    Result<storage::LogEntry> e =
        storage::DecodeLog(log_key, Value(db, log_key), Profile::ReceiptRoller());
    ASSERT_TRUE(e.ok());
    event_key = storage::EventKey(e->seq);
    auto parsed = storage::ParseLogKey(log_key);
    ASSERT_TRUE(parsed);
    projection_key = storage::ProjectionKey(1, parsed->first);
    ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), log_key).ok());
  });
  std::unique_ptr<Store> store = OpenStore(dir_.path());
  ASSERT_TRUE(store);
  const std::vector<CheckProblem> problems = Problems(store.get());
  EXPECT_TRUE(Reported(problems, event_key, "missing from its log")) << Describe(problems);
  EXPECT_TRUE(Reported(problems, projection_key, "differs from the fold of its log"))
      << Describe(problems);
  store.reset();
  const CliResult cli = RunCheckCli(dir_.path());
  EXPECT_EQ(cli.exit_code, 1);
  // What check says mends it does: the logs derived anew.
  const std::string mend = "eventfold replay --rederive-logs --data " + dir_.path();
  ASSERT_NE(cli.err.find(mend), std::string::npos) << cli.err;
  const std::string cmd = std::string(EVENTFOLD_CLI) + " replay --rederive-logs --data '" +
                          dir_.path() + "' >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const CliResult after = RunCheckCli(dir_.path());
  EXPECT_EQ(after.exit_code, 0) << after.err << after.out;
}

TEST_F(CheckTest, TamperedProjectionIsReported) {
  const std::string gen = storage::GenerationPrefix(1);
  std::string key;
  Raw(dir_.path(), [&](leveldb::DB* db) {
    key = NthKey(db, gen + "p/", 2);
    Result<storage::ProjectionState> p = storage::DecodeProjection(key, Value(db, key));
    ASSERT_TRUE(p.ok());
    p->projection.state = p->projection.state == "tampered" ? "other" : "tampered";
    // A valid record (its checksum matches): only the re-fold can tell.
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), key, storage::EncodeProjection(*p)).ok());
  });
  std::unique_ptr<Store> store = OpenStore(dir_.path());
  ASSERT_TRUE(store);
  const std::vector<CheckProblem> problems = Problems(store.get());
  EXPECT_TRUE(Reported(problems, key, "differs from the fold of its log")) << Describe(problems);
  EXPECT_TRUE(Reported(problems, key, "differs from a rebuild")) << Describe(problems);
  store.reset();
  const CliResult cli = RunCheckCli(dir_.path());
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.err.find("tampered"), std::string::npos) << cli.err;
}

TEST_F(CheckTest, EventStoredTwiceIsReported) {
  std::string copy_key;
  Raw(dir_.path(), [&](leveldb::DB* db) {
    const std::string key = NthKey(db, "a/", 5);
    Result<storage::StoredEvent> e = storage::DecodeStoredEvent(key, Value(db, key));
    ASSERT_TRUE(e.ok());
    e->seq = 1u << 30;
    copy_key = storage::EventKey(e->seq);
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), copy_key, storage::EncodeEvent(*e)).ok());
  });
  std::unique_ptr<Store> store = OpenStore(dir_.path());
  ASSERT_TRUE(store);
  const std::vector<CheckProblem> problems = Problems(store.get());
  EXPECT_TRUE(Reported(problems, copy_key, "stored twice")) << Describe(problems);
}

TEST_F(CheckTest, DedupEntryWithoutItsEventIsReported) {
  std::string dedup_key;
  Raw(dir_.path(), [&](leveldb::DB* db) {
    dedup_key = NthKey(db, "d/", 7);
    Result<storage::DedupEntry> d = storage::DecodeDedup(dedup_key, Value(db, dedup_key));
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), storage::EventKey(d->seq)).ok());
  });
  std::unique_ptr<Store> store = OpenStore(dir_.path());
  ASSERT_TRUE(store);
  const std::vector<CheckProblem> problems = Problems(store.get());
  EXPECT_TRUE(Reported(problems, dedup_key, "does not exist")) << Describe(problems);
}

// Damage Store::Open would repair or refuse (a stray generation is dropped
// at Open) is checked with the library call on the raw database.
TEST_F(CheckTest, FeedGapStrayGenerationAndUnknownKeysAreReported) {
  std::string gap_key;
  const std::string stray = storage::GenerationPrefix(7) + "p/receipt" + std::string(1, '\0') + "x";
  ScratchDir scratch;
  Raw(dir_.path(), [&](leveldb::DB* db) {
    gap_key = NthKey(db, "f/", 4);
    ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), gap_key).ok());
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), stray, "junk").ok());
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), "z/what", "junk").ok());
    CheckOptions co;
    co.profile = &Profile::ReceiptRoller();
    co.live = storage::Generations{1, 1};
    co.scratch_path = scratch.path();
    std::vector<CheckProblem> problems;
    Result<CheckSummary> r =
        CheckStore(db, co, [&](const CheckProblem& p) { problems.push_back(p); });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->problems, problems.size());
    const uint64_t missing = *storage::ParseSeqKey(gap_key, storage::kFeedPrefix);
    EXPECT_TRUE(Reported(problems, storage::FeedKey(missing + 1), "change feed gap"))
        << Describe(problems);
    EXPECT_TRUE(Reported(problems, storage::GenerationPrefix(7), "beside the live generation"))
        << Describe(problems);
    EXPECT_TRUE(Reported(problems, "z/what", "unknown key family")) << Describe(problems);
    EXPECT_EQ(problems.size(), 3u) << Describe(problems);
  });
}

}  // namespace
}  // namespace eventfold::reliability
