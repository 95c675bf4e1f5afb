#include "scheduler/state_writer.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

// A memory store that counts batches, can fail the next batch, and can
// hold a batch until released (to pile up writers behind it).
class CountingStore final : public StateStore {
 public:
  absl::Status Apply(const std::vector<Write>& batch) override {
    if (hold_ != nullptr) hold_->WaitForNotification();
    ++batches;
    if (fail_next.exchange(false)) return absl::UnavailableError("disk full");
    return inner_->Apply(batch);
  }
  absl::StatusOr<std::vector<Record>> Scan(absl::string_view table) override {
    return inner_->Scan(table);
  }
  std::string Describe() const override { return "counting"; }

  std::atomic<int> batches{0};
  std::atomic<bool> fail_next{false};
  absl::Notification* hold_ = nullptr;

 private:
  std::unique_ptr<StateStore> inner_ = NewMemoryStateStore();
};

TEST(StateWriterTest, ConcurrentChangesShareBatches) {
  CountingStore store;
  StateWriter writer(&store);
  absl::Notification release;
  store.hold_ = &release;
  // The first writer blocks in the store; the others stage meanwhile and
  // are all carried by the next batch.
  std::thread first([&] { EXPECT_TRUE(writer.WaitDurable(writer.Stage("t", "k0", "v0")).ok()); });
  // Past the deadline the test fails and goes on: the release lets every
  // thread end, so none is left joinable.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (writer.staged() == 0 && absl::Now() < deadline) std::this_thread::yield();
  EXPECT_EQ(writer.staged(), 1u) << "the first write never reached the store";
  std::vector<std::thread> others;
  for (int i = 1; i <= 16; ++i) {
    others.emplace_back([&, i] {
      EXPECT_TRUE(writer.WaitDurable(writer.Stage("t", absl::StrCat("k", i), "v")).ok());
    });
  }
  while (writer.staged() < 17 && absl::Now() < deadline) std::this_thread::yield();
  EXPECT_EQ(writer.staged(), 17u) << "the other writers did not all stage";
  release.Notify();
  first.join();
  for (std::thread& t : others) t.join();
  EXPECT_EQ(writer.writes(), 17u);
  EXPECT_LE(store.batches, 3);  // not 17
  EXPECT_EQ(store.Scan("t")->size(), 17u);
}

TEST(StateWriterTest, TheLastWriteOfAKeyWins) {
  CountingStore store;
  StateWriter writer(&store);
  writer.Stage("t", "a", "1");
  writer.Stage("t", "b", "1");
  writer.Stage("t", "a", "2");
  ASSERT_TRUE(writer.WaitDurable(writer.Stage("t", "b", std::nullopt)).ok());
  auto records = store.Scan("t");
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0], (StateStore::Record{"a", "2"}));
  EXPECT_EQ(store.batches, 1);
}

TEST(StateWriterTest, AFailedBatchIsReportedAndRetried) {
  CountingStore store;
  StateWriter writer(&store);
  store.fail_next = true;
  const uint64_t seq = writer.Stage("t", "a", "1");
  absl::Status failed = writer.WaitDurable(seq);
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(store.Scan("t")->empty());
  // The next batch carries the failed write too.
  ASSERT_TRUE(writer.WaitDurable(writer.Stage("t", "b", "1")).ok());
  EXPECT_EQ(store.Scan("t")->size(), 2u);
}

TEST(StateWriterTest, NoStoreKeepsNothingAndNeverWaits) {
  StateWriter writer(nullptr);
  EXPECT_TRUE(writer.WaitDurable(writer.Stage("t", "a", "1")).ok());
}

}  // namespace
}  // namespace berth
