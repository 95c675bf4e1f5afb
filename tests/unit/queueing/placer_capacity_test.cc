#include "queueing/placer_capacity.h"

#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "queueing/queue_scheduler.h"
#include "tests/unit/placement_test_util.h"
#include "tests/unit/queueing/pool_capacity_test_util.h"

namespace berth {
namespace {

std::string Text(const PlacementReasonPtr& why) {
  return why == nullptr ? "(none)" : PlacementReasonText(*why);
}

using testing::MakeBundle;
using testing::MakeGroup;
using testing::MakeNode;
using testing::Repeat;
using testing::Victims;

PlacementGroupSpec Gang(int gpus) {
  return MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})), gpus),
                   PlacementStrategy::kStrictPack);
}

// PlacerCapacity as these tests name gangs: by id. It keeps the record of
// a gang added here until Submit hands it to the queue scheduler, and then
// finds it there.
class Placer : public PlacerCapacity {
 public:
  using PlacerCapacity::PlacerCapacity;

  std::shared_ptr<const PlacementGroupSpec> Add(const std::string& id,
                                                std::shared_ptr<const PlacementGroupSpec> spec) {
    std::unique_ptr<CapacityModel::Gang>& record = own_[id];
    record = PlacerCapacity::Add(std::move(spec));
    return SpecOf(Ref(id));
  }
  void Add(const std::string& id, PlacementGroupSpec spec) {
    Add(id, std::make_shared<const PlacementGroupSpec>(std::move(spec)));
  }
  // Drops the record of a gang added here: it lets go of what it holds.
  void Remove(const std::string& id) { own_.erase(id); }
  // Hands the record of `id` to `scheduler`.
  absl::Status Submit(QueueScheduler& scheduler, GangRequest request, int64_t now_ms) {
    scheduler_ = &scheduler;
    std::unique_ptr<CapacityModel::Gang> record;
    if (auto it = own_.find(request.id); it != own_.end()) {
      record = std::move(it->second);
      own_.erase(it);
    }
    return scheduler.Submit(std::move(request), now_ms, std::move(record));
  }
  GangRef Ref(const std::string& id) const {
    if (auto it = own_.find(id); it != own_.end()) return {&it->first, it->second.get()};
    return scheduler_ != nullptr ? scheduler_->Ref(id) : GangRef{&id, nullptr};
  }

  std::optional<ResourceSet> Place(const std::string& id, PlacementReasonPtr* why) {
    return PlacerCapacity::Place(Ref(id), why);
  }
  std::optional<ResourceSet> PlaceAvoiding(const std::string& id,
                                           const std::vector<uint64_t>& avoid) {
    return PlacerCapacity::PlaceAvoiding(Ref(id), avoid);
  }
  RemainderPlacement PlaceRemainder(const std::string& id) {
    return PlacerCapacity::PlaceRemainder(Ref(id));
  }
  void Release(const std::string& id) { PlacerCapacity::Release(Ref(id)); }
  void ReleaseBundles(const std::string& id, const std::vector<uint32_t>& bundles) {
    PlacerCapacity::ReleaseBundles(Ref(id), bundles);
  }
  absl::Span<const BundlePlacement> Held(const std::string& id) const {
    return PlacerCapacity::Held(Ref(id));
  }
  ResourceSet Charge(const std::string& id) const { return PlacerCapacity::Charge(Ref(id)); }
  bool Infeasible(const std::string& id) const { return PlacerCapacity::Infeasible(Ref(id)); }
  bool FitsWithout(const std::string& id, const std::vector<std::string>& freed) {
    std::vector<GangRef> refs;
    for (const std::string& f : freed) refs.push_back(Ref(f));
    return PlacerCapacity::FitsWithout(Ref(id), refs);
  }
  std::optional<std::vector<uint64_t>> PlacesWhenIdle(const std::string& id) {
    return PlacerCapacity::PlacesWhenIdle(Ref(id));
  }
  std::vector<uint64_t> PlacesOf(const std::string& id) const {
    return PlacerCapacity::PlacesOf(Ref(id));
  }
  bool CouldHold(const std::string& id, uint64_t place) const {
    return PlacerCapacity::CouldHold(Ref(id), place);
  }
  bool FitsFewPlaces(const std::string& id) const { return PlacerCapacity::FitsFewPlaces(Ref(id)); }
  bool HoldsPlacesSparedFor(const std::string& holder, const std::string& id) const {
    return PlacerCapacity::HoldsPlacesSparedFor(Ref(holder), Ref(id));
  }

 private:
  std::map<std::string, std::unique_ptr<CapacityModel::Gang>> own_;
  const QueueScheduler* scheduler_ = nullptr;
};

class PlacerCapacityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(table_.AddNode(MakeNode("a10g-0", 16, 8, "A10G")).ok());
    ASSERT_TRUE(table_.AddNode(MakeNode("h100-0", 16, 8, "H100")).ok());
  }
  NodeResourceTable table_;
  Placer capacity_{&table_, nullptr};
};

TEST_F(PlacerCapacityTest, AChargeCountsTheGpusOfEachAcceleratorType) {
  capacity_.Add("g", Gang(8));
  PlacementReasonPtr why;
  std::optional<ResourceSet> charge = capacity_.Place("g", &why);
  ASSERT_TRUE(charge.has_value()) << Text(why);
  EXPECT_EQ(charge->Get(kGpu), Quantity::Whole(8));
  EXPECT_EQ(charge->Get("GPU:A10G").units() + charge->Get("GPU:H100").units(),
            Quantity::Whole(8).units());  // STRICT_PACK: all on one of them
  EXPECT_EQ(capacity_.Held("g").size(), 8u);
  const ResourceSet totals = capacity_.Capacity();
  EXPECT_EQ(totals.Get(kGpu), Quantity::Whole(16));
  EXPECT_EQ(totals.Get("GPU:H100"), Quantity::Whole(8));
}

// Gangs of equal specs share one; a spec that differs only in its topology
// is its own. The shared spec lives while any gang of its shape does.
TEST_F(PlacerCapacityTest, GangsOfEqualSpecsShareOne) {
  auto first = std::make_shared<const PlacementGroupSpec>(Gang(2));
  EXPECT_EQ(capacity_.Add("a", first), first);
  EXPECT_EQ(capacity_.Add("b", std::make_shared<const PlacementGroupSpec>(Gang(2))), first);
  const PlacementGroupSpec two = Gang(2);
  const auto racked = std::make_shared<const PlacementGroupSpec>(
      PlacementGroupSpec::Create({two.bundles().begin(), two.bundles().end()},
                                 PlacementStrategy::kStrictPack, Topology{"rack", {}})
          .value());
  EXPECT_EQ(capacity_.Add("c", racked), racked);
  const std::weak_ptr<const PlacementGroupSpec> shared = first;
  first.reset();
  capacity_.Remove("a");
  EXPECT_FALSE(shared.expired());  // b's
  capacity_.Remove("b");
  capacity_.Remove("c");  // of the same shape, but for its topology
  EXPECT_TRUE(shared.expired());
}

TEST_F(PlacerCapacityTest, TheRemainderIsPlacedBesideWhatTheGangKeeps) {
  capacity_.Add("g", Gang(4));
  PlacementReasonPtr why;
  ASSERT_TRUE(capacity_.Place("g", &why)) << Text(why);
  const NodeIndex node = capacity_.Held("g").front().allocation.node;
  capacity_.ReleaseBundles("g", {1, 3});
  ASSERT_EQ(capacity_.Held("g").size(), 2u);
  RemainderPlacement d = capacity_.PlaceRemainder("g");
  ASSERT_EQ(d.outcome, PlacementOutcome::kPlaced) << Text(d.reason);
  // Only the two it lacked were placed, on its node (STRICT_PACK), and it
  // holds all four again.
  ASSERT_EQ(d.placed.size(), 2u);
  EXPECT_EQ(d.placed[0].bundle_index, 1u);
  EXPECT_EQ(d.placed[1].bundle_index, 3u);
  for (const BundlePlacement& p : d.placed) EXPECT_EQ(p.allocation.node, node);
  EXPECT_TRUE(d.let_go.empty());
  EXPECT_EQ(capacity_.Held("g").size(), 4u);
  EXPECT_EQ(capacity_.Charge("g").Get(kGpu), Quantity::Whole(4));
  EXPECT_EQ(capacity_.PlaceRemainder("unknown").outcome, PlacementOutcome::kInfeasible);
}

TEST_F(PlacerCapacityTest, FitsWithoutLeavesTheTableExactlyAsItWas) {
  capacity_.Add("a", Gang(8));
  capacity_.Add("b", Gang(8));
  capacity_.Add("c", Gang(8));
  PlacementReasonPtr why;
  ASSERT_TRUE(capacity_.Place("a", &why));
  ASSERT_TRUE(capacity_.Place("b", &why));
  EXPECT_FALSE(capacity_.Place("c", &why).has_value());
  EXPECT_NE(why, nullptr);
  const NodeResourceTable::Node before0 = table_.node(0), before1 = table_.node(1);
  EXPECT_TRUE(capacity_.FitsWithout("c", {"a"}));
  EXPECT_FALSE(capacity_.FitsWithout("c", {}));
  for (NodeIndex i : {0, 1}) {
    const NodeResourceTable::Node& before = i == 0 ? before0 : before1;
    EXPECT_EQ(table_.node(i).available, before.available);
    for (uint32_t gpu = 0; gpu < before.gpus.count(); ++gpu)  // the same instances
      EXPECT_EQ(table_.node(i).gpus.free(gpu), before.gpus.free(gpu));
  }
  capacity_.Release("a");
  EXPECT_TRUE(capacity_.Place("c", &why).has_value()) << Text(why);
  capacity_.Remove("b");
  capacity_.Remove("c");
  EXPECT_EQ(table_.node(0).available, table_.node(0).total);
  EXPECT_EQ(table_.node(1).available, table_.node(1).total);
}

QueueSpec GpuQueue(const std::string& name, double gpus,
                   std::optional<double> borrowing_limit = std::nullopt) {
  QueueInput in;
  in.name = name;
  in.cohort = "org";
  in.nominal = {{"GPU", gpus}};
  if (borrowing_limit) in.borrowing_limit = {{"GPU", *borrowing_limit}};
  return QueueSpecFromInput(in, "queue").value();
}

// Queues a and b in the cohort "org".
QueueConfig TwoQueues(double a_gpus, double b_gpus) {
  return QueueConfig()
      .WithCohort("org")
      .value()
      .WithQueue(GpuQueue("a", a_gpus))
      .value()
      .WithQueue(GpuQueue("b", b_gpus))
      .value();
}

QueueSchedulerOptions StarvingAfter(int64_t ms) {
  QueueSchedulerOptions options;
  options.starvation_bound_ms = ms;
  return options;
}

// Nodes n0, n1, ... of 16 CPUs and 4 A10G GPUs each.
NodeResourceTable FourGpuNodes(int count) {
  NodeResourceTable table;
  for (int i = 0; i < count; ++i)
    EXPECT_TRUE(table.AddNode(MakeNode("n" + std::to_string(i), 16, 4, "A10G")).ok());
  return table;
}

// A gang's placement lives in its record in the queue scheduler: Finish
// hands the record back, which holds the gang's bundles until it is
// dropped (the head keeps it while a commit is in flight).
TEST(PlacerCapacityRecords, AFinishedGangHoldsItsBundlesUntilItsRecordIsDropped) {
  NodeResourceTable table = FourGpuNodes(1);
  Placer capacity(&table, nullptr);
  QueueScheduler scheduler(QueueConfig(), {});
  capacity.Add("g", Gang(4));
  ASSERT_TRUE(capacity.Submit(scheduler, {"g", "", 0, Gang(4).total()}, 0).ok());
  ASSERT_THAT(scheduler.Pass(0, capacity).admitted, ::testing::ElementsAre("g"));
  EXPECT_EQ(PlacerCapacity::Held(scheduler.Ref("g")).size(), 4u);
  EXPECT_TRUE(table.node(0).available.Get(kGpu).IsZero());

  std::unique_ptr<CapacityModel::Gang> record = scheduler.Finish("g");
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(scheduler.Ref("g").record, nullptr);  // the scheduler forgot it
  EXPECT_EQ(PlacerCapacity::Held({nullptr, record.get()}).size(), 4u);
  EXPECT_TRUE(table.node(0).available.Get(kGpu).IsZero());  // still held
  record.reset();
  EXPECT_EQ(table.node(0).available, table.node(0).total);
  EXPECT_EQ(scheduler.Finish("g"), nullptr);  // unknown now
}

// A gang of 4-GPU bundles, one per node, needs empty nodes: when the
// cheapest victims sit on nodes shared with gangs that may not be
// preempted, reclaim empties other nodes whole instead of giving up.
TEST(PlacerCapacityPreemption, AGangOfWholeNodesReclaimsNodesThatCanBeEmptied) {
  NodeResourceTable table = FourGpuNodes(4);
  Placer capacity(&table, nullptr);
  QueueScheduler scheduler(TwoQueues(12, 4), {});
  // One gang a pass, so that they fill n0..n3 in this order: b borrows 8
  // GPUs; a's four sit on n2 and n3, beside b's youngest.
  const std::vector<std::pair<std::string, std::string>> order = {
      {"b0", "b"}, {"b1", "b"}, {"b2", "b"}, {"b3", "b"}, {"b4", "b"}, {"b5", "b"},
      {"b6", "b"}, {"b7", "b"}, {"a0", "a"}, {"b8", "b"}, {"b9", "b"}, {"b10", "b"},
      {"a1", "a"}, {"a2", "a"}, {"a3", "a"}, {"b11", "b"}};
  int64_t now = 0;
  for (const auto& [id, queue] : order) {
    capacity.Add(id, Gang(1));
    GangRequest r{id, queue, 0, ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})};
    ASSERT_TRUE(capacity.Submit(scheduler, r, now).ok());
    ASSERT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre(id));
  }
  ASSERT_EQ(capacity.PlacesOf("a0"), std::vector<uint64_t>{2});
  ASSERT_EQ(capacity.PlacesOf("b11"), std::vector<uint64_t>{3});

  capacity.Add("big", MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 4}, {kCpu, 1}})), 2),
                                PlacementStrategy::kStrictSpread));
  ASSERT_TRUE(
      capacity.Submit(scheduler, {"big", "a", 0, ResourceSet::Of({{kGpu, 8}, {kCpu, 2}})}, now)
          .ok());
  // Within a's nominal quota, at once: the room is a's own, lent to b.
  PassResult r = scheduler.Pass(now++, capacity);
  for (const Preemption& p : r.preempted) EXPECT_EQ(p.rule, PreemptionRule::kReclaim);
  const std::vector<std::string> victims = Victims(r);
  // n0 and n1, and nothing else: b's youngest share n2 and n3 with a.
  EXPECT_THAT(victims,
              ::testing::UnorderedElementsAre("b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7"));
  for (const std::string& v : victims) {
    capacity.Release(v);
    scheduler.Preempted(v, now);
  }
  EXPECT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre("big"));
  EXPECT_EQ(capacity.PlacesOf("big"), (std::vector<uint64_t>{0, 1}));
}

// A gang that would borrow empties places only after it has waited
// empty_places_after_ms: emptying a node stops every gang on it, and gangs
// that end may make the room first. a (quota 2) runs four 1-GPU gangs,
// two on each node; its 4-GPU gang of a higher priority needs a node
// emptied, and the cheapest victim alone does not make room.
TEST(PlacerCapacityPreemption, AGangThatWouldBorrowWaitsBeforeItEmptiesPlaces) {
  NodeResourceTable table;
  for (const std::string name : {"n0", "n1"})
    ASSERT_TRUE(table.AddNode(MakeNode(name, 16, 4, "A10G", {{"name", name}})).ok());
  Placer capacity(&table, nullptr);
  QueueSchedulerOptions options;
  options.max_victims_considered = 1;
  QueueScheduler scheduler(TwoQueues(2, 6), options);
  int64_t now = 0;
  for (const std::string node : {"n0", "n0", "n1", "n1"}) {
    const std::string id = "a" + std::to_string(now);
    capacity.Add(id,
                 MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 1}}), "name=" + node)},
                           PlacementStrategy::kStrictPack));
    ASSERT_TRUE(
        capacity.Submit(scheduler, {id, "a", 0, ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})}, now)
            .ok());
    ASSERT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre(id));
  }
  capacity.Add("big", MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 4}, {kCpu, 1}}))},
                                PlacementStrategy::kStrictPack));
  ASSERT_TRUE(
      capacity.Submit(scheduler, {"big", "a", 1, ResourceSet::Of({{kGpu, 4}, {kCpu, 1}})}, now)
          .ok());
  ASSERT_FALSE(scheduler.ledger().Check("a", ResourceSet::Of({{kGpu, 4}})).within_nominal);
  EXPECT_THAT(scheduler.Pass(now, capacity).preempted, ::testing::IsEmpty());
  now += QueueSchedulerOptions().empty_places_after_ms;
  PassResult r = scheduler.Pass(now, capacity);
  for (const Preemption& p : r.preempted) EXPECT_EQ(p.rule, PreemptionRule::kPriority);
  const std::vector<std::string> victims = Victims(r);
  EXPECT_THAT(victims, ::testing::UnorderedElementsAre("a2", "a3"));  // n1, the younger ones
  for (const std::string& v : victims) {
    capacity.Release(v);
    scheduler.Preempted(v, now);
  }
  EXPECT_THAT(scheduler.Pass(now + 1, capacity).admitted, ::testing::ElementsAre("big"));
}

// Reclaim takes only what the other queue borrows, so the places it empties
// must be ones the gang's bundles fit: b borrows 8 GPUs, its youngest gangs
// sit on two small nodes (4 CPUs) and a's bundles need 24 CPUs. Emptying
// the small nodes first would use up all b borrows and make no room.
TEST(PlacerCapacityPreemption, OnlyPlacesTheGangsBundlesFitAreEmptied) {
  NodeResourceTable table;
  for (const std::string name : {"big0", "big1", "small0", "small1"}) {
    const double cpus = absl::StartsWith(name, "big") ? 32 : 4;
    ASSERT_TRUE(table.AddNode(MakeNode(name, cpus, 4, "A10G", {{"name", name}})).ok());
  }
  Placer capacity(&table, nullptr);
  QueueScheduler scheduler(TwoQueues(8, 8), {});
  int64_t now = 0;
  for (const std::string name : {"big0", "big1", "small0", "small1"}) {  // oldest first
    const std::string id = "b-" + name;
    capacity.Add(id,
                 MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 4}, {kCpu, 1}}), "name=" + name)},
                           PlacementStrategy::kStrictPack));
    ASSERT_TRUE(
        capacity.Submit(scheduler, {id, "b", 0, ResourceSet::Of({{kGpu, 4}, {kCpu, 1}})}, now)
            .ok());
    ASSERT_THAT(scheduler.Pass(now, capacity).admitted, ::testing::ElementsAre(id));
    now += 1000;
  }
  capacity.Add("big", MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 4}, {kCpu, 24}})), 2),
                                PlacementStrategy::kStrictSpread));
  ASSERT_TRUE(
      capacity.Submit(scheduler, {"big", "a", 0, ResourceSet::Of({{kGpu, 8}, {kCpu, 48}})}, now)
          .ok());
  PassResult r = scheduler.Pass(now, capacity);
  const std::vector<std::string> victims = Victims(r);
  EXPECT_THAT(victims, ::testing::UnorderedElementsAre("b-big0", "b-big1"));
  for (const std::string& v : victims) {
    capacity.Release(v);
    scheduler.Preempted(v, now);
  }
  EXPECT_THAT(scheduler.Pass(now + 1, capacity).admitted, ::testing::ElementsAre("big"));
}

// A victim on several nodes is on each of its places: b's two-node gang
// "wide" (first on n0, beside a's gang, which may not be preempted) also
// holds n1, which reclaim can empty only with it.
TEST(PlacerCapacityPreemption, AMultiNodeVictimIsOnEveryNodeItHolds) {
  NodeResourceTable table;
  for (int i = 0; i < 4; ++i) {
    const std::string name = "n" + std::to_string(i);
    ASSERT_TRUE(table.AddNode(MakeNode(name, 16, 4, "A10G", {{"name", name}})).ok());
  }
  Placer capacity(&table, nullptr);
  QueueSchedulerOptions options;
  options.max_victims_considered = 2;  // the cheapest two (b1, b2) do not make room
  QueueScheduler scheduler(TwoQueues(16, 0), options);  // all b holds is borrowed
  auto on = [](int gpus, const std::string& node) {
    return MakeBundle(ResourceSet::Of({{kGpu, static_cast<double>(gpus)}, {kCpu, 1}}),
                      "name=" + node);
  };
  const std::vector<std::tuple<std::string, std::string, PlacementGroupSpec>> running = {
      {"wide", "b", MakeGroup({on(2, "n0"), on(2, "n1")}, PlacementStrategy::kStrictSpread)},
      {"a0", "a", MakeGroup({on(2, "n0")}, PlacementStrategy::kStrictPack)},
      {"b1", "b", MakeGroup({on(2, "n1")}, PlacementStrategy::kStrictPack)},
      {"b2", "b", MakeGroup({on(4, "n2")}, PlacementStrategy::kStrictPack)},
      {"a3", "a", MakeGroup({on(4, "n3")}, PlacementStrategy::kStrictPack)}};
  int64_t now = 0;
  for (const auto& [id, queue, spec] : running) {
    capacity.Add(id, spec);
    ASSERT_TRUE(capacity.Submit(scheduler, {id, queue, 0, spec.total()}, now).ok());
    ASSERT_THAT(scheduler.Pass(now, capacity).admitted, ::testing::ElementsAre(id));
    now += 1000;
  }
  ASSERT_EQ(capacity.PlacesOf("wide"), (std::vector<uint64_t>{0, 1}));
  capacity.Add("big", MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 4}, {kCpu, 1}})), 2),
                                PlacementStrategy::kStrictSpread));
  ASSERT_TRUE(
      capacity.Submit(scheduler, {"big", "a", 0, ResourceSet::Of({{kGpu, 8}, {kCpu, 2}})}, now)
          .ok());
  PassResult r = scheduler.Pass(now, capacity);
  const std::vector<std::string> victims = Victims(r);
  EXPECT_THAT(victims, ::testing::UnorderedElementsAre("wide", "b1", "b2"));
  for (const std::string& v : victims) {
    capacity.Release(v);
    scheduler.Preempted(v, now);
  }
  EXPECT_THAT(scheduler.Pass(now + 1, capacity).admitted, ::testing::ElementsAre("big"));
  EXPECT_EQ(capacity.PlacesOf("big"), (std::vector<uint64_t>{1, 2}));
}

TEST_F(PlacerCapacityTest, CouldHoldSaysWhetherABundleFitsTheEmptyNode) {
  capacity_.Add(
      "h100-only",
      MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 8}}), "berth.io/accelerator-type=H100")},
                PlacementStrategy::kPack));
  capacity_.Add("too-big",
                MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 9}}))}, PlacementStrategy::kPack));
  EXPECT_FALSE(capacity_.CouldHold("h100-only", 0));
  EXPECT_TRUE(capacity_.CouldHold("h100-only", 1));
  EXPECT_FALSE(capacity_.CouldHold("too-big", 1));
  EXPECT_FALSE(capacity_.CouldHold("unknown", 1));
  EXPECT_FALSE(capacity_.CouldHold("h100-only", 7));  // no such node
}

// A starving gang that waits for quota its cohort lent out, and that no
// victims can make room for (every node holds a gang of its own queue),
// holds that quota and a reservation but does not stop its queue: a small
// gang behind it still reclaims what the other queue borrows.
TEST(PlacerCapacityPreemption, AStarvingGangThatCannotReclaimDoesNotStopItsQueue) {
  NodeResourceTable table = FourGpuNodes(4);
  Placer capacity(&table, nullptr);
  QueueScheduler scheduler(TwoQueues(13, 3), StarvingAfter(10));
  // Each node: one of a's gangs, three of b's (b borrows 9 GPUs).
  int64_t now = 0;
  for (int n = 0; n < 4; ++n) {
    for (int k = 0; k < 4; ++k) {
      const std::string queue = k == 0 ? "a" : "b";
      const std::string id = queue + std::to_string(n * 4 + k);
      capacity.Add(id, Gang(1));
      ASSERT_TRUE(
          capacity.Submit(scheduler, {id, queue, 0, ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})}, now)
              .ok());
      ASSERT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre(id));
    }
  }
  capacity.Add("big", MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 4}, {kCpu, 1}})), 2),
                                PlacementStrategy::kStrictSpread));
  ASSERT_TRUE(
      capacity.Submit(scheduler, {"big", "a", 0, ResourceSet::Of({{kGpu, 8}, {kCpu, 2}})}, now)
          .ok());
  capacity.Add("small", Gang(1));
  ASSERT_TRUE(
      capacity
          .Submit(scheduler, {"small", "a", 0, ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})}, now + 95)
          .ok());
  PassResult r = scheduler.Pass(now + 100, capacity);  // big has starved, small has not
  EXPECT_EQ(scheduler.Find("big")->state, GangState::kPending);
  EXPECT_EQ(scheduler.Find("big")->reason.kind, GangWait::kQuota);
  EXPECT_EQ(scheduler.Find("small")->state, GangState::kClaimed);
  ASSERT_FALSE(r.preempted.empty());
  for (const Preemption& p : r.preempted) {
    EXPECT_EQ(p.rule, PreemptionRule::kReclaim);
    EXPECT_EQ(p.victim[0], 'b');
    EXPECT_EQ(p.by, "small");
  }
}

// A starving gang within its nominal quota that waits for room holds that
// quota against the gangs behind it in its queue, not against other queues:
// another queue's gang borrows it and starts off the starving gang's
// reservation (before, the GPUs stayed idle), and the starving gang still
// starts when its room comes.
TEST(PlacerCapacityPreemption, AStarvingGangHoldsItsQuotaOnlyAgainstItsOwnQueue) {
  NodeResourceTable table;
  for (const char* name : {"n0", "n1"})
    ASSERT_TRUE(table.AddNode(MakeNode(name, 16, 8, "A10G")).ok());
  Placer capacity(&table, nullptr);
  QueueConfig config = QueueConfig()
                           .WithCohort("org")
                           .value()
                           .WithQueue(GpuQueue("a", 8, /*borrowing_limit=*/0))
                           .value()
                           .WithQueue(GpuQueue("b", 8))
                           .value();
  QueueScheduler scheduler(std::move(config), StarvingAfter(10));
  auto submit = [&](const std::string& id, const std::string& queue, int gpus,
                    PlacementStrategy strategy, bool preemptible, int64_t now) {
    capacity.Add(
        id, MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})), gpus), strategy));
    GangRequest r{id, queue, 0, ResourceSet::Of({{kGpu, gpus}, {kCpu, gpus}})};
    r.preemptible = preemptible;
    return capacity.Submit(scheduler, r, now);
  };
  // b's pins (not preemptible) take a GPU of each node: no node has 8 free.
  ASSERT_TRUE(submit("pins", "b", 2, PlacementStrategy::kStrictSpread, false, 0).ok());
  ASSERT_THAT(scheduler.Pass(0, capacity).admitted, ::testing::ElementsAre("pins"));
  ASSERT_TRUE(submit("big", "a", 8, PlacementStrategy::kStrictPack, true, 0).ok());
  ASSERT_TRUE(submit("small", "a", 1, PlacementStrategy::kStrictPack, true, 95).ok());
  ASSERT_TRUE(submit("wide", "b", 7, PlacementStrategy::kStrictPack, true, 95).ok());
  // big has starved and holds a's 8 GPUs; b borrows one of them for wide.
  PassResult r = scheduler.Pass(100, capacity);
  EXPECT_THAT(r.admitted, ::testing::ElementsAre("wide"));
  EXPECT_THAT(r.preempted, ::testing::IsEmpty());
  EXPECT_EQ(scheduler.Find("big")->reason.kind, GangWait::kRoom);
  EXPECT_EQ(scheduler.Find("small")->reason.kind, GangWait::kQuota);
  capacity.Remove("pins");
  scheduler.Finish("pins");
  r = scheduler.Pass(200, capacity);
  EXPECT_THAT(r.admitted, ::testing::ElementsAre("big"));
  EXPECT_NE(capacity.PlacesOf("big"), capacity.PlacesOf("wide"));
}

// The cheapest victims come first, and a place that is cheap but too small
// on its own comes before the one that is enough: the victims off the
// places the gang then takes are not preempted (the smallest sufficient
// set), however many came before.
TEST(PlacerCapacityPreemption, VictimsOffThePlacesTheGangTakesAreNotPreempted) {
  NodeResourceTable table = FourGpuNodes(20);
  Placer capacity(&table, nullptr);
  QueueScheduler scheduler(TwoQueues(80, 4), {});
  int64_t now = 0;
  auto run = [&](const std::string& id, int gpus, int32_t priority) {
    capacity.Add(id, Gang(gpus));
    GangRequest r{id, "a", priority, ResourceSet::Of({{kGpu, gpus}, {kCpu, gpus}})};
    ASSERT_TRUE(capacity.Submit(scheduler, r, now).ok());
    ASSERT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre(id));
  };
  // Best fit, one a pass: eight old low-priority 1-GPU gangs fill n0 and
  // n1; on each of n2..n19 a 3-GPU gang of priority 1 and a young one of 0.
  for (int k = 0; k < 8; ++k) run("old" + std::to_string(k), 1, 0);
  now += 1000;
  for (int k = 0; k < 18; ++k) run("keep" + std::to_string(k), 3, 1);
  for (int k = 0; k < 18; ++k) run("young" + std::to_string(k), 1, 0);
  ASSERT_EQ(capacity.PlacesOf("old7"), std::vector<uint64_t>{1});
  ASSERT_EQ(capacity.PlacesOf("young17"), std::vector<uint64_t>{19});

  capacity.Add("hi", Gang(4));
  ASSERT_TRUE(
      capacity.Submit(scheduler, {"hi", "a", 1, ResourceSet::Of({{kGpu, 4}, {kCpu, 4}})}, now)
          .ok());
  PassResult r = scheduler.Pass(now, capacity);
  for (const Preemption& p : r.preempted) EXPECT_EQ(p.rule, PreemptionRule::kPriority);
  const std::vector<std::string> victims = Victims(r);
  // The eighteen young ones cost least, but freeing one leaves its node 3
  // GPUs short: hi goes to n1 (its four started after n0's), and only they stop.
  EXPECT_THAT(victims, ::testing::UnorderedElementsAre("old4", "old5", "old6", "old7"));
  for (const std::string& v : victims) {
    capacity.Release(v);
    scheduler.Preempted(v, now);
  }
  EXPECT_THAT(scheduler.Pass(++now, capacity).admitted, ::testing::Contains("hi"));
  EXPECT_EQ(capacity.PlacesOf("hi"), std::vector<uint64_t>{1});
}

// A preemptor holds the room it claimed until its victims stop: a later
// preemptible gang may not start on it as backfill, or the preemptor finds
// its room taken when they stop and preempts again (in the queue replay a
// 16-GPU gang did so for 42 minutes, over a hundred gangs).
TEST(PlacerCapacityPreemption, NoGangStartsOnTheRoomAPreemptorClaimed) {
  NodeResourceTable table = FourGpuNodes(2);
  Placer capacity(&table, nullptr);
  QueueScheduler scheduler(TwoQueues(8, 4), {});
  auto submit = [&](const std::string& id, int gpus, int32_t priority, PlacementStrategy s,
                    int64_t now) {
    capacity.Add(id,
                 MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})), gpus), s));
    return capacity.Submit(scheduler,
                           {id, "a", priority, ResourceSet::Of({{kGpu, gpus}, {kCpu, gpus}})}, now);
  };
  // Best fit, one a pass: low fills n0, keep takes half of n1.
  int64_t now = 0;
  ASSERT_TRUE(submit("low", 4, 0, PlacementStrategy::kStrictPack, now).ok());
  ASSERT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre("low"));
  ASSERT_TRUE(submit("keep", 2, 5, PlacementStrategy::kStrictPack, now).ok());
  ASSERT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre("keep"));
  ASSERT_EQ(capacity.PlacesOf("keep"), std::vector<uint64_t>{1});

  // hi needs n0 and n1's two free GPUs; filler, behind it, fits those two.
  ASSERT_TRUE(submit("hi", 6, 1, PlacementStrategy::kPack, now).ok());
  ASSERT_TRUE(submit("filler", 2, 0, PlacementStrategy::kStrictPack, now).ok());
  PassResult r = scheduler.Pass(now, capacity);
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].victim, "low");
  EXPECT_THAT(r.admitted, ::testing::IsEmpty());
  EXPECT_EQ(scheduler.Find("hi")->state, GangState::kClaimed);
  EXPECT_EQ(scheduler.Find("filler")->reason.kind, GangWait::kReservation);
  EXPECT_EQ(scheduler.Find("filler")->reason.gang(), "hi");
  capacity.Release("low");
  scheduler.Preempted("low", ++now);
  r = scheduler.Pass(now, capacity);
  EXPECT_THAT(r.admitted, ::testing::ElementsAre("hi"));
  EXPECT_THAT(r.preempted, ::testing::IsEmpty());
  EXPECT_EQ(capacity.PlacesOf("hi"), (std::vector<uint64_t>{0, 1}));
}

// A gang that the placer puts on a starving gang's reserved place (the
// tightest fit there) starts off it where it also fits, instead of waiting
// behind the reservation; one that fits only there waits.
TEST(PlacerCapacityReservations, AGangThatWouldDelayAReservationStartsOffItsPlaces) {
  NodeResourceTable table = FourGpuNodes(3);
  Placer capacity(&table, nullptr);
  QueueScheduler scheduler(TwoQueues(12, 4), StarvingAfter(10));
  auto submit = [&](const std::string& id, int gpus, int64_t now) {
    capacity.Add(id, Gang(gpus));
    return capacity.Submit(scheduler, {id, "a", 0, ResourceSet::Of({{kGpu, gpus}, {kCpu, gpus}})},
                           now);
  };
  // Best fit, one a pass: 3 GPUs on n0, 3 on n1, 2 on n2.
  int64_t now = 0;
  for (const auto& [id, gpus] :
       std::vector<std::pair<std::string, int>>{{"f0", 3}, {"f1", 3}, {"f2", 2}}) {
    ASSERT_TRUE(submit(id, gpus, now).ok());
    ASSERT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre(id));
  }
  ASSERT_EQ(capacity.PlacesOf("f2"), std::vector<uint64_t>{2});
  ASSERT_TRUE(submit("big", 4, now).ok());  // one whole node: none is free
  now += 100;                               // big has starved
  for (const std::string id : {"s", "u", "v", "w"}) ASSERT_TRUE(submit(id, 1, now).ok());
  PassResult r = scheduler.Pass(now, capacity);
  // big reserves n0 (where it goes on the idle cluster); n0's last GPU is
  // the best fit of every 1-GPU gang, and each goes to the next best.
  EXPECT_THAT(r.admitted, ::testing::UnorderedElementsAre("s", "u", "v"));
  EXPECT_EQ(capacity.PlacesOf("s"), std::vector<uint64_t>{1});
  EXPECT_EQ(capacity.PlacesOf("u"), std::vector<uint64_t>{2});
  EXPECT_EQ(capacity.PlacesOf("v"), std::vector<uint64_t>{2});
  EXPECT_EQ(scheduler.Find("w")->state, GangState::kPending);
  EXPECT_EQ(scheduler.Find("w")->reason.kind, GangWait::kReservation);
  EXPECT_EQ(scheduler.Find("w")->reason.gang(), "big");
  EXPECT_EQ(table.node(0).gpus.TotalFree(), Quantity::Whole(1));
  // f0 ends: big starts on n0, its reserved place.
  capacity.Remove("f0");
  scheduler.Finish("f0");
  EXPECT_THAT(scheduler.Pass(++now, capacity).admitted, ::testing::Contains("big"));
  EXPECT_EQ(capacity.PlacesOf("big"), std::vector<uint64_t>{0});
}

// Where a spec goes on the idle cluster is worked out once while the nodes
// stay the same: every waiting gang with a reservation asks each pass.
TEST_F(PlacerCapacityTest, PlacesWhenIdleDecidesOncePerSpecUntilTheNodesChange) {
  capacity_.Add("held", Gang(8));
  PlacementReasonPtr why;
  ASSERT_TRUE(capacity_.Place("held", &why).has_value()) << Text(why);
  capacity_.Add("a", Gang(8));
  capacity_.Add("b", Gang(8));  // the same spec
  const int64_t before = capacity_.decisions();
  const std::optional<std::vector<uint64_t>> a = capacity_.PlacesWhenIdle("a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->size(), 1u);
  EXPECT_EQ(capacity_.PlacesWhenIdle("b"), a);
  EXPECT_EQ(capacity_.decisions(), before + 1);
  ASSERT_TRUE(table_.AddNode(MakeNode("a10g-1", 16, 8, "A10G")).ok());
  EXPECT_TRUE(capacity_.PlacesWhenIdle("b").has_value());
  EXPECT_EQ(capacity_.decisions(), before + 2);
}

// PlaceAvoiding keeps off the given places, and a gang that did not fit off
// them is not taken for one that cannot fit at all.
TEST_F(PlacerCapacityTest, PlaceAvoidingKeepsOffThePlacesAndRemembersNoFailure) {
  capacity_.Add("a", Gang(8));
  capacity_.Add("b", Gang(8));
  EXPECT_FALSE(capacity_.PlaceAvoiding("a", {0, 1}).has_value());
  std::optional<ResourceSet> a = capacity_.PlaceAvoiding("a", {0});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(capacity_.PlacesOf("a"), std::vector<uint64_t>{1});
  EXPECT_EQ(a->Get("GPU:H100"), Quantity::Whole(8));
  EXPECT_FALSE(capacity_.PlaceAvoiding("b", {0}).has_value());
  PlacementReasonPtr why;
  EXPECT_TRUE(capacity_.Place("b", &why).has_value()) << Text(why);
  EXPECT_EQ(capacity_.PlacesOf("b"), std::vector<uint64_t>{0});
}

// n0..n19 of 16 CPUs and 4 GPUs, then big0 and big1 of 128 CPUs and 8 GPUs
// (indices 20 and 21).
NodeResourceTable WithTwoBigNodes() {
  NodeResourceTable table;
  for (int i = 0; i < 20; ++i)
    EXPECT_TRUE(table.AddNode(MakeNode(absl::StrCat("n", i), 16, 4)).ok());
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(table.AddNode(MakeNode(absl::StrCat("big", i), 128, 8)).ok());
  return table;
}

// 20 ordinary nodes (4 GPUs) and 2 with 128 CPUs and 8 GPUs, the only
// ones for "large"'s bundles. The placer spreads "small" onto the most free nodes, the big
// ones, unless they are spared; spared, it goes there only when nothing
// else has room.
TEST(PlacerCapacitySparing, AGangThatFitsManyNodesKeepsOffTheFewThatALargeGangNeeds) {
  for (const bool spare : {true, false}) {
    SCOPED_TRACE(spare ? "spared" : "not spared");
    NodeResourceTable table = WithTwoBigNodes();
    Placer capacity(&table, nullptr);
    capacity.set_spare_few_node_places(spare);
    capacity.Add("large",
                 MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 8}, {kCpu, 100}})), 2),
                           PlacementStrategy::kSpread));
    capacity.Add("small", MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})), 2),
                                    PlacementStrategy::kSpread));
    PlacementReasonPtr why;
    ASSERT_TRUE(capacity.Place("small", &why).has_value()) << Text(why);
    const std::vector<uint64_t> big{20, 21};
    EXPECT_EQ(capacity.PlacesOf("small") == big, !spare);
    EXPECT_EQ(capacity.Place("large", &why).has_value(), spare) << Text(why);
    if (!spare) continue;
    // The ordinary nodes full: the spared ones are the only room left.
    capacity.Release("large");
    capacity.Add("filler",
                 MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 3}, {kCpu, 1}})), 20),
                           PlacementStrategy::kSpread));
    ASSERT_TRUE(capacity.Place("filler", &why).has_value()) << Text(why);
    capacity.Add("more",
                 MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 4}}))}, PlacementStrategy::kPack));
    ASSERT_TRUE(capacity.Place("more", &why).has_value()) << Text(why);
    EXPECT_THAT(big, ::testing::Contains(capacity.PlacesOf("more").at(0)));
    // With "large" gone, nothing is spared: "small" goes to the most free.
    for (const std::string id : {"large", "filler", "more", "small"}) capacity.Remove(id);
    capacity.Add("small", MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})), 2),
                                    PlacementStrategy::kSpread));
    ASSERT_TRUE(capacity.Place("small", &why).has_value()) << Text(why);
    EXPECT_EQ(capacity.PlacesOf("small"), big);
  }
}

// A gang that fits many nodes but holds one of the few a large gang can
// use (it came before the large one was known) yields it to that gang when
// the gang's queue is within its nominal quota, though its own queue is
// within its quota too; it starts again off the spared nodes. A large
// gang that would borrow takes nothing.
TEST(PlacerCapacitySparing, AGangOnTheFewNodesALargeGangNeedsYieldsThem) {
  for (const double b_quota : {48.0, 8.0}) {
    const bool within_nominal = b_quota >= 16;
    SCOPED_TRACE(within_nominal ? "within b's nominal quota" : "borrowing");
    NodeResourceTable table = WithTwoBigNodes();
    Placer capacity(&table, nullptr);
    QueueScheduler scheduler(TwoQueues(48, b_quota), {});
    const PlacementGroupSpec small = MakeGroup(
        Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 1}})), 2), PlacementStrategy::kSpread);
    const PlacementGroupSpec large =
        MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 8}, {kCpu, 100}})), 2),
                  PlacementStrategy::kSpread);
    int64_t now = 0;
    capacity.Add("small", small);
    capacity.Add("near", small);
    ASSERT_TRUE(capacity.Submit(scheduler, {"small", "a", 0, small.total()}, now).ok());
    ASSERT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre("small"));
    const std::vector<uint64_t> big{20, 21};
    ASSERT_EQ(capacity.PlacesOf("small"), big);  // the most free, nothing spared yet
    capacity.Add("large", large);
    // "near" fits many nodes: with "large" known it keeps off the big ones.
    ASSERT_TRUE(capacity.Submit(scheduler, {"near", "a", 0, small.total()}, now).ok());
    ASSERT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre("near"));
    ASSERT_NE(capacity.PlacesOf("near"), big);
    EXPECT_TRUE(capacity.FitsFewPlaces("large"));
    EXPECT_FALSE(capacity.FitsFewPlaces("small"));
    EXPECT_TRUE(capacity.HoldsPlacesSparedFor("small", "large"));
    EXPECT_FALSE(capacity.HoldsPlacesSparedFor("near", "large"));
    EXPECT_FALSE(capacity.HoldsPlacesSparedFor("small", "near"));  // "near" fits many

    ASSERT_TRUE(capacity.Submit(scheduler, {"large", "b", 0, large.total()}, now).ok());
    PassResult r = scheduler.Pass(now++, capacity);
    EXPECT_THAT(r.admitted, ::testing::IsEmpty());
    if (!within_nominal) {
      EXPECT_THAT(r.preempted, ::testing::IsEmpty());
      continue;
    }
    ASSERT_THAT(Victims(r), ::testing::ElementsAre("small"));
    EXPECT_EQ(r.preempted[0].rule, PreemptionRule::kSparedNodes);
    EXPECT_THAT(PreemptionText(r.preempted[0]), ::testing::HasSubstr("(spared nodes)"));
    capacity.Release("small");
    scheduler.Preempted("small", now);
    EXPECT_THAT(scheduler.Pass(now++, capacity).admitted,
                ::testing::UnorderedElementsAre("large", "small"));
    EXPECT_EQ(capacity.PlacesOf("large"), big);
    for (uint64_t node : capacity.PlacesOf("small")) EXPECT_LT(node, 20u);
  }
}

// A gang that fits few nodes, all held by gangs it may not preempt, looks
// at them alone and spends none of the pass's preemption searches: the
// gang after it still reclaims (queue replay, gpuspec33: gangs pinned to
// the G3 nodes spent every search, and multi-node gangs within their
// quota never searched).
TEST(PlacerCapacitySparing, AGangWhoseFewNodesHoldNoVictimsSpendsNoSearch) {
  NodeResourceTable table = WithTwoBigNodes();
  Placer capacity(&table, nullptr);
  QueueSchedulerOptions options;
  options.max_preemption_searches = 1;
  QueueScheduler scheduler(TwoQueues(72, 24), options);
  auto large = [](int cpus) {
    return MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 8}, {kCpu, cpus}})), 2),
                     PlacementStrategy::kSpread);
  };
  const PlacementGroupSpec node =
      MakeGroup({MakeBundle(ResourceSet::Of({{kGpu, 4}, {kCpu, 1}}))}, PlacementStrategy::kPack);
  int64_t now = 0;
  capacity.Add("on-big", large(100));
  ASSERT_TRUE(capacity.Submit(scheduler, {"on-big", "a", 0, large(100).total()}, now).ok());
  ASSERT_THAT(scheduler.Pass(now++, capacity).admitted, ::testing::ElementsAre("on-big"));
  for (int i = 0; i < 20; ++i) {  // b borrows every ordinary node
    const std::string id = absl::StrCat("b", i);
    capacity.Add(id, node);
    ASSERT_TRUE(capacity.Submit(scheduler, {id, "b", 0, node.total()}, now).ok());
  }
  ASSERT_EQ(scheduler.Pass(now++, capacity).admitted.size(), 20u);
  // "pinned" fits only the big nodes, which a's older "on-big" holds.
  capacity.Add("pinned", large(90));
  capacity.Add("after", node);
  ASSERT_TRUE(capacity.Submit(scheduler, {"pinned", "a", 0, large(90).total()}, now).ok());
  ASSERT_TRUE(capacity.Submit(scheduler, {"after", "a", 0, node.total()}, now).ok());
  ASSERT_TRUE(capacity.FitsFewPlaces("pinned"));
  PassResult r = scheduler.Pass(now++, capacity);
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].by, "after");
  EXPECT_EQ(r.preempted[0].rule, PreemptionRule::kReclaim);
  EXPECT_EQ(scheduler.Find("pinned")->state, GangState::kPending);
}

// A gang found not to fit because a gang of its shape asking no more did not
// is told so, with that gang's name, not given that gang's numbers as its own.
TEST_F(PlacerCapacityTest, AReasonLearnedFromASmallerGangNamesIt) {
  capacity_.Add("a", Gang(8));
  capacity_.Add("b", Gang(8));
  PlacementReasonPtr why;
  ASSERT_TRUE(capacity_.Place("a", &why).has_value()) << Text(why);
  ASSERT_TRUE(capacity_.Place("b", &why).has_value()) << Text(why);
  auto four = [](int cpus) {
    return MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, cpus}})), 4),
                     PlacementStrategy::kStrictPack);
  };
  capacity_.Add("small", four(1));
  capacity_.Add("twin", four(1));
  capacity_.Add("big", four(2));
  PlacementReasonPtr small_why, twin_why, big_why;
  EXPECT_FALSE(capacity_.Place("small", &small_why).has_value());
  EXPECT_FALSE(capacity_.Place("twin", &twin_why).has_value());
  EXPECT_FALSE(capacity_.Place("big", &big_why).has_value());
  EXPECT_EQ(twin_why, small_why);  // the same spec: the same reason, shared
  ASSERT_NE(big_why, nullptr);
  EXPECT_EQ(big_why->why, PlacementWhy::kAsksAtLeast);
  EXPECT_TRUE(big_why->waiting);
  EXPECT_EQ(big_why->gang, "small");
  EXPECT_EQ(big_why->like, small_why);
  EXPECT_THAT(Text(big_why), ::testing::StartsWith("waiting for resources: it asks at least what "
                                                   "small asks, bundle by bundle, which does not "
                                                   "fit (bundle 0 needs "));
}

// ... and one that can never be placed is not said to be waiting.
TEST_F(PlacerCapacityTest, AReasonLearnedFromAnInfeasibleGangDoesNotSayWaiting) {
  auto four = [](int cpus) {
    return MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, cpus}})), 4),
                     PlacementStrategy::kSpread);
  };
  capacity_.Add("small", four(100));  // no node has 100 CPUs
  capacity_.Add("big", four(200));
  PlacementReasonPtr small_why, big_why;
  EXPECT_FALSE(capacity_.Place("small", &small_why).has_value());
  ASSERT_TRUE(capacity_.Infeasible("small")) << Text(small_why);
  EXPECT_FALSE(capacity_.Place("big", &big_why).has_value());
  EXPECT_TRUE(capacity_.Infeasible("big"));
  ASSERT_NE(big_why, nullptr);
  EXPECT_EQ(big_why->why, PlacementWhy::kAsksAtLeast);
  EXPECT_FALSE(big_why->waiting);
  EXPECT_THAT(Text(big_why), ::testing::StartsWith("it asks at least what small asks, bundle by "
                                                   "bundle, which cannot be placed ("));
}

// A gang placed and given back within a pass (it would delay a reservation)
// leaves at least the room that was free before it: what did not fit then
// still does not, and is not decided again. A gang that held its room from
// before the failure gives back room the failure did not see.
TEST_F(PlacerCapacityTest, AGangPlacedAndGivenBackForgetsNoEarlierFailure) {
  capacity_.Add("a", Gang(6));
  capacity_.Add("b", Gang(6));
  PlacementReasonPtr why;
  ASSERT_TRUE(capacity_.Place("a", &why).has_value()) << Text(why);
  ASSERT_TRUE(capacity_.Place("b", &why).has_value()) << Text(why);
  // Two GPUs free on each node: four in all, but not on one node.
  capacity_.Add("c", Gang(4));
  capacity_.Add("twin", Gang(4));
  capacity_.Add("x", Gang(1));
  EXPECT_FALSE(capacity_.Place("c", &why).has_value());
  ASSERT_TRUE(capacity_.Place("x", &why).has_value()) << Text(why);
  capacity_.Release("x");
  const int64_t before = capacity_.decisions();
  EXPECT_FALSE(capacity_.Place("twin", &why).has_value());
  EXPECT_EQ(capacity_.decisions(), before);
  capacity_.Release("a");
  EXPECT_TRUE(capacity_.Place("twin", &why).has_value()) << Text(why);
}

// A gang pinned to a type whose GPUs are all taken, once it had a decision
// of its own, waits without another, though the cluster has free GPUs of
// another type.
TEST_F(PlacerCapacityTest, AGangPinnedToATypeWithNoFreeGpusWaitsWithoutADecision) {
  auto pinned = [](const std::string& type, int gpus) {
    return MakeGroup(Repeat(MakeBundle(ResourceSet::Of({{kGpu, 1}, {kCpu, 1}}),
                                       "berth.io/accelerator-type in (" + type + ")"),
                            gpus),
                     PlacementStrategy::kStrictPack);
  };
  capacity_.Add("h100s", pinned("H100", 8));
  capacity_.Add("a10gs", pinned("A10G", 4));
  capacity_.Add("p", pinned("H100", 1));
  PlacementReasonPtr why;
  ASSERT_TRUE(capacity_.Place("h100s", &why).has_value()) << Text(why);
  ASSERT_TRUE(capacity_.Place("a10gs", &why).has_value()) << Text(why);
  const int64_t before = capacity_.decisions();
  EXPECT_FALSE(capacity_.Place("p", &why).has_value());
  EXPECT_FALSE(capacity_.Infeasible("p"));
  capacity_.Release("a10gs");  // 8 GPUs free, none an H100
  EXPECT_FALSE(capacity_.Place("p", &why).has_value());
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(why->why, PlacementWhy::kTypedGpusFree);
  EXPECT_EQ(why->types, std::vector<std::string>{"H100"});
  EXPECT_EQ(Text(why),
            "waiting for resources: the gang asks 1 GPUs of type H100; the cluster has 0 free");
  EXPECT_EQ(capacity_.decisions(), before + 1);
  capacity_.Release("h100s");
  EXPECT_TRUE(capacity_.Place("p", &why).has_value()) << Text(why);
  EXPECT_EQ(capacity_.PlacesOf("p"), std::vector<uint64_t>{1});
}

}  // namespace
}  // namespace berth
