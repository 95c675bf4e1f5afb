// Randomized property tests of the placement core over thousands of random
// clusters and groups. Each run is seeded, so a failure names its seed and
// reproduces exactly.
#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "placement/bundle_placer.h"
#include "tests/unit/placement_test_util.h"

namespace berth {
namespace {

using ::berth::testing::MakeNode;

constexpr PlacementStrategy kStrategies[] = {PlacementStrategy::kPack, PlacementStrategy::kSpread,
                                             PlacementStrategy::kStrictPack,
                                             PlacementStrategy::kStrictSpread};

struct Snapshot {
  std::vector<ResourceSet> available;
  std::vector<std::vector<Quantity>> gpu_free;
  bool operator==(const Snapshot& o) const {
    return available == o.available && gpu_free == o.gpu_free;
  }
};

Snapshot Take(const NodeResourceTable& t) {
  Snapshot s;
  for (NodeIndex n = 0; n < t.slot_count(); ++n) {
    s.available.push_back(t.node(n).available);
    std::vector<Quantity> g;
    for (uint32_t i = 0; i < t.node(n).gpus.count(); ++i) g.push_back(t.node(n).gpus.free(i));
    s.gpu_free.push_back(g);
  }
  return s;
}

class RandomCluster {
 public:
  explicit RandomCluster(uint32_t seed) : rng_(seed) {}

  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Int(0, static_cast<int>(v.size()) - 1)];
  }

  void Build(NodeResourceTable& table, int nodes) {
    const std::vector<std::string> types = {"", "T4", "A10G"};
    for (int i = 0; i < nodes; ++i) {
      const std::string type = Pick(types);
      const int gpus =
          type.empty() ? Pick(std::vector<int>{0, 0, 2}) : Pick(std::vector<int>{1, 2, 4, 8});
      NodeSpec spec = MakeNode("n" + std::to_string(i), Int(1, 16), gpus, gpus ? type : "",
                               {{"zone", Int(0, 1) ? "a" : "b"}}, Int(1, 8) * 8e9);
      if (Int(0, 4) == 0) spec.resources.Set("ssd", Quantity::Whole(Int(1, 2)));
      table.AddNode(spec).value();
      if (Int(0, 9) == 0) table.SetNodeState(spec.node_id, NodeState::kDraining).IgnoreError();
      if (Int(0, 14) == 0) table.SetNodeState(spec.node_id, NodeState::kDead).IgnoreError();
    }
  }

  PlacementGroupSpec Group() {
    const int n = Int(1, 4);
    const std::string type = Pick(std::vector<std::string>{"", "", "T4", "A10G"});
    std::vector<Bundle> bundles;
    for (int i = 0; i < n; ++i) {
      ResourceSet r;
      // GPU shares of 0.5/1/2 pack onto instances optimally in largest-first
      // order, which keeps the brute-force oracle below exact.
      const double gpu = Pick(std::vector<double>{0, 0, 0.5, 1, 1, 2});
      r.Set(kGpu, Quantity::FromDouble(gpu, "g").value());
      r.Set(kCpu, Quantity::FromDouble(Pick(std::vector<double>{0, 0.5, 1, 2, 4}), "c").value());
      if (Int(0, 3) == 0) r.Set(kMemory, Quantity::Whole(Int(1, 4) * 8000000000LL));
      if (Int(0, 9) == 0) r.Set("ssd", Quantity::Whole(1));
      if (!type.empty() && gpu > 0) r.Set(AcceleratorResourceName(type), kAcceleratorRequest);
      if (r.empty()) r.Set(kCpu, Quantity::Whole(1));
      std::string selector = Int(0, 5) == 0 ? (Int(0, 1) ? "zone in (a)" : "zone notin (a)") : "";
      bundles.push_back({r, LabelSelector::Parse(selector, "s").value()});
    }
    return PlacementGroupSpec::Create(std::move(bundles), kStrategies[Int(0, 3)]).value();
  }

 private:
  std::mt19937 rng_;
};

// Whether `bundles` fit together on an idle node `n` (its totals).
bool FitsIdle(const NodeResourceTable& t, NodeIndex n, const PlacementGroupSpec& spec,
              std::vector<uint32_t> bundles) {
  ResourceSet sum;
  for (uint32_t b : bundles) {
    if (!spec.bundles()[b].selector.Matches(t.node(n).labels)) return false;
    sum.Add(spec.bundles()[b].resources).IgnoreError();
  }
  if (!t.node(n).total.Contains(sum)) return false;
  std::sort(bundles.begin(), bundles.end(), [&](uint32_t a, uint32_t b) {
    return spec.bundles()[a].resources.Get(kGpu) > spec.bundles()[b].resources.Get(kGpu);
  });
  GpuInstances gpus(t.node(n).gpus.count());
  for (uint32_t b : bundles) {
    if (!gpus.Allocate(spec.bundles()[b].resources.Get(kGpu)).ok()) return false;
  }
  return true;
}

// Brute force: could some assignment of the bundles to ALIVE nodes hold the
// group on an idle cluster, under its strategy's hard constraints?
// `domain` (key, value), if given, keeps to the nodes of that label value.
bool OracleFeasible(const NodeResourceTable& t, const PlacementGroupSpec& spec,
                    std::optional<std::pair<std::string, std::string>> domain = std::nullopt) {
  std::vector<NodeIndex> alive;
  for (NodeIndex n = 0; n < t.slot_count(); ++n) {
    if (t.node(n).state != NodeState::kAlive) continue;
    if (domain) {
      auto label = t.node(n).labels.find(domain->first);
      if (label == t.node(n).labels.end() || label->second != domain->second) continue;
    }
    alive.push_back(n);
  }
  const size_t b = spec.bundles().size();
  if (alive.empty()) return false;
  std::vector<size_t> choice(b, 0);
  while (true) {
    std::map<NodeIndex, std::vector<uint32_t>> on;
    for (uint32_t i = 0; i < b; ++i) on[alive[choice[i]]].push_back(i);
    bool ok = true;
    if (spec.strategy() == PlacementStrategy::kStrictPack) ok = on.size() == 1;
    if (spec.strategy() == PlacementStrategy::kStrictSpread) ok = on.size() == b;
    for (const auto& [n, bundles] : on) ok = ok && FitsIdle(t, n, spec, bundles);
    if (ok) return true;
    size_t i = 0;
    while (i < b && ++choice[i] == alive.size()) choice[i++] = 0;
    if (i == b) return false;
  }
}

void CheckIndices(const NodeResourceTable& t) {
  for (const auto& pool : t.pools()) {
    for (int r = 0; r < kNumIndexedResources; ++r) {
      NodeResourceTable::OrderedNodes expected;
      for (NodeIndex n = 0; n < t.slot_count(); ++n) {
        const auto& node = t.node(n);
        if (node.state == NodeState::kAlive && !node.removed && &t.pools()[node.pool] == &pool) {
          expected.insert({NodeResourceTable::IndexKey(node.available, IndexedResource(r)), n});
        }
      }
      ASSERT_EQ(pool.by_free[r], expected);
    }
  }
}

TEST(PlacementPropertyTest, RandomClustersAndGroups) {
  int placed = 0, retry = 0, infeasible = 0;
  for (uint32_t seed = 1; seed <= 3000; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    RandomCluster rc(seed);
    NodeResourceTable table;
    rc.Build(table, rc.Int(1, 6));
    const Snapshot empty = Take(table);
    std::vector<std::pair<PlacementGroupSpec, std::vector<BundlePlacement>>> live;
    for (int g = 0; g < 6; ++g) {
      PlacementGroupSpec spec = rc.Group();
      const Snapshot before = Take(table);
      PlacementDecision d = BundlePlacer(&table).Place(spec).value();
      CheckIndices(table);
      if (d.outcome != PlacementOutcome::kPlaced) {
        EXPECT_NE(d.reason.why, PlacementWhy::kNone);
        EXPECT_TRUE(Take(table) == before) << "a failed placement changed the table";
        if (d.outcome == PlacementOutcome::kInfeasible) {
          ++infeasible;
          EXPECT_FALSE(OracleFeasible(table, spec)) << "called infeasible: " << d.reason;
        } else {
          ++retry;
        }
        continue;
      }
      ++placed;
      ASSERT_EQ(d.placements.size(), spec.bundles().size());
      std::set<NodeIndex> nodes;
      for (const BundlePlacement& p : d.placements) {
        const auto& node = table.node(p.allocation.node);
        const Bundle& bundle = spec.bundles()[p.bundle_index];
        EXPECT_EQ(node.state, NodeState::kAlive);
        EXPECT_TRUE(bundle.selector.Matches(node.labels));
        EXPECT_EQ(p.allocation.resources, bundle.resources);
        nodes.insert(p.allocation.node);
      }
      if (spec.strategy() == PlacementStrategy::kStrictPack) {
        EXPECT_EQ(nodes.size(), 1u);
      }
      if (spec.strategy() == PlacementStrategy::kStrictSpread) {
        EXPECT_EQ(nodes.size(), spec.bundles().size());
      }
      live.emplace_back(std::move(spec), d.placements);
      // Now and then release a random live group.
      if (rc.Int(0, 2) == 0) {
        size_t i = rc.Int(0, static_cast<int>(live.size()) - 1);
        for (const auto& p : live[i].second) ASSERT_TRUE(table.Release(p.allocation).ok());
        live.erase(live.begin() + i);
        CheckIndices(table);
      }
    }
    // Never over-allocated: what is free plus what is held equals the totals.
    std::vector<ResourceSet> held(table.slot_count());
    for (const auto& [spec, placements] : live) {
      for (const auto& p : placements)
        held[p.allocation.node].Add(p.allocation.resources).IgnoreError();
    }
    for (NodeIndex n = 0; n < table.slot_count(); ++n) {
      ResourceSet sum = table.node(n).available;
      ASSERT_TRUE(sum.Add(held[n]).ok());
      EXPECT_EQ(sum, table.node(n).total);
      EXPECT_EQ(table.node(n).gpus.TotalFree(), table.node(n).available.Get(kGpu));
    }
    // Release restores the table exactly.
    for (auto it = live.rbegin(); it != live.rend(); ++it) {
      for (const auto& p : it->second) ASSERT_TRUE(table.Release(p.allocation).ok());
    }
    EXPECT_TRUE(Take(table) == empty);
    CheckIndices(table);
  }
  // The generator must exercise every outcome, or the checks above prove little.
  EXPECT_GT(placed, 1000);
  EXPECT_GT(retry, 100);
  EXPECT_GT(infeasible, 100);
  std::printf("placed %d, retry %d, infeasible %d\n", placed, retry, infeasible);
}

// The domain indices agree with their nodes, recomputed.
void CheckDomains(NodeResourceTable& t, const std::string& key) {
  const NodeResourceTable::DomainIndex& index = t.Domains(key);
  for (const NodeResourceTable::Domain& d : index.domains) {
    std::set<NodeIndex> nodes;
    std::array<int64_t, kNumIndexedResources> free{}, total{};
    for (NodeIndex n = 0; n < t.slot_count(); ++n) {
      const auto& node = t.node(n);
      auto label = node.labels.find(key);
      if (node.state != NodeState::kAlive || node.removed || label == node.labels.end() ||
          label->second != d.value) {
        continue;
      }
      nodes.insert(n);
      for (int r = 0; r < kNumIndexedResources; ++r) {
        free[r] += NodeResourceTable::IndexKey(node.available, IndexedResource(r));
        total[r] += NodeResourceTable::IndexKey(node.total, IndexedResource(r));
      }
    }
    ASSERT_EQ(std::set<NodeIndex>(d.nodes.begin(), d.nodes.end()), nodes) << d.value;
    ASSERT_EQ(d.free, free) << d.value;
    ASSERT_EQ(d.total, total) << d.value;
  }
}

// A required topology never spans domains and waits only when no domain
// could hold the group; a preferred one is kept whenever a domain could.
TEST(PlacementPropertyTest, TopologyGangsStayInOneDomain) {
  const std::string rack = "rack";
  int in_one = 0, waited = 0, never = 0;
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    RandomCluster rc(seed);
    NodeResourceTable table;
    rc.Build(table, rc.Int(2, 7));
    // Racks are set up after the nodes: relabel by rebuilding with labels.
    NodeResourceTable racked;
    for (NodeIndex n = 0; n < table.slot_count(); ++n) {
      const auto& node = table.node(n);
      NodeSpec spec;
      spec.node_id = node.id;
      spec.resources = node.total;
      spec.resources.Set(AcceleratorResourceName(node.accelerator_type), Quantity());
      spec.accelerator_type = node.accelerator_type;
      spec.labels = node.labels;
      spec.labels.erase(std::string(kAcceleratorTypeLabel));
      if (rc.Int(0, 5) != 0) spec.labels[rack] = absl::StrCat("r", rc.Int(0, 2));
      racked.AddNode(spec).value();
      if (node.state != NodeState::kAlive) racked.SetNodeState(node.id, node.state).IgnoreError();
    }
    if (seed % 2 == 0) racked.Domains(rack);  // built before the placements, or during them
    std::vector<std::vector<BundlePlacement>> live;
    for (int g = 0; g < 5; ++g) {
      const PlacementGroupSpec drawn = rc.Group();
      const bool required = rc.Int(0, 2) != 0;
      const PlacementGroupSpec spec =
          PlacementGroupSpec::Create({drawn.bundles().begin(), drawn.bundles().end()},
                                     drawn.strategy(),
                                     required ? Topology{rack, {}} : Topology{"", {rack}})
              .value();
      const Snapshot before = Take(racked);
      PlacementDecision d = BundlePlacer(&racked).Place(spec).value();
      CheckDomains(racked, rack);
      if (HasFailure()) return;
      std::set<std::string> racks;
      for (const BundlePlacement& p : d.placements) {
        auto label = racked.node(p.allocation.node).labels.find(rack);
        racks.insert(label == racked.node(p.allocation.node).labels.end() ? "" : label->second);
      }
      if (d.outcome == PlacementOutcome::kPlaced) {
        if (required || !d.topology_domain.empty()) {
          ASSERT_EQ(racks.size(), 1u);
          ASSERT_NE(*racks.begin(), "");
          EXPECT_EQ(d.topology_domain, absl::StrCat(rack, "=", *racks.begin()));
          ++in_one;
        }
        live.push_back(d.placements);
      } else {
        EXPECT_NE(d.reason.why, PlacementWhy::kNone);
        EXPECT_TRUE(Take(racked) == before) << "a failed placement changed the table";
        ++(d.outcome == PlacementOutcome::kInfeasible ? never : waited);
        if (d.outcome == PlacementOutcome::kInfeasible && required) {
          for (const char* r : {"r0", "r1", "r2"}) {
            EXPECT_FALSE(OracleFeasible(racked, spec, std::make_pair(rack, std::string(r))))
                << "called infeasible but rack " << r << " could hold it: " << d.reason;
          }
        }
      }
      if (!live.empty() && rc.Int(0, 2) == 0) {
        for (const auto& p : live.back()) ASSERT_TRUE(racked.Release(p.allocation).ok());
        live.pop_back();
        CheckDomains(racked, rack);
      }
    }
  }
  EXPECT_GT(in_one, 1000);
  EXPECT_GT(waited, 100);
  EXPECT_GT(never, 100);
  std::printf("in one rack %d, waited %d, infeasible %d\n", in_one, waited, never);
}

// At scale the placer must still place exactly, and its decisions agree with
// what fits: a group placed on a big cluster is never over-allocated.
TEST(PlacementPropertyTest, LargeClusterPlaceReleaseRoundTrip) {
  RandomCluster rc(42);
  NodeResourceTable table;
  rc.Build(table, 2000);
  const Snapshot empty = Take(table);
  std::vector<std::vector<BundlePlacement>> live;
  for (int g = 0; g < 3000; ++g) {
    PlacementDecision d = BundlePlacer(&table).Place(rc.Group()).value();
    if (d.outcome == PlacementOutcome::kPlaced) live.push_back(d.placements);
  }
  EXPECT_GT(live.size(), 1000u);
  CheckIndices(table);
  for (const auto& placements : live) {
    for (const auto& p : placements) ASSERT_TRUE(table.Release(p.allocation).ok());
  }
  EXPECT_TRUE(Take(table) == empty);
  CheckIndices(table);
}

}  // namespace
}  // namespace berth
