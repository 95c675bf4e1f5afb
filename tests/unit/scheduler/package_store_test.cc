#include "scheduler/package_store.h"

#include <memory>
#include <string>
#include <vector>

#include "common/working_dir_package.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class PackageStoreTest : public ::testing::Test {
 protected:
  PackageStore::Persist Persist() {
    return [this](const std::vector<StateStore::Write>& batch) {
      ++batches_;
      return store_->Apply(batch);
    };
  }
  std::unique_ptr<StateStore> store_ = NewMemoryStateStore();
  int batches_ = 0;
  const absl::Time t0_ = absl::FromUnixSeconds(1'000'000);
};

std::string Bytes(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(i * 31 + 7));
  return s;
}

TEST_F(PackageStoreTest, PutsChunksThenTheRecordAndRestoresThem) {
  PackageStore packages(1 << 30, Persist());
  const std::string bytes = Bytes(PackageStore::kChunkBytes * 2 + 10);
  const std::string digest = DigestOf(bytes);
  absl::StatusOr<bool> added = packages.Put(digest, bytes, t0_);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_TRUE(*added);
  EXPECT_EQ(batches_, 2);  // the chunks, then the record
  EXPECT_EQ(store_->Scan(PackageStore::kChunksTable)->size(), 3u);
  EXPECT_FALSE(*packages.Put(digest, bytes, t0_));  // held already: nothing written
  EXPECT_EQ(batches_, 2);
  EXPECT_EQ(*packages.Get(digest), bytes);
  EXPECT_EQ(packages.Stat(digest, t0_), bytes.size());

  PackageStore restored(1 << 30, Persist());
  ASSERT_TRUE(restored.Restore(*store_, t0_).ok());
  ASSERT_NE(restored.Get(digest), nullptr);
  EXPECT_EQ(*restored.Get(digest), bytes);
}

TEST_F(PackageStoreTest, RefusesBytesThatDoNotMatchOrPassTheLimit) {
  PackageStore packages(100, Persist());
  absl::StatusOr<bool> wrong = packages.Put(DigestOf("a"), "b", t0_);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("header.digest"));
  const std::string big = Bytes(101);
  EXPECT_EQ(packages.Put(DigestOf(big), big, t0_).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(batches_, 0);
  EXPECT_EQ(packages.Stat(DigestOf("a"), t0_), std::nullopt);
}

TEST_F(PackageStoreTest, RestoreDropsChunksOfAnUnfinishedUpload) {
  ASSERT_TRUE(store_->Put(PackageStore::kChunksTable, DigestOf("x") + "/00000000", "x").ok());
  PackageStore packages(1 << 20, Persist());
  ASSERT_TRUE(packages.Restore(*store_, t0_).ok());
  EXPECT_EQ(packages.Get(DigestOf("x")), nullptr);
  EXPECT_THAT(*store_->Scan(PackageStore::kChunksTable), IsEmpty());
}

TEST_F(PackageStoreTest, CollectsOnlyUnclaimedPackagesNoUnfinishedJobNames) {
  PackageStore packages(1 << 20, Persist());
  const std::string used = DigestOf("used"), idle = DigestOf("idle"), fresh = DigestOf("fresh");
  ASSERT_TRUE(packages.Put(used, "used", t0_).ok());
  ASSERT_TRUE(packages.Put(idle, "idle", t0_).ok());
  const absl::Time later = t0_ + PackageStore::kUnclaimedGrace + absl::Seconds(1);
  ASSERT_TRUE(packages.Put(fresh, "fresh", later - absl::Seconds(5)).ok());
  EXPECT_THAT(packages.Collect({used}, t0_ + absl::Minutes(1)), IsEmpty());  // within the grace
  EXPECT_THAT(packages.Collect({used}, later), ElementsAre(idle));
  EXPECT_EQ(packages.Get(idle), nullptr);
  EXPECT_NE(packages.Get(used), nullptr);
  EXPECT_NE(packages.Get(fresh), nullptr);
  // Gone from the store too: a restarted head does not bring it back.
  PackageStore restored(1 << 20, Persist());
  ASSERT_TRUE(restored.Restore(*store_, later).ok());
  EXPECT_EQ(restored.Get(idle), nullptr);
  EXPECT_NE(restored.Get(used), nullptr);
  EXPECT_EQ(store_->Scan(PackageStore::kChunksTable)->size(), 2u);
}

TEST_F(PackageStoreTest, ALookupKeepsAPackageWanted) {
  PackageStore packages(1 << 20, Persist());
  const std::string digest = DigestOf("p");
  ASSERT_TRUE(packages.Put(digest, "p", t0_).ok());
  const absl::Time looked = t0_ + PackageStore::kUnclaimedGrace;
  ASSERT_TRUE(packages.Stat(digest, looked).has_value());
  EXPECT_THAT(packages.Collect({}, looked + absl::Minutes(1)), IsEmpty());
  EXPECT_THAT(packages.Collect({}, looked + PackageStore::kUnclaimedGrace + absl::Seconds(1)),
              ElementsAre(digest));
}

}  // namespace
}  // namespace berth
