// An attempt's exits: the reported ones, what the raylets' listings add,
// and what they say together.
#include "train/attempt_exits.h"

#include <csignal>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

v1::WorkerStatus Status(const std::string& worker, v1::WorkerState state, int code = 0) {
  v1::WorkerStatus status;
  status.set_worker_id(worker);
  status.set_state(state);
  status.set_exit_code(code);
  return status;
}

absl::StatusOr<v1::ListWorkersResponse> Listing(const std::vector<v1::WorkerStatus>& workers) {
  v1::ListWorkersResponse response;
  for (const v1::WorkerStatus& w : workers) *response.add_workers() = w;
  return response;
}

const JobProcesses kProcesses = {
    {"job-a0-r0", "n1"}, {"job-a0-r1", "n2"}, {"job-a0-trainer", "n1"}};

TEST(AttemptExitsTest, ATallyCountsRanksNotHelpers) {
  ProcessExits exits = {{"job-a0-r0", Status("job-a0-r0", v1::WORKER_STATE_EXITED)},
                        {"job-a0-trainer", Status("job-a0-trainer", v1::WORKER_STATE_EXITED)}};
  ExitTally tally = TallyExits(kProcesses, exits);
  EXPECT_EQ(tally.ranks, 2u);
  EXPECT_EQ(tally.ranks_done, 1u);
  EXPECT_FALSE(tally.any_failed);
  exits["job-a0-trainer"] = Status("job-a0-trainer", v1::WORKER_STATE_FAILED, 1);
  EXPECT_TRUE(TallyExits(kProcesses, exits).any_failed);
}

TEST(AttemptExitsTest, WhichExitsAreStillOwed) {
  const ProcessExits exits = {{"job-a0-r0", Status("job-a0-r0", v1::WORKER_STATE_FAILED, 1)}};
  EXPECT_THAT(NodesOwingExits(kProcesses, exits), ElementsAre("n1", "n2"));
  EXPECT_FALSE(ReachableRanksExited(kProcesses, {}, exits));
  EXPECT_TRUE(ReachableRanksExited(kProcesses, {"n2"}, exits));
  EXPECT_TRUE(AllExited({"job-a0-r0"}, exits));
  EXPECT_FALSE(AllExited({"job-a0-r0", "job-a0-r1"}, exits));
}

TEST(AttemptExitsTest, ARunningAttemptsListingRecordsExitsAndWorkersARayletLost) {
  WorkersListed listed;
  listed.by_node["n1"] = Listing({Status("job-a0-r0", v1::WORKER_STATE_RUNNING),
                                  Status("job-a0-trainer", v1::WORKER_STATE_EXITED)});
  listed.by_node["n2"] = Listing({});  // a raylet of a new life
  ProcessExits exits;
  RecordListedExits(absl::FromUnixMicros(42), kProcesses, listed, &exits);
  EXPECT_THAT(exits,
              ElementsAre(Pair("job-a0-r1", ::testing::_), Pair("job-a0-trainer", ::testing::_)));
  EXPECT_EQ(exits["job-a0-r1"].signal(), SIGKILL);
  EXPECT_EQ(exits["job-a0-r1"].failed_unix_us(), 42);
  EXPECT_THAT(exits["job-a0-r1"].error(), HasSubstr("no longer knows it"));

  // A node that does not answer is left to its heartbeats.
  listed.by_node["n2"] = absl::UnavailableError("no answer");
  ProcessExits none;
  RecordListedExits(absl::FromUnixMicros(42), {{"job-a0-r1", "n2"}}, listed, &none);
  EXPECT_THAT(none, IsEmpty());
}

TEST(AttemptExitsTest, AProbeAddsKnownExitsKeepsReportsAndNamesTheSilentNodes) {
  WorkersListed listed;
  listed.by_node["n1"] = Listing({Status("job-a0-r0", v1::WORKER_STATE_FAILED, 2),
                                  Status("job-a0-trainer", v1::WORKER_STATE_RUNNING),
                                  Status("other-a0-r0", v1::WORKER_STATE_FAILED, 1)});
  listed.by_node["n2"] = absl::UnavailableError("no answer");
  ProcessExits exits = {{"job-a0-r0", Status("job-a0-r0", v1::WORKER_STATE_FAILED, 9)}};
  EXPECT_THAT(TakeListedExits(kProcesses, listed, &exits), ElementsAre("n2"));
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits["job-a0-r0"].exit_code(), 9);  // the report came first
}

TEST(AttemptExitsTest, AResumeScanFindsWhatRunsAndANewAttemptNumber) {
  WorkersListed listed;
  listed.by_node["n1"] = Listing({Status("job-a3-r0", v1::WORKER_STATE_RUNNING),
                                  Status("job-a4-trainer", v1::WORKER_STATE_EXITED)});
  listed.by_node["n2"] = absl::UnavailableError("no answer");
  JobProcesses running = {{"job-a3-r1", "n2"}};
  EXPECT_EQ(ScanForResume("job", 3, listed, &running), 5u);
  EXPECT_THAT(running, ElementsAre(Pair("job-a3-r0", "n1"), Pair("job-a3-r1", "n2")));
  JobProcesses nothing;
  EXPECT_EQ(ScanForResume("job", 7, {}, &nothing), 7u);
}

}  // namespace
}  // namespace berth
