// Scratch space beside a store (storage/scratch_space.h): eventfold empties
// and removes only the directories it made, and a directory of the same
// name that holds someone else's files is refused, named, and left whole,
// whichever command meets it.

#include "storage/scratch_space.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "eventfold/maintenance.h"
#include "eventfold/repair.h"
#include "eventfold/store.h"
#include "tests/storage/storage_test_util.h"

namespace eventfold {
namespace {

namespace fs = std::filesystem;
using storage::ClaimScratch;
using storage::InspectScratch;
using storage::ReleaseScratch;
using storage::ScratchState;
using storage_test::Issued;
using storage_test::ScratchDir;

void WriteFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// An operator's directory at a scratch name: a file at the top and one a
// level down, as a backup has (quarantine/).
void PlantForeign(const std::string& path) {
  WriteFile(fs::path(path) / "CURRENT", "MANIFEST-000008\n");
  WriteFile(fs::path(path) / "quarantine" / "000005.ldb", "the operator's bytes");
}

void ExpectForeignIntact(const std::string& path) {
  EXPECT_EQ(ReadFile(fs::path(path) / "CURRENT"), "MANIFEST-000008\n") << path;
  EXPECT_EQ(ReadFile(fs::path(path) / "quarantine" / "000005.ldb"), "the operator's bytes") << path;
  EXPECT_FALSE(fs::exists(fs::path(path) / storage::kScratchMark)) << path;
}

// Removes the test's sibling directories, whatever they hold.
struct Siblings {
  std::string base;
  ~Siblings() {
    std::error_code ec;
    for (const char* suffix : {".rebuild", ".verify", ".verify.runs", ".check-copy", ".x"}) {
      fs::remove_all(base + suffix, ec);
    }
  }
};

TEST(ScratchSpace, ClaimsReleasesAndRefusesWhatIsNotOurs) {
  ScratchDir dir;
  Siblings cleanup{dir.path()};
  leveldb::Env* env = leveldb::Env::Default();
  const std::string path = dir.path() + ".x";

  EXPECT_EQ(InspectScratch(env, path), ScratchState::kAbsent);
  EXPECT_TRUE(ReleaseScratch(env, path).ok()) << "nothing there: nothing to do";
  ASSERT_TRUE(ClaimScratch(env, path).ok());
  EXPECT_EQ(InspectScratch(env, path), ScratchState::kOurs);
  // Ours, with leftovers a level down: claimed again, it is emptied.
  WriteFile(fs::path(path) / "sub" / "left.tmp", "x");
  ASSERT_TRUE(ClaimScratch(env, path).ok());
  EXPECT_FALSE(fs::exists(fs::path(path) / "sub"));
  EXPECT_TRUE(fs::exists(fs::path(path) / storage::kScratchMark));
  WriteFile(fs::path(path) / "sub" / "left.tmp", "x");
  ASSERT_TRUE(ReleaseScratch(env, path).ok());
  EXPECT_FALSE(fs::exists(path));

  // An empty directory, and one of run files only (an interrupted rebuild
  // of a build before the mark), are ours.
  fs::create_directories(path);
  EXPECT_EQ(InspectScratch(env, path), ScratchState::kOurs);
  WriteFile(fs::path(path) / "run-0.tmp", "r");
  WriteFile(fs::path(path) / "run-12.tmp", "r");
  EXPECT_EQ(InspectScratch(env, path), ScratchState::kOurs);
  // One other file makes it someone else's.
  WriteFile(fs::path(path) / "run-x.tmp", "r");
  EXPECT_EQ(InspectScratch(env, path), ScratchState::kForeign);
  fs::remove_all(path);

  PlantForeign(path);
  for (Status st : {ClaimScratch(env, path), ReleaseScratch(env, path)}) {
    EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
    EXPECT_NE(st.message().find(path), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("nothing in it was touched"), std::string::npos);
  }
  ExpectForeignIntact(path);
  fs::remove_all(path);

  // A file at the name is not a directory of ours either.
  WriteFile(path, "a file");
  EXPECT_EQ(InspectScratch(env, path), ScratchState::kForeign);
  EXPECT_TRUE(ClaimScratch(env, path).IsInvalidArgument());
  EXPECT_EQ(ReadFile(path), "a file");
}

TEST(ScratchSpace, StoreCommandsLeaveAnOperatorsDirectoriesWhole) {
  ScratchDir dir;
  Siblings cleanup{dir.path()};
  Options o;
  o.durability = Durability::kBuffered;
  {
    Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_EQ((*store)->Ingest(Issued("evt_1", "rcp_1")).outcome, Outcome::kAccepted);
  }
  // A backup kept as DIR.verify and another as DIR.rebuild.
  for (const char* suffix : {".verify", ".rebuild"}) PlantForeign(dir.path() + suffix);
  Result<std::unique_ptr<Store>> store = Store::Open(dir.path(), o);
  ASSERT_TRUE(store.ok()) << "a foreign DIR.rebuild does not stop an open: "
                          << store.status().ToString();
  Result<VerifySummary> v = (*store)->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_FALSE(v.ok());
  EXPECT_TRUE(v.status().IsInvalidArgument()) << v.status().ToString();
  EXPECT_NE(v.status().message().find(dir.path() + ".verify"), std::string::npos);
  Result<RebuildSummary> r = (*store)->maintenance().Rebuild(nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir.path() + ".rebuild"), std::string::npos)
      << r.status().ToString();
  ExpectForeignIntact(dir.path() + ".verify");
  ExpectForeignIntact(dir.path() + ".rebuild");
  // The store is as it was, and works once the names are free.
  EXPECT_EQ((*store)->Get("receipt", "rcp_1")->state, "issued");
  fs::remove_all(dir.path() + ".verify");
  fs::remove_all(dir.path() + ".rebuild");
  v = (*store)->maintenance().Verify([](const auto&, const auto&) {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->differences, 0u);
  ASSERT_TRUE((*store)->maintenance().Rebuild(nullptr).ok());
  EXPECT_FALSE(fs::exists(dir.path() + ".verify"));
  EXPECT_FALSE(fs::exists(dir.path() + ".rebuild"));
  store->reset();

  // The check's copy: made and removed beside the store; refused over a
  // directory that is not ours.
  Result<std::string> copy = CopyStoreAside(dir.path());
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(*copy, dir.path() + ".check-copy");
  EXPECT_TRUE(fs::exists(fs::path(*copy) / "CURRENT"));
  ASSERT_TRUE(RemoveStoreCopy(*copy).ok());
  EXPECT_FALSE(fs::exists(*copy));
  PlantForeign(dir.path() + ".check-copy");
  copy = CopyStoreAside(dir.path());
  ASSERT_FALSE(copy.ok());
  EXPECT_TRUE(copy.status().IsInvalidArgument()) << copy.status().ToString();
  EXPECT_TRUE(RemoveStoreCopy(dir.path() + ".check-copy").IsInvalidArgument());
  ExpectForeignIntact(dir.path() + ".check-copy");
}

}  // namespace
}  // namespace eventfold
