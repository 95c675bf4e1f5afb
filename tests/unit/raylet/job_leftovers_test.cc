#include "raylet/job_leftovers.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kRoot[] = "/state/work";
const absl::Time kNow = absl::FromUnixMillis(1'000'000);
const absl::Duration kRetention = absl::Seconds(100);

WorkerRecord Worker(const std::string& id, const std::string& job, const std::string& group,
                    int64_t ended_ms, const std::string& cwd = "") {
  WorkerRecord w;
  w.worker_id = id;
  w.job_id = job;
  w.placement_group_id = group;
  w.state = ended_ms == 0 ? WorkerState::kRunning : WorkerState::kExited;
  w.ended_unix_ms = ended_ms;
  w.cwd = cwd.empty() ? std::string(kRoot) + "/" + job : cwd;
  return w;
}

// Folders made an hour ago.
std::vector<WorkFolder> Folders(const std::vector<std::string>& names) {
  std::vector<WorkFolder> folders;
  for (const std::string& name : names) folders.push_back({name, kNow - absl::Hours(1)});
  return folders;
}

TEST(JobLeftoversTest, AJobOverOnTheNodeLosesItsFolderAtOnceAndItsLogsAfterTheRetention) {
  // job-a ended 10 s ago; job-b ended 200 s ago and ran in a folder of the
  // user's own (none under the root).
  const std::vector<WorkerRecord> workers = {
      Worker("job-a-a0-r0", "job-a", "pg-a", 990'000),
      Worker("job-a-a0-r1", "job-a", "pg-a", 985'000),
      Worker("job-b-a0-r0", "job-b", "pg-b", 800'000, "/home/me/proj"),
  };
  const Leftovers left = FindLeftovers(kNow, kRetention, workers, {}, Folders({"job-a"}));
  EXPECT_THAT(left.work_dirs, ElementsAre("job-a"));
  EXPECT_THAT(left.workers, ElementsAre("job-b-a0-r0"));
}

TEST(JobLeftoversTest, AJobWithARunningWorkerOrAHeldBundleKeepsEverything) {
  const std::vector<WorkerRecord> workers = {
      Worker("job-a-a0-r0", "job-a", "pg-a", 0),        // runs
      Worker("job-a-a0-r1", "job-a", "pg-a", 500'000),  // ended long ago
      Worker("job-b-a0-r0", "job-b", "pg-b", 500'000),  // between attempts: pg-b held
  };
  const Leftovers left =
      FindLeftovers(kNow, kRetention, workers, {"pg-b"}, Folders({"job-a", "job-b"}));
  EXPECT_THAT(left.work_dirs, IsEmpty());
  EXPECT_THAT(left.workers, IsEmpty());
}

TEST(JobLeftoversTest, AFolderNoKnownWorkerUsedGoesOnceItIsAMinuteOld) {
  // An earlier life's, and one a worker being started just made.
  std::vector<WorkFolder> folders = Folders({"job-old"});
  folders.push_back({"job-new", kNow - absl::Seconds(5)});
  EXPECT_THAT(FindLeftovers(kNow, kRetention, {}, {}, folders).work_dirs, ElementsAre("job-old"));
}

TEST(JobLeftoversTest, WorkersWithoutAJobShareAFolderAndAreKeptForTheRetentionAlone) {
  const std::vector<WorkerRecord> workers = {
      Worker("w1", "", "", 950'000, "/state/work/no-job"),
      Worker("w2", "", "", 850'000, "/state/work/no-job"),
      Worker("w3", "", "", 0, "/state/work/no-job"),  // runs
  };
  const Leftovers left = FindLeftovers(kNow, kRetention, workers, {}, Folders({"no-job"}));
  EXPECT_THAT(left.work_dirs, IsEmpty());
  EXPECT_THAT(left.workers, ElementsAre("w2"));
}

}  // namespace
}  // namespace berth
