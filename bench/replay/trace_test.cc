// The trace parser on small inline CSVs, and tasks turned into groups.
#include "bench/replay/trace.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace berth::replay {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kNodes[] =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "openb-node-0000,32000,262144,0,\n"
    "openb-node-0001,96000,786432,8,G2\r\n";

constexpr char kTasks[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "pod-0,6000,12288,1,460,,LS,Running,10,500,12\n"
    "pod-1,88000,327680,8,1000,V100M32|G2|V100M32,Burstable,Succeeded,20,900,\n"
    "pod-2,4000,8192,0,0,,BE,Failed,30,40,31\n";

TEST(ParseNodeList, ReadsEveryColumn) {
  absl::StatusOr<std::vector<TraceNode>> nodes = ParseNodeList(kNodes);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "openb-node-0000");
  EXPECT_EQ((*nodes)[0].gpus, 0);
  EXPECT_EQ((*nodes)[0].model, "");
  EXPECT_EQ((*nodes)[1].cpu_milli, 96000);
  EXPECT_EQ((*nodes)[1].memory_mib, 786432);
  EXPECT_EQ((*nodes)[1].gpus, 8);
  EXPECT_EQ((*nodes)[1].model, "G2");
}

TEST(ParseNodeList, NamesTheBadField) {
  absl::StatusOr<std::vector<TraceNode>> nodes =
      ParseNodeList("sn,cpu_milli,memory_mib,gpu,model\nn0,32000,lots,0,\n");
  ASSERT_FALSE(nodes.ok());
  EXPECT_EQ(nodes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(nodes.status().message(), HasSubstr("line 2, column memory_mib"));
  EXPECT_THAT(ParseNodeList("sn,cpu_milli,gpu,model\n").status().message(),
              HasSubstr("no column 'memory_mib'"));
  EXPECT_THAT(ParseNodeList("sn,cpu_milli,memory_mib,gpu,model\nn0,1,2,4,\n").status().message(),
              HasSubstr("no model"));
}

TEST(ParseTaskList, ReadsTasksAndNormalisesModels) {
  absl::StatusOr<TaskList> list = ParseTaskList(kTasks);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->has_models);
  EXPECT_TRUE(list->has_times);
  EXPECT_THAT(list->absent, IsEmpty());
  const std::vector<TraceTask>* tasks = &list->tasks;
  ASSERT_EQ(tasks->size(), 3u);
  const TraceTask& shared = (*tasks)[0];
  EXPECT_EQ(shared.GpuMilli(), 460);
  EXPECT_EQ(shared.creation_time, 10);
  EXPECT_EQ(shared.scheduled_time, 12);
  EXPECT_EQ(shared.deletion_time, 500);
  const TraceTask& eight = (*tasks)[1];
  EXPECT_EQ(eight.GpuMilli(), 8000);
  EXPECT_THAT(eight.gpu_spec, ElementsAre("G2", "V100M32"));
  EXPECT_FALSE(eight.scheduled_time.has_value());
  EXPECT_EQ((*tasks)[2].GpuMilli(), 0);
}

// multigpu20's five columns: any model, no times (measure (a) only).
TEST(ParseTaskList, ReadsAVariantWithoutModelsOrTimes) {
  absl::StatusOr<TaskList> list = ParseTaskList(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "openb-pod-0000,12000,16384,1,1000\n"
      "openb-pod-0001,6000,12288,4,1000\n");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_FALSE(list->has_models);
  EXPECT_FALSE(list->has_times);
  EXPECT_THAT(list->absent, ElementsAre("gpu_spec", "creation_time", "deletion_time"));
  ASSERT_EQ(list->tasks.size(), 2u);
  EXPECT_EQ(list->tasks[1].GpuMilli(), 4000);
  EXPECT_THAT(list->tasks[1].gpu_spec, IsEmpty());
  EXPECT_TRUE(
      ToPlacementGroup(list->tasks[1], TaskShaping::kOneBundle)->bundles()[0].selector.empty());
  // The five are required still.
  EXPECT_THAT(ParseTaskList("name,cpu_milli,memory_mib,num_gpu\n").status().message(),
              HasSubstr("no column 'gpu_milli'"));
}

TEST(ParseTaskList, RejectsMalformedRows) {
  const std::string header =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time,"
      "scheduled_time\n";
  EXPECT_THAT(ParseTaskList(header + "p,1,1,1,1500,,0,1,0\n").status().message(),
              HasSubstr("gpu_milli 1500"));
  EXPECT_THAT(ParseTaskList(header + "p,1,1,1,500,,0,1\n").status().message(),
              HasSubstr("line 2: 8 fields"));
  EXPECT_THAT(ParseTaskList(header + "p,-1,1,1,500,,0,1,0\n").status().message(),
              HasSubstr("column cpu_milli"));
}

TEST(ToPlacementGroup, SharesOneGpuAndSelectsModels) {
  std::vector<TraceTask> tasks = ParseTaskList(kTasks).value().tasks;
  PlacementGroupSpec shared = ToPlacementGroup(tasks[0], TaskShaping::kOneBundle).value();
  ASSERT_EQ(shared.bundles().size(), 1u);
  EXPECT_EQ(shared.bundles()[0].resources.Get(kGpu), Quantity::FromUnits(4600));
  EXPECT_EQ(shared.bundles()[0].resources.Get(kCpu), Quantity::Whole(6));
  EXPECT_EQ(shared.bundles()[0].resources.Get(kMemory), Quantity::Whole(int64_t{12288} << 20));
  EXPECT_TRUE(shared.bundles()[0].selector.empty());

  PlacementGroupSpec eight = ToPlacementGroup(tasks[1], TaskShaping::kOneBundle).value();
  ASSERT_EQ(eight.bundles().size(), 1u);
  EXPECT_EQ(eight.bundles()[0].resources.Get(kGpu), Quantity::Whole(8));
  EXPECT_EQ(eight.bundles()[0].selector.ToString(), "berth.io/accelerator-type in (G2,V100M32)");
}

TEST(ToPlacementGroup, GangSplitsIntoOneGpuBundles) {
  std::vector<TraceTask> tasks = ParseTaskList(kTasks).value().tasks;
  PlacementGroupSpec gang = ToPlacementGroup(tasks[1], TaskShaping::kGangStrictPack).value();
  EXPECT_EQ(gang.strategy(), PlacementStrategy::kStrictPack);
  ASSERT_EQ(gang.bundles().size(), 8u);
  for (const Bundle& b : gang.bundles()) EXPECT_EQ(b.resources.Get(kGpu), Quantity::Whole(1));
  EXPECT_EQ(gang.total().Get(kCpu), Quantity::Whole(88));
  EXPECT_EQ(ToPlacementGroup(tasks[1], TaskShaping::kGangPack)->strategy(),
            PlacementStrategy::kPack);
  // A single-GPU task stays one bundle in a gang shaping.
  EXPECT_EQ(ToPlacementGroup(tasks[0], TaskShaping::kGangPack)->bundles().size(), 1u);
  // The rack shapings keep a gang's ranks in one rack; a one-bundle task has no topology.
  PlacementGroupSpec racked = ToPlacementGroup(tasks[1], TaskShaping::kGangRackRequired).value();
  EXPECT_EQ(racked.bundles().size(), 8u);
  EXPECT_EQ(racked.topology().required, kRackLabel);
  EXPECT_EQ(ToPlacementGroup(tasks[1], TaskShaping::kGangRackPreferred)->topology().preferred,
            std::vector<std::string>{kRackLabel});
  EXPECT_TRUE(ToPlacementGroup(tasks[0], TaskShaping::kGangRackRequired)->topology().empty());
}

TEST(GpuTaskShapes, CountsDistinctGpuTasks) {
  std::vector<TraceTask> tasks = ParseTaskList(kTasks).value().tasks;
  tasks.push_back(tasks[0]);
  std::vector<TaskShape> shapes = GpuTaskShapes(tasks);
  ASSERT_EQ(shapes.size(), 2u);  // the CPU-only task is left out
  EXPECT_EQ(shapes[0].gpu, Quantity::FromUnits(4600));
  EXPECT_EQ(shapes[0].weight, 2);
  EXPECT_EQ(shapes[1].gpu, Quantity::Whole(8));
  EXPECT_THAT(shapes[1].accelerator_types, ElementsAre("G2", "V100M32"));
}

TEST(ToNodeSpec, GpuNodesCarryTheirModel) {
  std::vector<TraceNode> nodes = ParseNodeList(kNodes).value();
  NodeSpec cpu = ToNodeSpec(nodes[0]);
  EXPECT_EQ(cpu.resources.Get(kGpu), Quantity());
  EXPECT_EQ(cpu.accelerator_type, "");
  NodeSpec gpu = ToNodeSpec(nodes[1]);
  EXPECT_EQ(gpu.resources.Get(kGpu), Quantity::Whole(8));
  EXPECT_EQ(gpu.resources.Get(kCpu), Quantity::Whole(96));
  EXPECT_EQ(gpu.accelerator_type, "G2");
}

}  // namespace
}  // namespace berth::replay
