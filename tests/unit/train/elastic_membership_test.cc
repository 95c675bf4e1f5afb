// Elastic membership: which workers the next attempt gets, and when a
// running attempt grows or shrinks.
#include "train/elastic_membership.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

constexpr char kGroup[] = "pg-1";

// A group in `state` with bundle i on nodes[i] ("" = not placed).
v1::PlacementGroupInfo Group(const std::string& id, const std::vector<std::string>& nodes,
                             v1::PlacementGroupState state = v1::PLACEMENT_GROUP_STATE_CREATED,
                             int64_t placed_ms = 1) {
  v1::PlacementGroupInfo group;
  group.set_placement_group_id(id);
  group.set_state(state);
  group.set_placed_unix_ms(placed_ms);
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    group.add_bundles();
    if (nodes[i].empty()) continue;
    v1::BundleLocation* location = group.add_locations();
    location->set_bundle_index(i);
    location->set_node_id(nodes[i]);
    location->add_gpus()->set_index(0);
  }
  return group;
}

// A job of 4 workers at most, 2 at least: its own group holds 2 bundles.
class ElasticMembershipTest : public ::testing::Test {
 protected:
  ElasticMembershipTest() : membership_(true, 2, 2, 4) {
    job_.set_placement_group_id(kGroup);
    job_.add_elastic_group_ids("pg-e0");
    job_.add_elastic_group_ids("pg-e1");
  }

  // The attempt runs rank i in (group, bundle) on node.
  void Runs(const std::string& group, uint32_t bundle, const std::string& node) {
    v1::WorkerRank* w = job_.add_workers();
    w->set_world_rank(job_.workers_size() - 1);
    w->set_placement_group_id(group);
    w->set_bundle_index(bundle);
    w->set_node_id(node);
  }
  // The attempt runs on the job's group (n1, n2) and elastic group pg-e0 (n3).
  void RunsOnThree() {
    Runs(kGroup, 0, "n1");
    Runs(kGroup, 1, "n2");
    Runs("pg-e0", 0, "n3");
    world_.group = Group(kGroup, {"n1", "n2"});
    world_.elastic["pg-e0"] = Group("pg-e0", {"n3"});
    world_.alive = {"n1", "n2", "n3"};
  }

  ElasticMembership membership_;
  v1::TrainJobInfo job_;
  JobWorld world_;
};

TEST_F(ElasticMembershipTest, AFixedJobRunsOnAllOfItsGroupOnceCreatedAndNeverResizes) {
  ElasticMembership fixed(false, 3, 0, 3);
  v1::TrainJobInfo job;
  job.set_placement_group_id(kGroup);
  JobWorld world;
  world.group = Group(kGroup, {"n1", "n2", "n3"});
  EXPECT_THAT(fixed.CoreBundlesToRun(job, world), ElementsAre(0u, 1u, 2u));
  EXPECT_FALSE(fixed.WantsAnotherGroup(job));
  world.group = Group(kGroup, {"n1", "", "n3"}, v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_THAT(fixed.CoreBundlesToRun(job, world), IsEmpty());
  EXPECT_EQ(fixed.Loss(job, world, {"n2"}, 1), "");
  EXPECT_EQ(fixed.GrowReason(job, world), "");
  fixed.RecordResize(absl::FromUnixMillis(5), 1, 2, "a reason", &job);
  EXPECT_EQ(job.resizes_size(), 0);
}

TEST_F(ElasticMembershipTest, MakesAnElasticGroupForEachWorkerBeyondItsOwnGroup) {
  v1::TrainJobInfo job;
  EXPECT_TRUE(membership_.WantsAnotherGroup(job));
  job.add_elastic_group_ids("pg-e0");
  EXPECT_TRUE(membership_.WantsAnotherGroup(job));
  job.add_elastic_group_ids("pg-e1");
  EXPECT_FALSE(membership_.WantsAnotherGroup(job));
}

TEST_F(ElasticMembershipTest, TheNextAttemptGetsItsGroupThenTheElasticGroupsPlaced) {
  world_.group = Group(kGroup, {"n1", "n2"});
  world_.elastic["pg-e0"] = Group("pg-e0", {"n3"});
  world_.elastic["pg-e1"] = Group("pg-e1", {""}, v1::PLACEMENT_GROUP_STATE_PENDING);
  const std::vector<uint32_t> core = membership_.CoreBundlesToRun(job_, world_);
  ASSERT_THAT(core, ElementsAre(0u, 1u));
  const AttemptMembers members = membership_.NextAttempt(job_, world_, core);
  EXPECT_THAT(members.bundles, ElementsAre(Pair("", 0u), Pair("", 1u), Pair("pg-e0", 0u)));
  ASSERT_EQ(members.sites.size(), 3u);
  EXPECT_EQ(members.sites[2].node_id, "n3");
}

TEST_F(ElasticMembershipTest, AfterALostBundleItRunsOnWhatItKeptWhileThatMakesMinWorkers) {
  RunsOnThree();
  world_.group = Group(kGroup, {"n1", ""}, v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_THAT(membership_.CoreBundlesToRun(job_, world_), ElementsAre(0u));
  // Without the elastic group, one worker is fewer than min_workers.
  world_.elastic["pg-e0"] = Group("pg-e0", {""}, v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_THAT(membership_.CoreBundlesToRun(job_, world_), IsEmpty());
  // Rank 0's bundle lost: it waits for it.
  world_.elastic["pg-e0"] = Group("pg-e0", {"n3"});
  world_.group = Group(kGroup, {"", "n2"}, v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_THAT(membership_.CoreBundlesToRun(job_, world_), IsEmpty());
}

TEST_F(ElasticMembershipTest, ARunningAttemptShrinksWhenWhatItRunsOnIsLost) {
  RunsOnThree();
  const std::set<std::string> nodes = {"n1", "n2", "n3"};
  EXPECT_EQ(membership_.Loss(job_, world_, nodes, 1), "");

  world_.alive.erase("n3");
  EXPECT_EQ(membership_.Loss(job_, world_, nodes, 1), "node n3 died (missed heartbeats)");
  world_.alive.insert("n3");

  world_.elastic["pg-e0"]->set_preempting(true);
  world_.elastic["pg-e0"]->set_preempted_by("queue prod");
  EXPECT_EQ(membership_.Loss(job_, world_, nodes, 1),
            "elastic group pg-e0 is preempted: queue prod");
  world_.elastic["pg-e0"] = Group("pg-e0", {""}, v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_EQ(membership_.Loss(job_, world_, nodes, 1), "elastic group pg-e0 lost its bundle");
  world_.elastic["pg-e0"] = Group("pg-e0", {"n3"});

  world_.group = Group(kGroup, {"n1", "n4"});
  EXPECT_EQ(membership_.Loss(job_, world_, nodes, 1), "the job's group lost bundle 1 (node n2)");
  world_.group = Group(kGroup, {"n1", "n2"}, v1::PLACEMENT_GROUP_STATE_CREATED, 9);
  EXPECT_THAT(membership_.Loss(job_, world_, nodes, 1), HasSubstr("placed again"));
  // A group that is gone is a failure, not a shrink.
  world_.group = absl::NotFoundError("gone");
  EXPECT_EQ(membership_.Loss(job_, world_, nodes, 1), "");
}

TEST_F(ElasticMembershipTest, ItGrowsAtTheFirstCheckpointAfterMoreWorkersWerePlaced) {
  RunsOnThree();
  job_.set_latest_checkpoint_step(10);
  EXPECT_EQ(membership_.GrowReason(job_, world_), "");  // none placed
  world_.elastic["pg-e1"] = Group("pg-e1", {"n4"});
  EXPECT_EQ(membership_.GrowReason(job_, world_), "");  // marks step 10
  EXPECT_EQ(membership_.GrowReason(job_, world_), "");  // no newer checkpoint yet
  job_.set_latest_checkpoint_step(20);
  EXPECT_EQ(membership_.GrowReason(job_, world_),
            "1 more worker(s) placed; grown at the checkpoint of step 20");

  membership_.AttemptStarted();
  EXPECT_EQ(membership_.GrowReason(job_, world_), "");  // marks step 20 again
  world_.elastic.erase("pg-e1");
  EXPECT_EQ(membership_.GrowReason(job_, world_), "");  // gone again: forgotten
  world_.elastic["pg-e1"] = Group("pg-e1", {"n4"});
  job_.set_latest_checkpoint_step(30);
  EXPECT_EQ(membership_.GrowReason(job_, world_), "");  // marks step 30
}

TEST_F(ElasticMembershipTest, APreemptedElasticGroupTheAttemptDoesNotUseIsLetGo) {
  RunsOnThree();
  world_.elastic["pg-e1"] = Group("pg-e1", {"n4"});
  world_.elastic["pg-e1"]->set_preempting(true);
  EXPECT_EQ(membership_.ToRelease(job_, world_, true), "pg-e1");
  world_.elastic["pg-e1"]->set_preempting(false);
  world_.elastic["pg-e0"]->set_preempting(true);
  EXPECT_EQ(membership_.ToRelease(job_, world_, true), "");  // in use: the attempt shrinks
  EXPECT_EQ(membership_.ToRelease(job_, world_, false), "pg-e0");
}

TEST_F(ElasticMembershipTest, AResizeIsRecordedWhenTheWorldChangesOrForAReason) {
  RunsOnThree();
  membership_.RecordResize(absl::FromUnixMillis(5), 1, 3, "", &job_);
  EXPECT_EQ(job_.resizes_size(), 0);
  membership_.RecordResize(absl::FromUnixMillis(5), 1, 4, "", &job_);
  ASSERT_EQ(job_.resizes_size(), 1);
  EXPECT_EQ(job_.resizes(0).from(), 3u);
  EXPECT_EQ(job_.resizes(0).to(), 4u);
  EXPECT_EQ(job_.resizes(0).attempt(), 1u);
  EXPECT_EQ(job_.resizes(0).reason(), "restarted with the workers placed");
  membership_.RecordResize(absl::FromUnixMillis(6), 2, 3, "node n4 died", &job_);
  ASSERT_EQ(job_.resizes_size(), 2);
  EXPECT_EQ(job_.resizes(1).reason(), "node n4 died");
}

}  // namespace
}  // namespace berth
