// NodeClasses: nodes grouped by pool and free state, in step with the table.
#include "placement/node_classes.h"

#include <set>

#include "gtest/gtest.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using testing::MakeNode;

// The members of every class, as sets of node ids.
std::set<std::set<NodeIndex>> Partition(const NodeClasses& classes) {
  std::set<std::set<NodeIndex>> parts;
  for (uint32_t id = 0; id < classes.id_limit(); ++id) {
    const NodeClasses::Class& c = classes.get(id);
    if (c.serial != 0) parts.insert(std::set<NodeIndex>(c.members.begin(), c.members.end()));
  }
  return parts;
}

TEST(NodeClassesTest, GroupsNodesByPoolAndFreeState) {
  NodeResourceTable table;
  for (const char* id : {"t0", "t1", "t2"})
    ASSERT_TRUE(table.AddNode(MakeNode(id, 16, 2, "T4")).ok());
  ASSERT_TRUE(table.AddNode(MakeNode("a0", 16, 2, "A10G")).ok());
  NodeClasses classes;
  classes.Sync(table);
  EXPECT_EQ(Partition(classes), (std::set<std::set<NodeIndex>>{{0, 1, 2}, {3}}));

  // t0 takes half of instance 0. t1 ends with half of instance 1 taken
  // (and instance 0 free): the same free shares in another order.
  ASSERT_TRUE(table.Allocate(0, ResourceSet::Of({{kGpu, 0.5}})).ok());
  Allocation whole = table.Allocate(1, ResourceSet::Of({{kGpu, 1}})).value();
  ASSERT_TRUE(table.Allocate(1, ResourceSet::Of({{kGpu, 0.5}})).ok());
  ASSERT_TRUE(table.Release(whole).ok());
  ASSERT_NE(table.node(0).gpus.free(0), table.node(1).gpus.free(0));
  classes.Sync(table);
  EXPECT_EQ(Partition(classes), (std::set<std::set<NodeIndex>>{{0, 1}, {2}, {3}}));
  EXPECT_EQ(classes.size(), 3u);
}

TEST(NodeClassesTest, FollowsStateChangesAndRenewsSerials) {
  NodeResourceTable table;
  ASSERT_TRUE(table.AddNode(MakeNode("n0", 16, 1)).ok());
  ASSERT_TRUE(table.AddNode(MakeNode("n1", 16, 1)).ok());
  NodeClasses classes;
  classes.Sync(table);
  const uint64_t idle_serial = classes.get(0).serial;

  Allocation a = table.Allocate(1, ResourceSet::Of({{kCpu, 4}})).value();
  ASSERT_TRUE(table.SetNodeState("n0", NodeState::kDraining).ok());
  classes.Sync(table);
  EXPECT_EQ(Partition(classes), (std::set<std::set<NodeIndex>>{{1}}));  // n0 is not ALIVE

  // Back to idle: a class opens again, under a new serial.
  ASSERT_TRUE(table.Release(a).ok());
  ASSERT_TRUE(table.SetNodeState("n0", NodeState::kAlive).ok());
  classes.Sync(table);
  EXPECT_EQ(Partition(classes), (std::set<std::set<NodeIndex>>{{0, 1}}));
  EXPECT_GT(classes.last_serial(), idle_serial);

  ASSERT_TRUE(table.RemoveNode("n1").ok());
  classes.Sync(table);
  EXPECT_EQ(Partition(classes), (std::set<std::set<NodeIndex>>{{0}}));
}

TEST(NodeClassesTest, StartsOverForAnotherTable) {
  NodeResourceTable a;
  ASSERT_TRUE(a.AddNode(MakeNode("n0", 16, 1)).ok());
  ASSERT_TRUE(a.AddNode(MakeNode("n1", 8, 1)).ok());
  NodeResourceTable b;
  ASSERT_TRUE(b.AddNode(MakeNode("m0", 16, 1)).ok());
  NodeClasses classes;
  classes.Sync(a);
  EXPECT_EQ(classes.size(), 2u);
  classes.Sync(b);
  EXPECT_EQ(Partition(classes), (std::set<std::set<NodeIndex>>{{0}}));
}

}  // namespace
}  // namespace berth
