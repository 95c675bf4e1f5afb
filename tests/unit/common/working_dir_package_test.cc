#include "common/working_dir_package.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class WorkingDirPackageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("wdp-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "src");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& relative, const std::string& text) {
    const fs::path path = root_ / "src" / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  static std::string Read(const fs::path& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string src() const { return (root_ / "src").string(); }
  fs::path root_;
};

TEST_F(WorkingDirPackageTest, PacksAndUnpacksFilesFoldersModesAndLinks) {
  Write("train.py", "print('hi')\n");
  Write("lib/model.py", "X = 1\n");
  Write("run.sh", "#!/bin/sh\n");
  fs::permissions(root_ / "src/run.sh", fs::perms::owner_exec, fs::perm_options::add);
  fs::create_symlink("lib/model.py", root_ / "src/model_link.py");
  absl::StatusOr<PackedDir> packed = Pack(src(), {}, kDefaultPackageLimitBytes);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->files, 3u);
  EXPECT_EQ(packed->digest, DigestOf(packed->bytes));
  absl::Status unpacked = Unpack(packed->bytes, (root_ / "out").string());
  ASSERT_TRUE(unpacked.ok()) << unpacked;
  EXPECT_EQ(Read(root_ / "out/train.py"), "print('hi')\n");
  EXPECT_EQ(Read(root_ / "out/lib/model.py"), "X = 1\n");
  EXPECT_EQ(Read(root_ / "out/model_link.py"), "X = 1\n");
  EXPECT_TRUE(fs::is_symlink(root_ / "out/model_link.py"));
  EXPECT_NE(fs::status(root_ / "out/run.sh").permissions() & fs::perms::owner_exec,
            fs::perms::none);
}

TEST_F(WorkingDirPackageTest, SameFilesGiveTheSameDigest) {
  Write("a.py", "a\n");
  Write("b/c.py", "c\n");
  absl::StatusOr<PackedDir> first = Pack(src(), {}, kDefaultPackageLimitBytes);
  ASSERT_TRUE(first.ok());
  // gzip's header holds no timestamp (bytes 4-7), so packing later matches.
  ASSERT_GT(first->bytes.size(), 8u);
  EXPECT_EQ(first->bytes.substr(4, 4), std::string(4, '\0'));
  absl::StatusOr<PackedDir> again = Pack(src(), {}, kDefaultPackageLimitBytes);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->digest, again->digest);
  Write("b/c.py", "changed\n");
  absl::StatusOr<PackedDir> changed = Pack(src(), {}, kDefaultPackageLimitBytes);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(first->digest, changed->digest);
}

TEST_F(WorkingDirPackageTest, ExcludesByNameAtAnyDepthOrByPathAndTheDefaults) {
  Write("train.py", "t\n");
  Write("data/big.bin", "x");
  Write("sub/data/also.bin", "x");
  Write("logs/a.txt", "x");
  Write("logs/keep.log", "k");
  Write("ckpt/model.ckpt", "x");
  Write(".git/HEAD", "x");
  Write("pkg/__pycache__/m.pyc", "x");
  Write(".berth/fit-1/payload.pkl", "x");
  absl::StatusOr<PackedDir> packed =
      Pack(src(), {"data", "logs/*.txt", "*.ckpt"}, kDefaultPackageLimitBytes);
  ASSERT_TRUE(packed.ok()) << packed.status();
  absl::Status unpacked = Unpack(packed->bytes, (root_ / "out").string());
  ASSERT_TRUE(unpacked.ok()) << unpacked;
  EXPECT_TRUE(fs::exists(root_ / "out/train.py"));
  EXPECT_TRUE(fs::exists(root_ / "out/logs/keep.log"));
  for (const char* gone :
       {"data", "sub/data", "logs/a.txt", "ckpt/model.ckpt", ".git", "pkg/__pycache__", ".berth"}) {
    EXPECT_FALSE(fs::exists(root_ / "out" / gone)) << gone;
  }
}

TEST_F(WorkingDirPackageTest, OverTheLimitNamesTheLargestFiles) {
  std::string noise;
  uint32_t state = 12345;  // incompressible bytes
  for (int i = 0; i < 300000; ++i) {
    state = state * 1664525u + 1013904223u;
    noise.push_back(static_cast<char>(state >> 24));
  }
  Write("weights.bin", noise);
  Write("train.py", "t\n");
  absl::StatusOr<PackedDir> packed = Pack(src(), {}, 64 << 10);
  ASSERT_EQ(packed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(packed.status().message(), HasSubstr("weights.bin (300000 bytes)"));
  EXPECT_EQ(Pack((root_ / "missing").string(), {}, 1 << 20).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(WorkingDirPackageTest, CheckDigestNamesTheField) {
  EXPECT_TRUE(CheckDigest(DigestOf("x"), "digest").ok());
  absl::Status bad = CheckDigest("sha256:XYZ", "entrypoint.command.working_dir_package");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("entrypoint.command.working_dir_package"));
  EXPECT_FALSE(CheckDigest("md5:" + std::string(64, 'a'), "d").ok());
}

TEST_F(WorkingDirPackageTest, UnpackRefusesWhatLeadsOutAndGarbage) {
  // A link pointing out of the folder, made by hand (Pack keeps links as
  // they are, so it packs one).
  Write("ok.py", "x");
  fs::create_symlink("../../etc/passwd", root_ / "src/escape");
  absl::StatusOr<PackedDir> packed = Pack(src(), {}, kDefaultPackageLimitBytes);
  ASSERT_TRUE(packed.ok());
  absl::Status unpacked = Unpack(packed->bytes, (root_ / "out").string());
  EXPECT_EQ(unpacked.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unpacked.message(), HasSubstr("escape"));
  EXPECT_EQ(Unpack("not an archive", (root_ / "out2").string()).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace berth
