// cluster::ReplaceFile, how a fold worker writes DIR/p<k>.seq, .stale and
// .standby: the new text whole, or the old file untouched and an error
// that names the file.

#include "cluster/marker_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/common/run_cli.h"
#include "tests/common/scratch_dir.h"

namespace eventfold {
namespace {

using test_util::ReadFile;
using test_util::ScratchDir;
using test_util::WriteFile;

TEST(MarkerFile, ReplacesTheFileWholeAndLeavesNoTemporary) {
  ScratchDir dir("marker-file");
  std::filesystem::create_directories(dir.path());
  const std::string path = dir.path() + "/p3.stale";
  for (bool sync : {true, false}) {
    SCOPED_TRACE(sync ? "synced" : "not synced");
    WriteFile(path, "an older and longer text than the new one\n");
    ASSERT_TRUE(cluster::ReplaceFile(path, "new\n", sync).ok());
    EXPECT_EQ(ReadFile(path), "new\n");
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  }
}

TEST(MarkerFile, AFailedWriteNamesTheFileAndKeepsTheOldOne) {
  ScratchDir dir("marker-file");
  std::filesystem::create_directories(dir.path() + "/p1.seq.tmp");  // in the way
  const std::string path = dir.path() + "/p1.seq";
  WriteFile(path, "41 40\n");
  const Status st = cluster::ReplaceFile(path, "42 41\n", /*sync=*/true);
  EXPECT_EQ(st.code(), Status::Code::kIOError) << st.ToString();
  EXPECT_NE(st.message().find(path + ".tmp"), std::string::npos) << st.ToString();
  EXPECT_EQ(ReadFile(path), "41 40\n");

  const Status missing = cluster::ReplaceFile(dir.path() + "/gone/p2.seq", "1 1\n", false);
  EXPECT_EQ(missing.code(), Status::Code::kIOError) << missing.ToString();
  EXPECT_NE(missing.message().find("gone/p2.seq.tmp"), std::string::npos) << missing.ToString();
}

}  // namespace
}  // namespace eventfold
