#include "raylet/package_cache.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/working_dir_package.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class PackageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("pkgcache-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "src");
  }
  void TearDown() override { fs::remove_all(root_); }
  PackedDir PackWith(const std::string& text) {
    std::ofstream(root_ / "src/train.py") << text;
    return *Pack((root_ / "src").string(), {}, 1 << 20);
  }
  PackageCache::Download From(const std::vector<PackedDir>& packages) {
    return [this, packages](const std::string& digest, absl::Time) -> absl::StatusOr<std::string> {
      ++downloads_;
      for (const PackedDir& p : packages) {
        if (p.digest == digest) return p.bytes;
      }
      return absl::NotFoundError("not stored");
    };
  }
  static PackageCache::FoldersInUse None() {
    return [] { return std::set<std::string>(); };
  }
  fs::path root_;
  std::atomic<int> downloads_{0};
  const absl::Time deadline_ = absl::InfiniteFuture();
};

TEST_F(PackageCacheTest, DownloadsOncePerNodeAndUnpacksIntoAFolderNamedByTheDigest) {
  const PackedDir p = PackWith("v1");
  PackageCache cache((root_ / "cache").string(), From({p}), None());
  absl::StatusOr<std::string> folder = cache.Ensure(p.digest, deadline_);
  ASSERT_TRUE(folder.ok()) << folder.status();
  EXPECT_EQ(fs::path(*folder).filename(), p.digest.substr(7));
  std::ifstream in(fs::path(*folder) / "train.py");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "v1");
  EXPECT_EQ(*cache.Ensure(p.digest, deadline_), *folder);
  EXPECT_EQ(downloads_, 1);
  // A restarted raylet finds what it unpacked before.
  PackageCache again((root_ / "cache").string(), From({}), None());
  EXPECT_EQ(*again.Ensure(p.digest, deadline_), *folder);
}

TEST_F(PackageCacheTest, CallersAtOnceShareOneDownload) {
  const PackedDir p = PackWith("v1");
  absl::Notification release;
  PackageCache cache((root_ / "cache").string(),
                     [&](const std::string&, absl::Time) -> absl::StatusOr<std::string> {
                       ++downloads_;
                       release.WaitForNotification();
                       return p.bytes;
                     },
                     None());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] { ok += cache.Ensure(p.digest, deadline_).ok(); });
  }
  absl::SleepFor(absl::Milliseconds(100));
  release.Notify();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(downloads_, 1);
}

TEST_F(PackageCacheTest, WrongBytesOrAMissingPackageLeaveNothingAndAreTriedAgain) {
  const PackedDir p = PackWith("v1");
  const PackedDir other = PackWith("v2");
  PackageCache cache((root_ / "cache").string(),
                     [&](const std::string&, absl::Time) -> absl::StatusOr<std::string> {
                       return ++downloads_ == 1 ? other.bytes : p.bytes;
                     },
                     None());
  absl::StatusOr<std::string> wrong = cache.Ensure(p.digest, deadline_);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("hash to " + other.digest));
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ / "cache"), fs::directory_iterator()), 0);
  EXPECT_TRUE(cache.Ensure(p.digest, deadline_).ok());  // the next call downloads again
  EXPECT_EQ(cache.Ensure("sha256:nope", deadline_).status().code(),
            absl::StatusCode::kInvalidArgument);
  PackageCache empty((root_ / "cache2").string(), From({}), None());
  absl::StatusOr<std::string> missing = empty.Ensure(p.digest, deadline_);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(p.digest));
}

TEST_F(PackageCacheTest, EvictsTheLeastRecentlyUsedThatNoWorkerRunsIn) {
  std::vector<PackedDir> packages;
  for (int i = 0; i < 4; ++i) packages.push_back(PackWith("v" + std::to_string(i)));
  std::set<std::string> in_use;
  PackageCache cache((root_ / "cache").string(), From(packages), [&] { return in_use; },
                     /*keep=*/2);
  // Three in use: none may go, however many there are.
  std::vector<std::string> folders;
  for (int i = 0; i < 3; ++i) {
    folders.push_back(*cache.Ensure(packages[i].digest, deadline_));
    in_use.insert(folders.back());
  }
  for (const std::string& f : folders) EXPECT_TRUE(fs::exists(f)) << f;
  // Free, but used within the last minute: kept too (its worker may be
  // starting).
  in_use.clear();
  ASSERT_TRUE(cache.Ensure(packages[3].digest, deadline_).ok());
  for (const std::string& f : folders) EXPECT_TRUE(fs::exists(f)) << f;
}

TEST_F(PackageCacheTest, EvictsTheLeastRecentlyUsedFreeFolders) {
  std::vector<PackedDir> packages;
  for (int i = 0; i < 4; ++i) packages.push_back(PackWith("v" + std::to_string(i)));
  std::set<std::string> in_use;
  PackageCache cache((root_ / "cache").string(), From(packages), [&] { return in_use; },
                     /*keep=*/2, /*just_used=*/absl::ZeroDuration());
  std::vector<std::string> folders;
  for (int i = 0; i < 4; ++i) {
    folders.push_back(*cache.Ensure(packages[i].digest, deadline_));
    if (i == 0) in_use.insert(folders[0]);  // the oldest has a worker: it stays
  }
  EXPECT_TRUE(fs::exists(folders[0]));
  EXPECT_FALSE(fs::exists(folders[1]));
  EXPECT_FALSE(fs::exists(folders[2]));
  EXPECT_TRUE(fs::exists(folders[3]));
  // An evicted package comes back on demand.
  EXPECT_TRUE(fs::exists(*cache.Ensure(packages[1].digest, deadline_)));
}

}  // namespace
}  // namespace berth
