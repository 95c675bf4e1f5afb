#include "placement/resource_name.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

TEST(ResourceNameTest, OneNameOneCopy) {
  const std::string text = "accelerator_type:A10G";
  ResourceName a(text);
  ResourceName b("accelerator_type:A10G");
  EXPECT_EQ(a, b);
  EXPECT_EQ(&a.str(), &b.str());
  EXPECT_NE(&a.str(), &text);
  EXPECT_NE(a, ResourceName("accelerator_type:H100"));
  EXPECT_EQ(a, "accelerator_type:A10G");
  EXPECT_NE(a, "accelerator_type");
}

// More names than the first table holds: the later ones go to the next
// table, and every name still has one copy.
TEST(ResourceNameTest, ManyNamesKeepTheirCopies) {
  std::vector<const std::string*> first;
  for (int i = 0; i < 5000; ++i) first.push_back(&ResourceName(absl::StrCat("r", i)).str());
  for (int i = 0; i < 5000; ++i) {
    const ResourceName again(absl::StrCat("r", i));
    ASSERT_EQ(&again.str(), first[i]) << i;
    ASSERT_EQ(again.str(), absl::StrCat("r", i));
  }
}

// Threads interning the same new names at once agree on each one's copy.
TEST(ResourceNameTest, ThreadsAgreeOnEachName) {
  constexpr int kThreads = 4;
  constexpr int kNames = 3000;
  std::vector<std::vector<const std::string*>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &seen] {
      for (int i = 0; i < kNames; ++i) {
        seen[t].push_back(&ResourceName(absl::StrCat("race-", i)).str());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t], seen[0]);
}

}  // namespace
}  // namespace berth
