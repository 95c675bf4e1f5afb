#include "worker/checkpoint_files.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

class WorkerCheckpointFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/worker_checkpoint_files_", getpid());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(WorkerCheckpointFilesTest, PathNamesTheStep) {
  EXPECT_EQ(CheckpointPath("/ckpt", 50), "/ckpt/step-50.pt");
}

TEST_F(WorkerCheckpointFilesTest, WriteThenReadLeavesNoTemporary) {
  ASSERT_TRUE(MakeDirectories(dir_ + "/a/b").ok());
  const std::string path = CheckpointPath(dir_ + "/a/b", 7);
  const std::string bytes("PK\0\x01zip", 6);
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  ASSERT_TRUE(WriteFileAtomically(path, bytes + bytes).ok());  // replaces
  absl::StatusOr<std::string> read = ReadWholeFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes + bytes);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/a/b")) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "step-7.pt");
  }
  EXPECT_EQ(files, 1);
}

TEST_F(WorkerCheckpointFilesTest, ErrorsNameThePath) {
  absl::StatusOr<std::string> missing = ReadWholeFile(dir_ + "/none.pt");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("none.pt"), std::string::npos);
  absl::Status unwritable = WriteFileAtomically(dir_ + "/no/such/dir/x.pt", "x");
  EXPECT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.message().find("x.pt"), std::string::npos);
}

}  // namespace
}  // namespace berth
