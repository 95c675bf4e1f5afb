#include "common/random_id.h"

#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace berth {
namespace {

// Threads come and go by the thousand in a gRPC server, and each starts an
// engine of its own: their first draws must not repeat across threads.
TEST(RandomIdTest, FreshThreadsDrawDistinctBits) {
  std::mutex mu;
  std::set<uint64_t> seen;
  size_t drawn = 0;
  for (int round = 0; round < 8; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 64; ++t) {
      threads.emplace_back([&] {
        const uint64_t first = RandomIdBits();
        const uint64_t second = RandomIdBits();
        std::lock_guard<std::mutex> lock(mu);
        seen.insert(first);
        seen.insert(second);
        drawn += 2;
      });
    }
    for (std::thread& t : threads) t.join();
  }
  EXPECT_EQ(seen.size(), drawn);
}

TEST(RandomIdTest, BitsVaryInTheHighAndLowHalves) {
  uint64_t ored = 0;
  uint64_t anded = ~uint64_t{0};
  for (int i = 0; i < 64; ++i) {
    const uint64_t bits = RandomIdBits();
    ored |= bits;
    anded &= bits;
  }
  EXPECT_EQ(ored, ~uint64_t{0});  // every bit was 1 at least once
  EXPECT_EQ(anded, uint64_t{0});  // and 0 at least once
}

}  // namespace
}  // namespace berth
