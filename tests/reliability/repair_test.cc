// Repair (RepairStore, `eventfold repair`): events lost with their dedup entry
// surviving are listed by id and a resend is accepted; a lost dedup entry is
// restored from its event; feed gaps are filled; the repaired store checks
// clean; a repair stopped halfway is resumed from its journal, whose
// grammar reads back what was written. (Byte flips in every kind of file
// followed by repair are in file_check_test.cc.)

#include "eventfold/repair.h"

#include <gtest/gtest.h>
#include <leveldb/db.h>
#include <leveldb/env.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "eventfold/store.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
#include "store/repair_journal.h"
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

using test_util::ScratchDir;

class RepairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::HistoryOptions ho;
    ho.seed = test_util::TestSeed("RepairTest", 1314);
    ho.receipts = 80;
    ho.products = 20;
    history_ = sim::GenerateHistory(ho);
    Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (const Delivery& d : history_.deliveries) {
      const IngestResult r = (*s)->Ingest(d);
      if (r.outcome == Outcome::kAccepted) accepted_.push_back(d);
    }
    ASSERT_GT(accepted_.size(), 100u);
  }
  static Options Buffered() {
    Options o;
    o.durability = Durability::kBuffered;
    return o;
  }
  // Runs fn on the raw LevelDB of the closed store.
  void Raw(const std::function<void(leveldb::DB*)>& fn) {
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(leveldb::Options(), dir_.path(), &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    fn(db.get());
  }
  // Deletes the event record a/<seq> of the closed store, its dedup entry
  // kept; returns its event id ("" when it could not).
  std::string LoseEventRecord(uint64_t seq) {
    std::string event_id;
    Raw([&](leveldb::DB* db) {
      std::string value;
      ASSERT_TRUE(db->Get(leveldb::ReadOptions(), storage::EventKey(seq), &value).ok());
      Result<storage::StoredEvent> e = storage::DecodeStoredEvent(storage::EventKey(seq), value);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), storage::EventKey(seq)).ok());
      event_id = e->event.event_id;
    });
    return event_id;
  }
  std::vector<LostData> Repair(RepairSummary* summary) {
    std::vector<LostData> lost;
    Result<RepairSummary> r =
        RepairStore(dir_.path(), Options(), [&](const LostData& l) { lost.push_back(l); });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) *summary = *r;
    return lost;
  }
  // The feed's last seq (more than 20), with the checkpoint of
  // `subscription` set to it when one is named.
  uint64_t LastChange(const std::string& subscription) {
    Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return 0;
    const uint64_t last = (*s)->feed().LastSeq();
    EXPECT_GT(last, 20u);
    if (!subscription.empty()) {
      EXPECT_TRUE((*s)->feed().SetCheckpoint(subscription, last).ok());
    }
    return last;
  }
  IngestResult Resend(const Delivery& d) {
    Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return (*s)->Ingest(d);
  }

  ScratchDir dir_{"repair"};
  sim::History history_;
  std::vector<Delivery> accepted_;  // each event's first, accepted delivery
};

// The event record a/<seq> lost, its dedup entry kept: the event is listed
// by id, its dedup entry goes, and the sender's resend is accepted again.
TEST_F(RepairTest, LostEventIsListedByIdAndItsResendAccepted) {
  const uint64_t seq = 7;
  const std::string event_id = LoseEventRecord(seq);
  ASSERT_FALSE(event_id.empty());
  RepairSummary s;
  const std::vector<LostData> lost = Repair(&s);
  EXPECT_EQ(s.problems_left, 0u);
  EXPECT_EQ(s.lost_events, 1u);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].kind, LostData::Kind::kEvent);
  EXPECT_EQ(lost[0].event_id, event_id);
  EXPECT_FALSE(lost[0].type.empty());
  const Delivery& original = accepted_.at(seq - 1);
  EXPECT_EQ(Resend(original).outcome, Outcome::kAccepted);
}

// Fails every new file once armed. Armed when the repair reports its loss,
// it stops the repair after the salvage has dropped what the loss names
// (the rebuild's open needs a new log file), as a kill there would.
class FailNewFilesEnv : public leveldb::EnvWrapper {
 public:
  FailNewFilesEnv() : leveldb::EnvWrapper(leveldb::Env::Default()) {}
  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override {
    if (armed) return leveldb::Status::IOError(f, "injected: the repair stops here");
    return target()->NewWritableFile(f, r);
  }
  std::atomic<bool> armed{false};
};

// A repair that stopped after deleting a lost event's dedup entry leaves
// nothing in the store that names the event; its journal does, and the
// next repair lists the event again, once. A third lists nothing.
TEST_F(RepairTest, ARepairStoppedHalfwayIsResumedFromItsJournal) {
  const std::string event_id = LoseEventRecord(7);
  ASSERT_FALSE(event_id.empty());
  FailNewFilesEnv env;
  Options stopping;
  stopping.env = &env;
  std::vector<LostData> first;
  Result<RepairSummary> stopped = RepairStore(dir_.path(), stopping, [&](const LostData& l) {
    first.push_back(l);
    env.armed = true;
  });
  ASSERT_FALSE(stopped.ok()) << "the injected failure stops it";
  EXPECT_NE(stopped.status().message().find("injected"), std::string::npos)
      << stopped.status().ToString();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].event_id, event_id);
  Raw([&](leveldb::DB* db) {
    std::string value;
    EXPECT_TRUE(db->Get(leveldb::ReadOptions(), storage::DedupKey(event_id), &value).IsNotFound())
        << "the stopped repair had deleted the dedup entry: the store no longer names the event";
  });
  // `check` says the repair did not finish, and what finishes it.
  Result<FileCheckSummary> files =
      CheckStoreFiles(dir_.path(), Options(), [](const FileDamage&) {});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(files->unfinished_repairs.size(), 1u);
  test_util::TempDir tmp;
  const test_util::CliResult check =
      test_util::RunCli(EVENTFOLD_CLI, {"check", "--data", dir_.path()}, tmp.path() + "/c");
  EXPECT_EQ(check.exit_code, 1) << check.err << check.out;
  EXPECT_NE(check.err.find("did not finish"), std::string::npos) << check.err;
  EXPECT_NE(check.err.find("`eventfold repair --data " + dir_.path() + "`"), std::string::npos)
      << check.err;
  EXPECT_NE(check.out.find("\"unfinished_repairs\":1"), std::string::npos) << check.out;

  RepairSummary resumed;
  const std::vector<LostData> second = Repair(&resumed);
  EXPECT_EQ(resumed.problems_left, 0u);
  EXPECT_EQ(resumed.resumed, 1u);
  ASSERT_EQ(second.size(), 1u) << "listed again from the journal, and once";
  EXPECT_EQ(resumed.lost_events, 1u) << "and counted in the summary";
  EXPECT_EQ(second[0].kind, LostData::Kind::kEvent);
  EXPECT_EQ(second[0].event_id, event_id);
  EXPECT_EQ(second[0].type, first[0].type);
  EXPECT_EQ(second[0].detail, first[0].detail);
  const std::string journal = test_util::ReadFile(resumed.journal);
  EXPECT_NE(journal.find("\"event_id\":\"" + event_id + "\""), std::string::npos) << journal;
  EXPECT_NE(journal.find("{\"end\":{\"problems_left\":0}}\n"), std::string::npos) << journal;
  EXPECT_EQ(resumed.journal.rfind(dir_.path() + "/lost/repair-", 0), 0u) << resumed.journal;

  files = CheckStoreFiles(dir_.path(), Options(), [](const FileDamage&) {});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_TRUE(files->unfinished_repairs.empty()) << "both journals are finished";
  RepairSummary third_summary;
  EXPECT_TRUE(Repair(&third_summary).empty()) << "the resumed journal was taken over";
  EXPECT_NE(third_summary.journal, resumed.journal);
  EXPECT_EQ(third_summary.resumed, 0u);
}

// The journal's grammar reads back what was written, raw key bytes and
// every field included; a line a kill cut short is skipped, the lines
// before it kept; a journal a later repair took over is no longer
// unfinished.
TEST(RepairJournalTest, AnUnfinishedJournalReadsBackUpToALineCutShort) {
  test_util::TempDir dir("journal");
  leveldb::Env* env = leveldb::Env::Default();
  FileDamage d;
  d.file = "000007.ldb";
  d.offset = 4096;
  d.end = 8192;
  d.after_key = "a/\\x00\\x07";
  d.before_key = "a/\\x00\\x09";
  d.after_raw = std::string("a/\0\x07\xff", 5);
  d.before_raw = std::string("a/\0\x09\x80", 5);
  d.message = "data block: Corruption: \"block checksum mismatch\"";
  LostData l;
  l.kind = LostData::Kind::kWindow;
  l.event_id = "evt_\u00e9";
  l.type = "receipt.issued";
  l.occurred_at = -5;
  l.received_from = 1795000000000000;
  l.received_to = 1795000000999999;
  l.first_seq = 7;
  l.last_seq = 9;
  l.detail = "line one\nline two";
  std::string first_name;
  {
    Result<std::unique_ptr<RepairJournal>> j = RepairJournal::Create(env, dir.path(), 1795000000);
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    (*j)->AddDamage(d);
    EXPECT_TRUE((*j)->AddLost(l));
    EXPECT_FALSE((*j)->AddLost(l)) << "the same loss twice";
    ASSERT_TRUE((*j)->Sync().ok());
    first_name = std::filesystem::path((*j)->path()).filename().string();
  }  // a repair that stopped: no end line
  std::string cut = test_util::ReadFile(dir.path() + "/lost/" + first_name);
  test_util::WriteFile(dir.path() + "/lost/" + first_name,
                       cut + R"({"lost":{"kind":"event","event_id":"evt_cut)");

  Result<UnfinishedRepairs> u = RepairJournal::Unfinished(env, dir.path());
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->journals, std::vector<std::string>{first_name});
  ASSERT_EQ(u->damage.size(), 1u);
  const auto damage_fields = [](const FileDamage& x) {
    return std::tie(x.file, x.offset, x.end, x.after_key, x.before_key, x.after_raw, x.before_raw,
                    x.message);
  };
  EXPECT_EQ(damage_fields(u->damage[0]), damage_fields(d));
  ASSERT_EQ(u->lost.size(), 1u) << "the line cut short is skipped";
  const auto lost_fields = [](const LostData& x) {
    return std::tie(x.kind, x.event_id, x.type, x.occurred_at, x.received_from, x.received_to,
                    x.first_seq, x.last_seq, x.detail);
  };
  EXPECT_EQ(lost_fields(u->lost[0]), lost_fields(l));

  // A later repair, in the same microsecond, finishes and takes it over.
  Result<std::unique_ptr<RepairJournal>> later = RepairJournal::Create(env, dir.path(), 1795000000);
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_NE(std::filesystem::path((*later)->path()).filename().string(), first_name);
  ASSERT_TRUE((*later)->Finish(0, u->journals).ok());
  u = RepairJournal::Unfinished(env, dir.path());
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_TRUE(u->journals.empty());
}

// A lost dedup entry comes back from its event: a resend stays a duplicate.
TEST_F(RepairTest, LostDedupEntryIsRestoredFromItsEvent) {
  std::string event_id;
  Raw([&](leveldb::DB* db) {
    std::string value;
    ASSERT_TRUE(db->Get(leveldb::ReadOptions(), storage::EventKey(3), &value).ok());
    event_id = storage::DecodeStoredEvent(storage::EventKey(3), value)->event.event_id;
    ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), storage::DedupKey(event_id)).ok());
  });
  RepairSummary s;
  const std::vector<LostData> lost = Repair(&s);
  EXPECT_TRUE(lost.empty());
  EXPECT_EQ(s.dedup_restored, 1u);
  EXPECT_EQ(s.problems_left, 0u);
  EXPECT_EQ(Resend(accepted_.at(2)).outcome, Outcome::kDuplicate);
}

// Lost change feed records become placeholders; the feed has no gap.
TEST_F(RepairTest, FeedGapIsFilledAndListed) {
  Raw([&](leveldb::DB* db) {
    for (uint64_t seq : {5, 6, 9}) {
      ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), storage::FeedKey(seq)).ok());
    }
  });
  RepairSummary s;
  const std::vector<LostData> lost = Repair(&s);
  EXPECT_EQ(s.feed_filled, 3u);
  EXPECT_EQ(s.problems_left, 0u);
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].kind, LostData::Kind::kChanges);
  EXPECT_EQ(lost[0].first_seq, 5u);
  EXPECT_EQ(lost[0].last_seq, 6u);
  EXPECT_EQ(lost[1].first_seq, 9u);
}

// A change whose key the damage rewrote into a seq far past the feed
// (LevelDB's repairer reads a damaged log without its checksums) is not a
// gap of trillions of lost changes to fill: the record goes, listed with
// what it said, and the feed goes on from the last real change.
TEST_F(RepairTest, AChangeFarPastTheFeedIsADamagedKeyNotAGapToFill) {
  const uint64_t last = LastChange("");
  const uint64_t garbled = 99344109406766;  // the seq such a key once read as
  Raw([&](leveldb::DB* db) {
    std::string value;
    ASSERT_TRUE(db->Get(leveldb::ReadOptions(), storage::FeedKey(last - 3), &value).ok());
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), storage::FeedKey(garbled), value).ok());
  });
  RepairSummary summary;
  const std::vector<LostData> lost = Repair(&summary);
  EXPECT_EQ(summary.feed_filled, 0u);
  EXPECT_EQ(summary.problems_left, 0u);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].kind, LostData::Kind::kRecords);
  EXPECT_NE(lost[0].detail.find("taken as damaged"), std::string::npos) << lost[0].detail;
  EXPECT_NE(lost[0].detail.find("seq " + std::to_string(last)), std::string::npos)
      << lost[0].detail;
  Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->feed().LastSeq(), last);
}

// The oldest changes lost leave no gap between records either, but a feed
// is trimmed only below its lowest subscription checkpoint (and not at all
// without one): what is missing above that was lost, and is filled.
TEST_F(RepairTest, LostFeedHeadIsFilledDownToTheLowestCheckpoint) {
  for (const std::optional<uint64_t> checkpoint :
       {std::optional<uint64_t>(), std::optional<uint64_t>(3)}) {
    SCOPED_TRACE(checkpoint ? "a checkpoint at 3" : "no subscription");
    ScratchDir dir("repair-head");
    {
      Result<std::unique_ptr<Store>> s = Store::Open(dir.path(), Buffered());
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      for (size_t i = 0; i < 20; ++i) (void)(*s)->Ingest(accepted_[i]);
      if (checkpoint) {
        ASSERT_TRUE((*s)->feed().SetCheckpoint("mailer", *checkpoint).ok());
      }
    }
    {
      leveldb::DB* raw = nullptr;
      ASSERT_TRUE(leveldb::DB::Open(leveldb::Options(), dir.path(), &raw).ok());
      std::unique_ptr<leveldb::DB> db(raw);
      for (uint64_t seq = 1; seq <= 5; ++seq) {
        ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), storage::FeedKey(seq)).ok());
      }
    }
    std::vector<LostData> lost;
    Result<RepairSummary> r =
        RepairStore(dir.path(), Options(), [&](const LostData& l) { lost.push_back(l); });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const uint64_t first = checkpoint ? *checkpoint + 1 : 1;
    EXPECT_EQ(r->feed_filled, 5 - first + 1);
    ASSERT_FALSE(lost.empty());
    EXPECT_EQ(lost[0].kind, LostData::Kind::kChanges);
    EXPECT_EQ(lost[0].first_seq, first);
    EXPECT_EQ(lost[0].last_seq, 5u);
  }
}

// Lost metadata is restored and listed: a missing profile (the store then
// runs under the configured or built-in one, so the operator is told how
// to give it back), and a value that no longer verifies, as Open would
// refuse it.
TEST_F(RepairTest, LostMetadataIsListed) {
  Raw([&](leveldb::DB* db) {
    std::string value;
    ASSERT_TRUE(db->Get(leveldb::ReadOptions(), storage::MetaKey("routing_epoch"), &value).ok());
    value.back() ^= 0x5a;  // its checksum no longer matches
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), storage::MetaKey("routing_epoch"), value).ok());
  });
  RepairSummary summary;
  std::vector<LostData> lost = Repair(&summary);
  EXPECT_EQ(summary.problems_left, 0u);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].detail, "m/routing_epoch was lost; set to \"1\"");

  Raw([&](leveldb::DB* db) {
    ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), storage::MetaKey("profile")).ok());
  });
  lost = Repair(&summary);
  EXPECT_EQ(summary.problems_left, 0u);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_NE(lost[0].detail.find("m/profile was lost"), std::string::npos) << lost[0].detail;
  EXPECT_NE(lost[0].detail.find("eventfold replay --profile FILE"), std::string::npos);
}

// A key under no family a store writes is damage (a key the repairer read
// from a damaged log): it goes, listed, and the store checks clean.
TEST_F(RepairTest, AKeyOfNoFamilyIsDroppedAndListed) {
  Raw([&](leveldb::DB* db) {
    ASSERT_TRUE(db->Put(leveldb::WriteOptions(), ">u?vt_0000070/g/\x01/l/receipt", "x").ok());
  });
  RepairSummary summary;
  const std::vector<LostData> lost = Repair(&summary);
  EXPECT_EQ(summary.problems_left, 0u);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].kind, LostData::Kind::kRecords);
  EXPECT_NE(lost[0].detail.find("no family"), std::string::npos) << lost[0].detail;
  Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Result<CheckSummary> check = (*s)->maintenance().Check(
      [](const CheckProblem& p) { ADD_FAILURE() << p.key << ": " << p.message; });
  ASSERT_TRUE(check.ok()) << check.status().ToString();
}

// The newest changes lost leave no gap to see, but a subscription read up
// to its checkpoint: the feed goes on past it with placeholders, so no seq
// is ever given out twice.
TEST_F(RepairTest, LostFeedTailIsFilledPastTheHighestCheckpoint) {
  const uint64_t last = LastChange("mailer");
  Raw([&](leveldb::DB* db) {
    for (uint64_t seq = last - 9; seq <= last; ++seq) {
      ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), storage::FeedKey(seq)).ok());
    }
  });
  RepairSummary summary;
  const std::vector<LostData> lost = Repair(&summary);
  EXPECT_EQ(summary.feed_filled, 10u);
  EXPECT_EQ(summary.problems_left, 0u);
  ASSERT_FALSE(lost.empty());
  EXPECT_EQ(lost[0].kind, LostData::Kind::kChanges);
  EXPECT_EQ(lost[0].first_seq, last - 9);
  EXPECT_EQ(lost[0].last_seq, last);
  Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->feed().LastSeq(), last);
  ASSERT_EQ((*s)->Ingest(history_.deliveries.front()).outcome, Outcome::kDuplicate);
  sim::HistoryOptions ho;
  ho.seed = 99;
  ho.receipts = 1;
  ho.products = 0;
  for (const Delivery& d : sim::GenerateHistory(ho).deliveries) {
    if ((*s)->Ingest(d).outcome == Outcome::kAccepted) break;
  }
  EXPECT_GT((*s)->feed().LastSeq(), last) << "a new change takes a seq never given before";
}

// A table the MANIFEST lists but the directory lacks is damage the file
// check names (with its key range), not something the repair meets only
// when it fails to move it aside: the repair reports what it held.
TEST_F(RepairTest, AMissingTableIsReportedAndRepaired) {
  {
    Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->maintenance().Compact().ok());
  }
  const std::vector<std::string> tables = FilesEndingIn(dir_.path(), ".ldb");
  ASSERT_FALSE(tables.empty());
  std::filesystem::remove(dir_.path() + "/" + tables.back());
  const std::vector<FileDamage> damage = Damages(dir_.path());
  ASSERT_EQ(damage.size(), 1u) << Describe(damage);
  EXPECT_EQ(damage[0].file, tables.back());
  EXPECT_NE(damage[0].message.find("missing"), std::string::npos) << damage[0].message;
  EXPECT_FALSE(damage[0].after_key.empty() && damage[0].before_key.empty());
  RepairSummary summary;
  const std::vector<LostData> lost = Repair(&summary);
  EXPECT_EQ(summary.damaged, 1u);
  EXPECT_FALSE(lost.empty()) << "what the table held is listed";
  EXPECT_EQ(summary.problems_left, 0u);
}

// A store that lost its CURRENT file is refused by Open, even one that may
// create a store, and nothing in it changes: LevelDB would take the
// directory for a new database and delete every table. The repair then
// salvages it whole.
TEST_F(RepairTest, AStoreWithoutItsCurrentFileIsRefusedAndRepairedWhole) {
  {
    Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->maintenance().Compact().ok());
  }
  ASSERT_FALSE(FilesEndingIn(dir_.path(), ".ldb").empty());
  ASSERT_TRUE(std::filesystem::remove(dir_.path() + "/CURRENT"));
  auto files = [&] {
    std::map<std::string, uintmax_t> sizes;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
      if (e.is_regular_file()) sizes[e.path().filename().string()] = e.file_size();
    }
    return sizes;
  };
  const std::map<std::string, uintmax_t> before = files();
  Options create = Buffered();
  create.create_if_missing = true;
  Result<std::unique_ptr<Store>> refused = Store::Open(dir_.path(), create);
  ASSERT_FALSE(refused.ok()) << "opened as a new store";
  EXPECT_EQ(refused.status().code(), Status::Code::kCorruption) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("no CURRENT file"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("eventfold repair --data " + dir_.path()),
            std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(files(), before) << "the refused open changed the store's files";

  RepairSummary summary;
  (void)Repair(&summary);  // without a MANIFEST it cannot rule out a loss, and says so
  EXPECT_EQ(summary.problems_left, 0u);
  Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (const Delivery& d : accepted_) {
    EXPECT_EQ((*s)->Ingest(d).outcome, Outcome::kDuplicate) << "lost: " << d.body;
  }
}

// The same for the quarantine's own database, which every store open may
// create: without its CURRENT file the quarantine stays closed and its files
// as they were, while the store opens and stores; the repair brings every
// refused delivery back.
TEST_F(RepairTest, AQuarantineWithoutItsCurrentFileIsKeptForTheRepair) {
  auto refused = [](int i) {
    RefusedDelivery r;
    r.outcome = Outcome::kUnauthorized;
    r.reason = "X-RR-Signature: missing";
    r.headers = {{"X-RR-Event-Id", "evt_refused_" + std::to_string(i)}};
    r.body_prefix = "{}";
    return r;
  };
  auto held = [](Store* s) {
    std::vector<std::string> ids;
    Status st = s->quarantine().List([&](const RefusedDelivery& r) {
      ids.push_back(r.headers.empty() ? "" : r.headers[0].second);
      return true;
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return ids;
  };
  std::vector<std::string> want;  // the history's refusals, then three more
  {
    Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*s)->quarantine().Add(refused(i)).ok());
    want = held(s->get());
    ASSERT_GE(want.size(), 3u);
    ASSERT_EQ(want.back(), "evt_refused_2");
  }
  const std::string qdir = dir_.path() + "/quarantine";
  ASSERT_TRUE(std::filesystem::remove(qdir + "/CURRENT"));
  auto files = [&] {
    std::map<std::string, uintmax_t> sizes;
    for (const auto& e : std::filesystem::directory_iterator(qdir)) {
      if (e.is_regular_file()) sizes[e.path().filename().string()] = e.file_size();
    }
    return sizes;
  };
  const std::map<std::string, uintmax_t> before = files();
  {
    Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_TRUE(
        (*s)->quarantine().List([](const RefusedDelivery&) { return true; }).IsUnavailable())
        << "the quarantine opened as a new one";
    const std::string closed = (*s)->Stats().quarantine_closed;
    EXPECT_NE(closed.find("CURRENT"), std::string::npos) << "Stats says why: " << closed;
    std::vector<std::string> problems;
    Result<CheckSummary> check = (*s)->maintenance().Check(
        [&](const CheckProblem& p) { problems.push_back(p.key + ": " + p.message); });
    ASSERT_TRUE(check.ok()) << check.status().ToString();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("not open"), std::string::npos) << problems[0];
    EXPECT_EQ((*s)->Ingest(accepted_.front()).outcome, Outcome::kDuplicate);
  }
  EXPECT_EQ(files(), before) << "the store's open changed the quarantine's files";

  RepairSummary summary;
  (void)Repair(&summary);
  EXPECT_EQ(summary.problems_left, 0u);
  Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(held(s->get()), want);
  EXPECT_EQ((*s)->Stats().quarantine_closed, "");
}

// Only LevelDB's own data files make a directory without CURRENT a damaged
// store: an application's "notes.log" beside nothing else is a place to
// create one.
TEST(StoreOpen, AnotherProgramsLogFileIsNoDamagedStore) {
  test_util::ScratchDir dir("open-beside-log");
  test_util::WriteFile(dir.path() + "/notes.log", "not LevelDB's\n");
  Options create;
  create.create_if_missing = true;
  Result<std::unique_ptr<Store>> s = Store::Open(dir.path(), create);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->Ingest(std::string_view(R"({"event_id":"evt_1","type":"receipt.issued",)"
                                          R"("occurred_at":"2026-11-01T10:00:00Z",)"
                                          R"("data":{"receipt_id":"rcp_1","amount":1}})"))
                .outcome,
            Outcome::kAccepted);
}

// A damaged write-ahead log record: which events it held is unknown, so the
// repair lists a received-at window for the sender to resend from (the
// newest surviving event's arrival onward), and the store ends clean.
TEST_F(RepairTest, DamagedLogRecordIsListedAsAResendWindow) {
  // When each event arrived, read from a copy (an open would turn the log
  // to damage into a table).
  std::map<std::string, int64_t> received;
  {
    ScratchDir copy("repair-copy");
    std::filesystem::copy(dir_.path(), copy.path(), std::filesystem::copy_options::recursive);
    leveldb::DB* raw = nullptr;
    ASSERT_TRUE(leveldb::DB::Open(leveldb::Options(), copy.path(), &raw).ok());
    std::unique_ptr<leveldb::DB> db(raw);
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    const std::string a(storage::kEventPrefix);
    for (it->Seek(a); it->Valid() && it->key().starts_with(a); it->Next()) {
      const std::string key = it->key().ToString(), value = it->value().ToString();
      Result<storage::StoredEvent> e = storage::DecodeStoredEvent(key, value);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      received[e->event.event_id] = e->received_at;
    }
  }
  const std::vector<std::string> logs = FilesEndingIn(dir_.path(), ".log");
  ASSERT_FALSE(logs.empty()) << "the closed store keeps its writes in its log";
  const std::string log = dir_.path() + "/" + logs.back();
  XorBytes(log, std::filesystem::file_size(log) / 2, std::string(4, '\x5a'));

  RepairSummary sum;
  const std::vector<LostData> lost = Repair(&sum);
  const auto window = std::find_if(lost.begin(), lost.end(), [](const LostData& l) {
    return l.kind == LostData::Kind::kWindow;
  });
  ASSERT_NE(window, lost.end()) << "no resend window listed";
  EXPECT_GT(window->received_from, 0) << window->detail;
  EXPECT_EQ(window->received_to, 0) << "open-ended: up to now";
  EXPECT_NE(window->detail.find(logs.back() + ": damaged write-ahead log record"),
            std::string::npos)
      << window->detail;
  EXPECT_EQ(sum.problems_left, 0u);
  // Every event the repair lost (its resend is stored anew) arrived in the
  // window: LevelDB's repairer keeps records after a damaged one, so the
  // window starts at the damage, not after the newest event that survived.
  Result<std::unique_ptr<Store>> s = Store::Open(dir_.path(), Buffered());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  int resent = 0;
  for (const Delivery& d : accepted_) {
    const IngestResult r = (*s)->Ingest(d);
    if (r.outcome != Outcome::kAccepted) continue;
    ++resent;
    ASSERT_TRUE(received.count(r.event_id)) << r.event_id;
    EXPECT_GE(received[r.event_id], window->received_from)
        << r.event_id << " was lost before the window " << window->detail;
  }
  EXPECT_GT(resent, 0) << "the damage lost no event: the test damaged nothing";
}

TEST_F(RepairTest, CommandListsWhatWasLost) {
  Raw([&](leveldb::DB* db) {
    ASSERT_TRUE(db->Delete(leveldb::WriteOptions(), storage::EventKey(11)).ok());
  });
  test_util::TempDir tmp;
  const test_util::CliResult c =
      test_util::RunCli(EVENTFOLD_CLI, {"repair", "--data", dir_.path()}, tmp.path() + "/r");
  std::printf("eventfold repair, exit %d:\n%s%s", c.exit_code, c.out.c_str(), c.err.c_str());
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("resend event "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("\"problems_left\":0"), std::string::npos) << c.out;
  const size_t named = c.out.find("\"journal\":\"" + dir_.path() + "/lost/repair-");
  ASSERT_NE(named, std::string::npos) << c.out;
  const size_t start = c.out.find(dir_.path(), named);
  const std::string journal = c.out.substr(start, c.out.find('"', start) - start);
  EXPECT_NE(test_util::ReadFile(journal).find("\"kind\":\"event\""), std::string::npos)
      << "the journal keeps the list the command printed";
  const test_util::CliResult check =
      test_util::RunCli(EVENTFOLD_CLI, {"check", "--data", dir_.path()}, tmp.path() + "/c");
  EXPECT_EQ(check.exit_code, 0) << check.err << check.out;
}

// The offline functions refuse a path that holds no store (an empty path
// would be the root directory to LevelDB): nothing is created or deleted.
TEST(StoreDirectories, RepairCheckDestroyAndOpenRefuseWhatIsNoStore) {
  ScratchDir dir("not-a-store");
  std::filesystem::create_directories(dir.path());
  test_util::WriteFile(dir.path() + "/doc.txt", "precious");
  test_util::WriteFile(dir.path() + "/app.log", "not LevelDB's");
  Result<RepairSummary> repaired = RepairStore(dir.path(), Options(), [](const LostData&) {});
  EXPECT_TRUE(repaired.status().IsNotFound()) << repaired.status().ToString();
  EXPECT_TRUE(DestroyStore(dir.path(), Options()).IsInvalidArgument());
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"app.log", "doc.txt"}));
  EXPECT_EQ(test_util::ReadFile(dir.path() + "/doc.txt"), "precious");

  EXPECT_TRUE(RepairStore("", Options(), [](const LostData&) {}).status().IsInvalidArgument());
  EXPECT_TRUE(CheckStoreFiles("", Options(), {}).status().IsInvalidArgument());
  EXPECT_TRUE(DestroyStore("", Options()).IsInvalidArgument());
  EXPECT_TRUE(Store::Open("", Options()).status().IsInvalidArgument());
  EXPECT_TRUE(DestroyStore(dir.path() + "/absent", Options()).ok());
  // A path it cannot list (here a file) is no "nothing there": an error,
  // and the file stays.
  const Status file = DestroyStore(dir.path() + "/doc.txt", Options());
  EXPECT_TRUE(file.IsIOError()) << file.ToString();
  EXPECT_EQ(test_util::ReadFile(dir.path() + "/doc.txt"), "precious");
}

// DestroyStore deletes a store's own files, its quarantine included, and
// nothing else; while the store is open it deletes nothing.
TEST(StoreDirectories, DestroyDeletesOnlyTheStoresFilesAndNeverAnOpenStore) {
  ScratchDir with_notes("destroy-notes"), bare("destroy-bare");
  const auto fill = [](const std::string& path) {
    Result<std::unique_ptr<Store>> s = Store::Open(path, Options());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return std::unique_ptr<Store>();
    sim::HistoryOptions ho;
    ho.receipts = 5;
    ho.products = 2;
    for (const Delivery& d : sim::GenerateHistory(ho).deliveries) (void)(*s)->Ingest(d);
    EXPECT_EQ((*s)->Ingest("{not json").outcome, Outcome::kInvalid);  // quarantined
    return std::move(*s);
  };
  std::unique_ptr<Store> open = fill(with_notes.path());
  ASSERT_TRUE(open);
  test_util::WriteFile(with_notes.path() + "/notes.txt", "mine");
  const Status busy = DestroyStore(with_notes.path(), Options());
  EXPECT_TRUE(busy.IsBusy()) << busy.ToString();
  EXPECT_EQ(open->Ingest("{\"also\": \"not an event\"}").outcome, Outcome::kInvalid);
  size_t projections = 0;
  ASSERT_TRUE(open->List("", [&](const Projection&) { return ++projections > 0; }).ok());
  EXPECT_GT(projections, 0u) << "the open store lost nothing";
  open.reset();
  ASSERT_TRUE(DestroyStore(with_notes.path(), Options()).ok());
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(with_notes.path())) {
    left.push_back(e.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(test_util::ReadFile(with_notes.path() + "/notes.txt"), "mine");

  ASSERT_TRUE(fill(bare.path()));
  ASSERT_TRUE(DestroyStore(bare.path(), Options()).ok());
  EXPECT_FALSE(std::filesystem::exists(bare.path()))
      << "nothing else was there: the directory goes";
}

}  // namespace
}  // namespace eventfold::reliability
