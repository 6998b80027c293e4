// Numbers stored as text (m/retired_seq, k/<subscription> checkpoints) that a
// bad disk or a bug made larger than 64 bits: nothing throws, Open and
// GetCheckpoint answer a corruption status naming what is wrong, and Check
// reports the value as a problem. And since format 3 every m/ and k/ value
// is framed with a checksum: a damaged byte, or a bare number where a framed
// one belongs, is a corruption naming the key, never another number.

#include <gtest/gtest.h>
#include <leveldb/db.h>

#include <memory>
#include <string>
#include <vector>

#include "eventfold/store.h"
#include "replay/check.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"
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
    if (p.key == storage::Printable(key)) return true;
  }
  return false;
}

std::string GetRaw(const std::string& dir, const std::string& key) {
  leveldb::DB* raw = nullptr;
  leveldb::Status s = leveldb::DB::Open(leveldb::Options(), dir, &raw);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<leveldb::DB> db(raw);
  std::string value;
  EXPECT_TRUE(db->Get(leveldb::ReadOptions(), key, &value).ok());
  return value;
}

// Each byte of m/generation flipped in turn (a bad disk), and then the bare
// text a format 2 store held: Open fails with a corruption naming the key,
// and Check reports it there. Before format 3 a flipped digit read as
// another generation, silently.
TEST(StoredNumberTest, DamagedMetadataIsACorruptionNamingItsKey) {
  ScratchDir dir;
  MakeStore(dir.path());
  const std::string key = storage::MetaKey("generation");
  const std::string framed = GetRaw(dir.path(), key);
  ASSERT_FALSE(framed.empty());
  std::vector<std::string> damaged;
  for (size_t i = 0; i < framed.size(); ++i) {
    std::string v = framed;
    v[i] = static_cast<char>(v[i] ^ 0x04);
    damaged.push_back(v);
  }
  damaged.push_back("2");  // bare, as format 2 stored it
  for (const std::string& v : damaged) {
    PutRaw(dir.path(), key, v);
    Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), Options());
    ASSERT_FALSE(store.ok()) << "a damaged m/generation opened";
    EXPECT_EQ(store.status().code(), Status::Code::kCorruption) << store.status().ToString();
    EXPECT_NE(store.status().message().find("m/generation"), std::string::npos)
        << store.status().ToString();
    EXPECT_TRUE(Reported(RawCheck(dir.path()), key));
  }
  PutRaw(dir.path(), key, framed);
  Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), Options());
  EXPECT_TRUE(store.ok()) << "the intact value opens again: " << store.status().ToString();
}

// The same for a checkpoint: a flipped byte is a corruption naming the
// subscription, not a checkpoint elsewhere in the feed.
TEST(StoredNumberTest, DamagedCheckpointIsACorruptionNotAnotherSeq) {
  ScratchDir dir;
  MakeStore(dir.path());
  {
    Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), Options());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->feed().SetCheckpoint("mailer", 17).ok());
  }
  const std::string key = storage::CheckpointKey("mailer");
  std::string v = GetRaw(dir.path(), key);
  ASSERT_FALSE(v.empty());
  v[v.size() / 2] = static_cast<char>(v[v.size() / 2] ^ 0x01);
  PutRaw(dir.path(), key, v);
  Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), Options());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<uint64_t> seq = (*store)->feed().GetCheckpoint("mailer");
  ASSERT_FALSE(seq.ok()) << "read as " << *seq;
  EXPECT_EQ(seq.status().code(), Status::Code::kCorruption);
  EXPECT_NE(seq.status().message().find("mailer"), std::string::npos) << seq.status().ToString();
}

TEST(StoredNumberTest, OversizedRetiredSeqFailsOpenWithoutThrowing) {
  ScratchDir dir;
  MakeStore(dir.path());
  PutRaw(dir.path(), storage::MetaKey("retired_seq"), storage::EncodeText(kTooBig));
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
  PutRaw(dir.path(), storage::CheckpointKey("mailer"), storage::EncodeText(kTooBig));
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
