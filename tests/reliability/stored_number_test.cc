// Numbers stored as text (m/retired_seq, k/<subscription> checkpoints) that a
// bad disk or a bug made larger than 64 bits: nothing throws, Open and
// GetCheckpoint answer a corruption status naming what is wrong, and Check
// reports the value as a problem.

#include <gtest/gtest.h>
#include <leveldb/db.h>

#include <memory>
#include <string>
#include <vector>

#include "eventfold/store.h"
#include "replay/check.h"
#include "storage/key_codec.h"
#include "tests/common/scratch_dir.h"

namespace eventfold::reliability {
namespace {

using test_util::ScratchDir;

constexpr char kTooBig[] = "99999999999999999999";  // 20 digits, > UINT64_MAX

void MakeStore(const std::string& dir) {
  Result<std::unique_ptr<Store>> store = Store::Open(dir, Options());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->feed().SetCheckpoint("mailer", 0).ok());
}

void PutRaw(const std::string& dir, const std::string& key, const std::string& value) {
  leveldb::DB* raw = nullptr;
  leveldb::Status s = leveldb::DB::Open(leveldb::Options(), dir, &raw);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<leveldb::DB> db(raw);
  ASSERT_TRUE(db->Put(leveldb::WriteOptions(), key, value).ok());
}

std::vector<CheckProblem> RawCheck(const std::string& dir) {
  leveldb::DB* raw = nullptr;
  leveldb::Status s = leveldb::DB::Open(leveldb::Options(), dir, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<leveldb::DB> db(raw);
  std::vector<CheckProblem> problems;
  CheckOptions o;
  o.profile = &Profile::ReceiptRoller();
  Result<CheckSummary> r =
      CheckStore(db.get(), o, [&](const CheckProblem& p) { problems.push_back(p); });
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return problems;
}

bool Reported(const std::vector<CheckProblem>& problems, const std::string& key) {
  for (const CheckProblem& p : problems) {
    if (p.key == PrintableKey(key)) return true;
  }
  return false;
}

TEST(StoredNumberTest, OversizedRetiredSeqFailsOpenWithoutThrowing) {
  ScratchDir dir;
  MakeStore(dir.path());
  PutRaw(dir.path(), storage::MetaKey("retired_seq"), kTooBig);
  Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), Options());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kCorruption) << store.status().ToString();
  EXPECT_NE(store.status().message().find("retired_seq"), std::string::npos)
      << store.status().ToString();
  EXPECT_TRUE(Reported(RawCheck(dir.path()), storage::MetaKey("retired_seq")));
}

TEST(StoredNumberTest, OversizedCheckpointIsReportedAndRefused) {
  ScratchDir dir;
  MakeStore(dir.path());
  PutRaw(dir.path(), storage::CheckpointKey("mailer"), kTooBig);
  Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), Options());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<CheckProblem> problems;
  Result<CheckSummary> r =
      (*store)->maintenance().Check([&](const CheckProblem& p) { problems.push_back(p); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(Reported(problems, storage::CheckpointKey("mailer")));
  Result<uint64_t> seq = (*store)->feed().GetCheckpoint("mailer");
  ASSERT_FALSE(seq.ok());
  EXPECT_EQ(seq.status().code(), Status::Code::kCorruption);
  EXPECT_NE(seq.status().message().find("mailer"), std::string::npos);
  size_t listed = 0;
  Status listing = (*store)->feed().ListSubscriptions([&](const std::string&, uint64_t) {
    ++listed;
    return true;
  });
  EXPECT_EQ(listing.code(), Status::Code::kCorruption);
  EXPECT_EQ(listed, 0u);
}

}  // namespace
}  // namespace eventfold::reliability
