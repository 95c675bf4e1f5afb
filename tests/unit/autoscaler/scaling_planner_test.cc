#include "autoscaler/scaling_planner.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr double kGi = 1024.0 * 1024 * 1024;

NodePool Pool(std::string name, std::string type, uint32_t gpus, uint32_t max_nodes,
              uint32_t min_nodes = 0) {
  NodePool p;
  p.name = std::move(name);
  p.accelerator_type = std::move(type);
  p.gpus = gpus;
  if (gpus > 0) p.resources.Set(kGpu, Quantity::Whole(gpus));
  p.resources.Set(kCpu, Quantity::Whole(32));
  p.resources.Set(kMemory, Quantity::Whole(int64_t{128} << 30));
  p.max_nodes = max_nodes;
  p.min_nodes = min_nodes;
  p.idle_timeout_ms = 60'000;
  return p;
}

void Set(v1::ResourceSet* set, const std::string& name, double value) {
  (*set->mutable_amounts())[name] = value;
}

// A registered pool node; `used_gpus` of its GPUs reserved.
v1::NodeInfo Node(const std::string& id, const NodePool& pool, double used_gpus = 0,
                  v1::NodeState state = v1::NODE_STATE_ALIVE) {
  v1::NodeInfo n;
  n.set_node_id(id);
  n.set_state(state);
  Set(n.mutable_total(), "CPU", 32);
  Set(n.mutable_total(), "memory", 128 * kGi);
  Set(n.mutable_available(), "CPU", 32);
  Set(n.mutable_available(), "memory", 128 * kGi);
  if (pool.gpus > 0) {
    Set(n.mutable_total(), "GPU", pool.gpus);
    Set(n.mutable_available(), "GPU", pool.gpus - used_gpus);
    Set(n.mutable_total(), "accelerator_type:" + pool.accelerator_type, 1);
    Set(n.mutable_available(), "accelerator_type:" + pool.accelerator_type, 1);
    (*n.mutable_labels())["berth.io/accelerator-type"] = pool.accelerator_type;
    for (uint32_t i = 0; i < pool.gpus; ++i) n.add_gpus()->set_index(i);
  }
  (*n.mutable_labels())["berth.io/node-pool"] = pool.name;
  return n;
}

// `count` gangs of `bundles` x {GPU: gpus} (on `type` if given).
v1::PendingDemand Gang(int bundles, double gpus, v1::PlacementStrategy strategy,
                       const std::string& type = "", int count = 1) {
  v1::PendingDemand d;
  for (int i = 0; i < bundles; ++i) {
    v1::Bundle* b = d.add_shape();
    Set(b->mutable_resources(), "GPU", gpus);
    if (!type.empty()) Set(b->mutable_resources(), "accelerator_type:" + type, 0.001);
  }
  d.set_strategy(strategy);
  d.set_count(count);
  return d;
}

std::vector<std::pair<std::string, uint32_t>> ScaleUps(const ScalingPlan& plan) {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (const auto& a : plan.actions) {
    if (a.kind() == v1::AUTOSCALER_ACTION_KIND_SCALE_UP)
      out.push_back({a.pool(), a.target_nodes()});
  }
  return out;
}

TEST(ScalingPlannerTest, AnEightGpuGangGetsOneEightGpuNode) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 4), h100 = Pool("h100", "H100", 8, 2);
  ScalingPlanner planner({a10g, h100});
  // STRICT_PACK of 8 x 1 GPU: only an 8-GPU node can hold it.
  ScalingPlan plan = planner.Plan({{}, {Gang(8, 1, v1::PLACEMENT_STRATEGY_STRICT_PACK)}, 0});
  EXPECT_THAT(ScaleUps(plan), ElementsAre(std::pair<std::string, uint32_t>{"h100", 1}));
  EXPECT_THAT(plan.unsatisfiable, IsEmpty());
  EXPECT_EQ(plan.actions[0].reason(),
            "1 new node(s) for 1 pending gang(s): {GPU: 1} * 8 (STRICT_PACK)");
  // Asked once: the next pass counts the launching node and adds nothing.
  plan = planner.Plan({{}, {Gang(8, 1, v1::PLACEMENT_STRATEGY_STRICT_PACK)}, 1000});
  EXPECT_THAT(ScaleUps(plan), IsEmpty());
  EXPECT_EQ(plan.pools[1].target_nodes(), 1u);
  EXPECT_EQ(plan.pools[1].nodes(), 0u);
}

TEST(ScalingPlannerTest, PackUsesFreeGpusOfExistingNodesFirst) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 8);
  ScalingPlanner planner({a10g});
  // 6 one-GPU bundles; the registered node has 3 free: one more node.
  ScalingPlan plan =
      planner.Plan({{Node("a-1", a10g, 1)}, {Gang(6, 1, v1::PLACEMENT_STRATEGY_PACK)}, 0});
  EXPECT_THAT(ScaleUps(plan), ElementsAre(std::pair<std::string, uint32_t>{"a10g", 2}));
}

TEST(ScalingPlannerTest, StrictSpreadNeedsOneNodePerBundle) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 8);
  ScalingPlanner planner({a10g});
  ScalingPlan plan =
      planner.Plan({{Node("a-1", a10g, 0)}, {Gang(4, 1, v1::PLACEMENT_STRATEGY_STRICT_SPREAD)}, 0});
  // One bundle fits the existing node; three more distinct nodes.
  EXPECT_THAT(ScaleUps(plan), ElementsAre(std::pair<std::string, uint32_t>{"a10g", 4}));
}

TEST(ScalingPlannerTest, AcceleratorTypesPickTheirPool) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 8), t4 = Pool("t4", "T4", 1, 8);
  ScalingPlanner planner({a10g, t4});
  ScalingPlan plan = planner.Plan({{},
                                   {Gang(2, 1, v1::PLACEMENT_STRATEGY_SPREAD, "T4"),
                                    Gang(3, 1, v1::PLACEMENT_STRATEGY_PACK, "A10G", /*count=*/2)},
                                   0});
  // 2 T4 bundles on 1-GPU nodes; 2 x 3 A10G GPUs packed on 4-GPU nodes.
  EXPECT_THAT(ScaleUps(plan), ElementsAre(std::pair<std::string, uint32_t>{"a10g", 2},
                                          std::pair<std::string, uint32_t>{"t4", 2}));
}

TEST(ScalingPlannerTest, MaxNodesCapsGrowthAndIsReported) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 1);
  ScalingPlanner planner({a10g});
  ScalingPlan plan = planner.Plan({{}, {Gang(2, 4, v1::PLACEMENT_STRATEGY_STRICT_SPREAD)}, 0});
  EXPECT_THAT(ScaleUps(plan), IsEmpty());
  ASSERT_EQ(plan.unsatisfiable.size(), 1u);
  EXPECT_THAT(plan.unsatisfiable[0].reason(),
              HasSubstr("pool a10g could hold it but is at max_nodes (1)"));
}

TEST(ScalingPlannerTest, InfeasibleGangsAddNothingAndAreReported) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 8), t4 = Pool("t4", "T4", 1, 8);
  ScalingPlanner planner({a10g, t4});
  ScalingPlan plan =
      planner.Plan({{},
                    {Gang(1, 16, v1::PLACEMENT_STRATEGY_PACK),          // no 16-GPU nodes
                     Gang(1, 1, v1::PLACEMENT_STRATEGY_PACK, "H100")},  // no H100 pool
                    0});
  EXPECT_THAT(ScaleUps(plan), IsEmpty());
  ASSERT_EQ(plan.unsatisfiable.size(), 2u);
  EXPECT_THAT(plan.unsatisfiable[0].reason(), HasSubstr("no node pool"));
  EXPECT_EQ(plan.unsatisfiable[1].shape(0).resources().amounts().at("accelerator_type:H100"),
            0.001);
}

TEST(ScalingPlannerTest, SelectorsOnPoolLabelsAreHonoured) {
  NodePool spot = Pool("spot", "A10G", 4, 8), reserved = Pool("reserved", "A10G", 4, 8);
  spot.labels["tier"] = "spot";
  reserved.labels["tier"] = "reserved";
  ScalingPlanner planner({spot, reserved});
  v1::PendingDemand d = Gang(1, 4, v1::PLACEMENT_STRATEGY_PACK);
  v1::LabelSelectorRequirement* r = d.mutable_shape(0)->mutable_selector()->add_requirements();
  r->set_key("tier");
  r->set_op(v1::LABEL_OPERATOR_NOT_IN);
  r->add_values("spot");
  EXPECT_THAT(ScaleUps(planner.Plan({{}, {d}, 0})),
              ElementsAre(std::pair<std::string, uint32_t>{"reserved", 1}));
}

TEST(ScalingPlannerTest, MinNodesAreStarted) {
  ScalingPlanner planner({Pool("cpu", "", 0, 4, /*min_nodes=*/2)});
  ScalingPlan plan = planner.Plan({{}, {}, 0});
  EXPECT_THAT(ScaleUps(plan), ElementsAre(std::pair<std::string, uint32_t>{"cpu", 2}));
  EXPECT_THAT(plan.actions[0].reason(), HasSubstr("min_nodes"));
}

TEST(ScalingPlannerTest, IdleNodesAreDrainedThenRemovedDownToMinNodes) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 8, /*min_nodes=*/1);
  ScalingPlanner planner({a10g});
  const std::vector<v1::NodeInfo> nodes = {Node("a-1", a10g), Node("a-2", a10g),
                                           Node("a-3", a10g, 2)};
  EXPECT_THAT(planner.Plan({nodes, {}, 0}).actions, IsEmpty());       // idle from now
  EXPECT_THAT(planner.Plan({nodes, {}, 59'000}).actions, IsEmpty());  // not yet
  ScalingPlan plan = planner.Plan({nodes, {}, 60'000});
  // a-3 is busy; of the idle two only one may go (min 1 counts a-3 too).
  ASSERT_EQ(plan.actions.size(), 1u);
  EXPECT_EQ(plan.actions[0].kind(), v1::AUTOSCALER_ACTION_KIND_DRAIN);
  EXPECT_THAT(plan.actions[0].node_ids(), ElementsAre("a-1", "a-2"));
  EXPECT_EQ(plan.actions[0].target_nodes(), 1u);

  // Drained by the autoscaler and empty: removed, once.
  std::vector<v1::NodeInfo> drained = nodes;
  for (int i : {0, 1}) {
    drained[i].set_state(v1::NODE_STATE_DRAINING);
    drained[i].set_drain_reason(plan.actions[0].reason());
  }
  plan = planner.Plan({drained, {}, 61'000});
  ASSERT_EQ(plan.actions.size(), 1u);
  EXPECT_EQ(plan.actions[0].kind(), v1::AUTOSCALER_ACTION_KIND_REMOVE);
  EXPECT_THAT(plan.actions[0].node_ids(), ElementsAre("a-1", "a-2"));
  EXPECT_EQ(plan.actions[0].target_nodes(), 1u);
  EXPECT_THAT(planner.Plan({drained, {}, 62'000}).actions, IsEmpty());
}

TEST(ScalingPlannerTest, MinNodesKeepsIdleNodes) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 8, /*min_nodes=*/3);
  ScalingPlanner planner({a10g});
  const std::vector<v1::NodeInfo> nodes = {Node("a-1", a10g), Node("a-2", a10g), Node("a-3", a10g)};
  planner.Plan({nodes, {}, 0});
  // The cluster has no room at min_nodes 3 for a drain.
  EXPECT_THAT(planner.Plan({nodes, {}, 600'000}).actions, IsEmpty());
}

TEST(ScalingPlannerTest, AnIdleNodeThatPendingDemandWillUseStays) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 8);
  ScalingPlanner planner({a10g});
  const std::vector<v1::NodeInfo> nodes = {Node("a-1", a10g)};
  const std::vector<v1::PendingDemand> demand = {Gang(1, 2, v1::PLACEMENT_STRATEGY_PACK)};
  planner.Plan({nodes, demand, 0});
  EXPECT_THAT(planner.Plan({nodes, demand, 600'000}).actions, IsEmpty());
}

TEST(ScalingPlannerTest, NodesOfOtherPoolsOrDrainedByOperatorsAreLeftAlone) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 8);
  ScalingPlanner planner({a10g});
  v1::NodeInfo manual = Node("m-1", a10g);
  manual.set_state(v1::NODE_STATE_DRAINING);
  manual.set_drain_reason("maintenance");
  v1::NodeInfo foreign = Node("f-1", Pool("other", "A10G", 4, 8));
  planner.Plan({{manual, foreign}, {}, 0});
  EXPECT_THAT(planner.Plan({{manual, foreign}, {}, 600'000}).actions, IsEmpty());
}

TEST(ScalingPlannerTest, ANodeTheHeadDrainedAsUnhealthyIsReplacedOnceEmpty) {
  const NodePool a10g = Pool("a10g", "A10G", 4, 8, /*min_nodes=*/2);
  ScalingPlanner planner({a10g});
  v1::NodeInfo sick = Node("a-1", a10g, 2);  // its job has not moved yet
  sick.set_state(v1::NODE_STATE_DRAINING);
  sick.set_drain_reason("unhealthy: health check failed: NHC: /scratch not mounted (exit 1)");
  const v1::NodeInfo healthy = Node("a-2", a10g);
  EXPECT_THAT(planner.Plan({{sick, healthy}, {}, 0}).actions, IsEmpty());
  sick = Node("a-1", a10g);
  sick.set_state(v1::NODE_STATE_DRAINING);
  sick.set_drain_reason("unhealthy: 2 GPUs unhealthy (more than 1)");
  ScalingPlan plan = planner.Plan({{sick, healthy}, {}, 1'000});
  ASSERT_EQ(plan.actions.size(), 1u);
  EXPECT_EQ(plan.actions[0].kind(), v1::AUTOSCALER_ACTION_KIND_REMOVE);
  EXPECT_THAT(plan.actions[0].node_ids(), ElementsAre("a-1"));
  // Gone, it is replaced: here for min_nodes (pending demand would do too).
  plan = planner.Plan({{healthy}, {}, 2'000});
  ASSERT_EQ(plan.actions.size(), 1u);
  EXPECT_EQ(plan.actions[0].kind(), v1::AUTOSCALER_ACTION_KIND_SCALE_UP);
  EXPECT_EQ(plan.actions[0].target_nodes(), 2u);
}

TEST(ScalingPlannerTest, AFailedScaleUpIsAskedAgain) {
  const NodePool h100 = Pool("h100", "H100", 8, 2);
  ScalingPlanner planner({h100});
  const std::vector<v1::PendingDemand> demand = {Gang(1, 8, v1::PLACEMENT_STRATEGY_PACK)};
  ScalingPlan plan = planner.Plan({{}, demand, 0});
  ASSERT_EQ(ScaleUps(plan).size(), 1u);
  planner.OnActionFailed(plan.actions[0]);
  EXPECT_THAT(ScaleUps(planner.Plan({{}, demand, 1000})),
              ElementsAre(std::pair<std::string, uint32_t>{"h100", 1}));
}

TEST(ScalingPlannerTest, AScaleUpThatNeverArrivesIsRetriedAfterTheLaunchTimeout) {
  NodePool h100 = Pool("h100", "H100", 8, 2);
  h100.launch_timeout_ms = 10'000;
  ScalingPlanner planner({h100});
  const std::vector<v1::PendingDemand> demand = {Gang(1, 8, v1::PLACEMENT_STRATEGY_PACK)};
  EXPECT_EQ(ScaleUps(planner.Plan({{}, demand, 0})).size(), 1u);
  EXPECT_THAT(ScaleUps(planner.Plan({{}, demand, 5'000})), IsEmpty());
  EXPECT_EQ(ScaleUps(planner.Plan({{}, demand, 10'000})).size(), 1u);
}

}  // namespace
}  // namespace berth
