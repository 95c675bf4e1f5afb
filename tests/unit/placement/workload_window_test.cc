// WorkloadWindow: what counts as a task, the window's bounds, and drift.
#include "placement/workload_window.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using testing::MakeBundle;
using testing::MakeGroup;
using testing::Repeat;

PlacementGroupSpec OneGpuTask(double cpu, double gpu, const std::string& selector = "") {
  return MakeGroup({MakeBundle(ResourceSet::Of({{kCpu, cpu}, {kGpu, gpu}}), selector)},
                   PlacementStrategy::kPack);
}

TEST(WorkloadWindowTest, APackGroupIsOneTaskOfItsSum) {
  WorkloadWindow window;
  window.Add(MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kCpu, 2}, {kGpu, 1}})), 4),
                       PlacementStrategy::kStrictPack));
  window.Add(MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kCpu, 2}, {kGpu, 1}})), 4),
                       PlacementStrategy::kPack));
  const std::vector<TaskShape> shapes = window.Shapes();
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0].gpu, Quantity::Whole(4));
  EXPECT_EQ(shapes[0].cpu, Quantity::Whole(8));
  EXPECT_EQ(shapes[0].weight, 2);
  EXPECT_EQ(window.size(), 2u);
}

TEST(WorkloadWindowTest, SpreadBundlesAndPackGroupsOfNoWholeSumAreTasksEach) {
  WorkloadWindow window;
  window.Add(MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}})), 3),
                       PlacementStrategy::kStrictSpread));
  // 1.5 GPUs is no task shape: two tasks of 0.75.
  window.Add(
      MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 0.75}})), 2), PlacementStrategy::kPack));
  const std::vector<TaskShape> shapes = window.Shapes();
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].gpu, Quantity::FromUnits(7500));
  EXPECT_EQ(shapes[0].weight, 2);
  EXPECT_EQ(shapes[1].gpu, Quantity::Whole(1));
  EXPECT_EQ(shapes[1].weight, 3);
}

TEST(WorkloadWindowTest, LeavesOutTasksWithoutGpus) {
  WorkloadWindow window;
  window.Add(MakeGroup({MakeBundle(ResourceSet::Of({{kCpu, 4}}))}, PlacementStrategy::kPack));
  window.Add(
      MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kCpu, 4}})), 2), PlacementStrategy::kSpread));
  EXPECT_EQ(window.size(), 0u);
  EXPECT_EQ(window.added(), 0u);
}

TEST(WorkloadWindowTest, IntersectsTheAcceleratorTypesOfResourcesAndSelectors) {
  WorkloadWindow window;
  ResourceSet pinned = ResourceSet::Of({{kGpu, 1}});
  pinned.Set("accelerator_type:T4", Quantity::Whole(1));
  window.Add(MakeGroup({MakeBundle(pinned, "berth.io/accelerator-type in (A10G, T4)")},
                       PlacementStrategy::kPack));
  window.Add(OneGpuTask(1, 1, "berth.io/accelerator-type in (V100, A10G)"));
  const std::vector<TaskShape> shapes = window.Shapes();
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_THAT(shapes[0].accelerator_types, ElementsAre("T4"));  // no CPU: first
  EXPECT_THAT(shapes[1].accelerator_types, ElementsAre("A10G", "V100"));
}

TEST(WorkloadWindowTest, KeepsTheMostRecentTasks) {
  WorkloadWindowOptions options;
  options.capacity = 3;
  WorkloadWindow window(options);
  for (double gpu : {0.5, 0.5, 1.0, 1.0}) window.Add(OneGpuTask(1, gpu));
  const std::vector<TaskShape> shapes = window.Shapes();
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].weight, 1);  // one of the two halves left the window
  EXPECT_EQ(shapes[1].weight, 2);
  EXPECT_EQ(window.size(), 3u);
  EXPECT_EQ(window.added(), 4u);
  // The last half leaves too: its shape goes.
  window.Add(OneGpuTask(1, 1));
  EXPECT_EQ(window.shape_count(), 1u);
}

// What a head keeps across a restart: restored, the window is the same
// (shapes, order of leaving, count ever seen); a smaller window keeps the
// newest; a bad record changes nothing.
TEST(WorkloadWindowTest, ExportsAndRestoresItsTasksInOrder) {
  WorkloadWindow window;
  for (double gpu : {0.5, 1.0, 0.5, 0.25}) window.Add(OneGpuTask(1, gpu));
  window.Add(OneGpuTask(2, 1, "berth.io/accelerator-type in (T4,A10G)"));
  const WorkloadWindow::Contents contents = window.Export();
  ASSERT_EQ(contents.tasks.size(), 5u);
  EXPECT_EQ(contents.added, 5u);

  WorkloadWindow restored;
  ASSERT_TRUE(restored.Restore(contents).ok());
  EXPECT_EQ(restored.size(), 5u);
  EXPECT_EQ(restored.added(), 5u);
  EXPECT_EQ(restored.DistanceFrom(window.Take()), 0);
  const std::vector<TaskShape> shapes = restored.Shapes();
  ASSERT_EQ(shapes.size(), 4u);
  EXPECT_THAT(shapes.back().accelerator_types, ElementsAre("A10G", "T4"));

  WorkloadWindowOptions small;
  small.capacity = 2;
  WorkloadWindow newest(small);
  ASSERT_TRUE(newest.Restore(contents).ok());
  EXPECT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest.added(), 5u);
  EXPECT_EQ(newest.shape_count(), 2u);  // the quarter and the T4/A10G task

  WorkloadWindow::Contents bad = contents;
  bad.tasks.push_back(9);
  absl::Status s = restored.Restore(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("tasks[5]"));
  EXPECT_EQ(restored.size(), 5u);  // unchanged
}

TEST(WorkloadWindowTest, TracksAtMostMaxShapes) {
  WorkloadWindowOptions options;
  options.max_shapes = 2;
  WorkloadWindow window(options);
  for (double cpu : {1, 2, 3, 1}) window.Add(OneGpuTask(cpu, 1));
  EXPECT_EQ(window.shape_count(), 2u);
  EXPECT_EQ(window.size(), 3u);  // the 3-CPU task was not recorded
}

TEST(WorkloadWindowTest, DistanceIsTheShareOfTasksThatChangedShape) {
  WorkloadWindow window;
  const WorkloadWindow::Snapshot empty = window.Take();
  EXPECT_EQ(window.DistanceFrom(empty), 0);
  window.Add(OneGpuTask(1, 1));
  window.Add(OneGpuTask(1, 1));
  EXPECT_EQ(window.DistanceFrom(empty), 1);
  const WorkloadWindow::Snapshot ones = window.Take();
  EXPECT_EQ(window.DistanceFrom(ones), 0);
  window.Add(OneGpuTask(1, 0.5));
  window.Add(OneGpuTask(1, 0.5));
  // Half the tasks are now of another shape.
  EXPECT_DOUBLE_EQ(window.DistanceFrom(ones), 0.5);
}

}  // namespace
}  // namespace berth
