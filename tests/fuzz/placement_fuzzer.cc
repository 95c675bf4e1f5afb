// Fuzzes the placement core: a random cluster (NodeResourceTable), random
// placement groups (PlacementGroupSpec::FromInput) placed, rescheduled and
// released with BundlePlacer while nodes drain, die and leave. After every
// step the table must match a ledger of what is held; a group that does not
// place must leave the table as it was; an INFEASIBLE group must not place
// on the same nodes when idle; releasing everything must leave every node's
// available equal to its total. Also round-trips quantity and selector text.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "placement/bundle_placer.h"
#include "placement/node_resource_table.h"
#include "placement/placement_group_spec.h"
#include "placement/quantity.h"
#include "tests/fuzz/fuzz_check.h"

namespace berth {
namespace {

constexpr const char* kTypes[] = {"", "A10G", "A100", "T4"};
constexpr const char* kResourceNames[] = {
    "CPU", "GPU", "memory", "disk", "accelerator_type:A10G", "accelerator_type:T4", "", "bad name"};
constexpr const char* kLabelKeys[] = {"zone", "spot", "team", "berth.io/accelerator-type"};
constexpr const char* kLabelValues[] = {"a", "b", "A10G", "A100", "T4", ""};
constexpr const char* kStrategies[] = {"PACK",          "SPREAD",        "STRICT_PACK",
                                       "STRICT_SPREAD", "strict_spread", "bogus"};

template <typename T, size_t N>
T Pick(FuzzedDataProvider& in, const T (&values)[N]) {
  return values[in.ConsumeIntegralInRange<size_t>(0, N - 1)];
}

// Amounts near the interesting edges: fractions, whole GPUs, the maximum.
double PickAmount(FuzzedDataProvider& in) {
  static constexpr double kAmounts[] = {0, 0.0001, 0.00004, 0.25, 0.5, 0.6, 1,      1.5, 2,
                                        3, 4,      8,       16,   64,  1e9, 2.5e13, -1,  1e300};
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0:
      return in.ConsumeIntegralInRange(0, 16);
    case 1:
      return in.ConsumeIntegralInRange(0, 1000) / 100.0;
    case 2:
      return Pick(in, kAmounts);
    default:
      return in.ConsumeFloatingPoint<double>();
  }
}

Quantity PickNodeQuantity(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 3)) {
    case 0:
      return Quantity::Whole(in.ConsumeIntegralInRange(0, 64));
    case 1:
      return Quantity::FromUnits(in.ConsumeIntegralInRange<int64_t>(0, 1000000));
    case 2:
      return Quantity::FromUnits(Quantity::kMaxUnits - in.ConsumeIntegralInRange(0, 1));
    default:
      return Quantity::FromUnits(in.ConsumeIntegralInRange<int64_t>(0, Quantity::kMaxUnits));
  }
}

struct Group {
  PlacementGroupSpec spec;
  std::vector<BundlePlacement> placed;  // held now, any order
};

struct Cluster {
  NodeResourceTable table;
  std::vector<NodeSpec> specs;  // as registered, by slot
  std::vector<Group> groups;
};

// The table agrees with the ledger of placements and with its own indices.
void CheckTable(const Cluster& c) {
  const NodeResourceTable& t = c.table;
  std::vector<ResourceSet> used(t.slot_count());
  std::vector<std::vector<int64_t>> gpu_used(t.slot_count());
  for (NodeIndex n = 0; n < t.slot_count(); ++n) gpu_used[n].assign(t.node(n).gpus.count(), 0);
  for (const Group& g : c.groups) {
    for (const BundlePlacement& p : g.placed) {
      if (t.node(p.allocation.node).removed) continue;
      FUZZ_CHECK(used[p.allocation.node].Add(p.allocation.resources).ok());
      for (const GpuShare& s : p.allocation.gpus) {
        FUZZ_CHECK(s.index < gpu_used[p.allocation.node].size());
        gpu_used[p.allocation.node][s.index] += s.amount.units();
      }
    }
  }
  std::map<std::string, __int128> alive_total;
  size_t alive = 0;
  for (NodeIndex n = 0; n < t.slot_count(); ++n) {
    const NodeResourceTable::Node& node = t.node(n);
    if (node.removed) continue;
    ResourceSet expect = node.total;
    FUZZ_CHECK_MSG(expect.Subtract(used[n]).ok(), node.id);
    FUZZ_CHECK_MSG(node.available == expect,
                   absl::StrCat(node.id, ": available ", node.available.ToString(),
                                ", ledger says ", expect.ToString()));
    for (uint32_t i = 0; i < node.gpus.count(); ++i) {
      FUZZ_CHECK(node.gpus.free(i).units() == Quantity::kUnitsPerWhole - gpu_used[n][i]);
    }
    const auto& pool = t.pools()[node.pool];
    for (int r = 0; r < kNumIndexedResources; ++r) {
      const auto res = static_cast<IndexedResource>(r);
      const bool free_indexed =
          pool.by_free[r].contains({NodeResourceTable::IndexKey(node.available, res), n});
      const bool total_indexed =
          pool.by_total[r].contains({NodeResourceTable::IndexKey(node.total, res), n});
      FUZZ_CHECK(free_indexed == (node.state == NodeState::kAlive));
      FUZZ_CHECK(total_indexed == (node.state == NodeState::kAlive));
    }
    if (node.state == NodeState::kAlive) {
      ++alive;
      for (const auto& [name, amount] : node.total.entries()) alive_total[name] += amount.units();
    }
  }
  FUZZ_CHECK(t.alive_count() == alive);
  size_t indexed = 0;
  for (const auto& pool : t.pools()) indexed += pool.by_free[0].size();
  FUZZ_CHECK(indexed == alive);
  for (const auto& [name, total] : alive_total) {
    const __int128 shown = total > INT64_MAX ? INT64_MAX : total;
    FUZZ_CHECK(t.AliveTotal(name).units() == static_cast<int64_t>(shown));
  }
}

// The same nodes in the same states, with nothing allocated.
NodeResourceTable IdleCopy(const Cluster& c) {
  NodeResourceTable idle;
  for (NodeIndex n = 0; n < c.table.slot_count(); ++n) {
    if (c.table.node(n).removed) continue;
    FUZZ_CHECK(idle.AddNode(c.specs[n]).ok());
    FUZZ_CHECK(idle.SetNodeState(c.specs[n].node_id, c.table.node(n).state).ok());
  }
  return idle;
}

void CheckPlacements(const Cluster& c, const PlacementGroupSpec& spec,
                     const std::vector<BundlePlacement>& kept,
                     const std::vector<BundlePlacement>& made) {
  std::vector<int> count(spec.bundles().size(), 0);
  absl::flat_hash_set<NodeIndex> kept_nodes, made_nodes;
  for (const BundlePlacement& p : kept) {
    ++count[p.bundle_index];
    kept_nodes.insert(p.allocation.node);
  }
  for (size_t i = 0; i < made.size(); ++i) {
    const BundlePlacement& p = made[i];
    FUZZ_CHECK(p.bundle_index < spec.bundles().size());
    if (i > 0) FUZZ_CHECK(made[i - 1].bundle_index < p.bundle_index);  // in bundle order
    ++count[p.bundle_index];
    const Bundle& b = spec.bundles()[p.bundle_index];
    const NodeResourceTable::Node& node = c.table.node(p.allocation.node);
    FUZZ_CHECK(!node.removed && node.state == NodeState::kAlive);
    FUZZ_CHECK(p.allocation.resources == b.resources);
    FUZZ_CHECK(b.selector.Matches(node.labels));
    FUZZ_CHECK(node.total.Contains(b.resources));
    int64_t gpu_units = 0;
    absl::flat_hash_set<uint32_t> instances;
    for (const GpuShare& s : p.allocation.gpus) {
      FUZZ_CHECK(s.index < node.gpus.count() && instances.insert(s.index).second);
      FUZZ_CHECK(s.amount.units() > 0 && s.amount <= Quantity::Whole(1));
      gpu_units += s.amount.units();
    }
    FUZZ_CHECK(gpu_units == b.resources.Get(kGpu).units());
    if (spec.strategy() == PlacementStrategy::kStrictSpread) {
      FUZZ_CHECK(!kept_nodes.contains(p.allocation.node));
      FUZZ_CHECK(made_nodes.insert(p.allocation.node).second);
    }
    if (spec.strategy() == PlacementStrategy::kStrictPack) {
      FUZZ_CHECK(p.allocation.node == made[0].allocation.node);
      if (!kept.empty()) FUZZ_CHECK(p.allocation.node == kept[0].allocation.node);
    }
  }
  for (int n : count) FUZZ_CHECK(n == 1);
}

void AddNodes(FuzzedDataProvider& in, Cluster& c) {
  const int nodes = in.ConsumeIntegralInRange(0, 12);
  for (int i = 0; i < nodes; ++i) {
    NodeSpec spec;
    // Mostly fresh ids; sometimes a repeat (ALREADY_EXISTS) or an empty one.
    const int id = in.ConsumeIntegralInRange(0, 15);
    spec.node_id = id == 15 ? "" : absl::StrCat("node-", id < 13 ? i : id);
    spec.resources.Set(kCpu, PickNodeQuantity(in));
    spec.resources.Set(kMemory, PickNodeQuantity(in));
    if (in.ConsumeBool()) spec.resources.Set("disk", PickNodeQuantity(in));
    const int gpus = in.ConsumeIntegralInRange(0, 9);
    spec.resources.Set(kGpu, gpus == 9 ? Quantity::FromUnits(in.ConsumeIntegralInRange(0, 20000000))
                                       : Quantity::Whole(gpus));
    if (gpus > 0) spec.accelerator_type = Pick(in, kTypes);
    const int labels = in.ConsumeIntegralInRange(0, 3);
    for (int l = 0; l < labels; ++l) spec.labels[Pick(in, kLabelKeys)] = Pick(in, kLabelValues);
    if (in.ConsumeIntegralInRange(0, 15) == 0) {
      spec.resources.Set(Pick(in, kResourceNames), Quantity::Whole(1));
    }
    NodeSpec copy = spec;
    absl::StatusOr<NodeIndex> index = c.table.AddNode(std::move(spec));
    if (!index.ok()) continue;
    FUZZ_CHECK(*index == c.specs.size());
    c.specs.push_back(std::move(copy));
  }
}

std::optional<PlacementGroupSpec> MakeSpec(FuzzedDataProvider& in) {
  PlacementGroupInput input;
  input.strategy = Pick(in, kStrategies);
  const int bundles = in.ConsumeIntegralInRange(0, in.ConsumeBool() ? 6 : 40);
  for (int b = 0; b < bundles; ++b) {
    BundleInput bundle;
    const int resources = in.ConsumeIntegralInRange(0, 3);
    for (int r = 0; r < resources; ++r) bundle.resources[Pick(in, kResourceNames)] = PickAmount(in);
    const int requirements = in.ConsumeIntegralInRange(0, 2);
    for (int r = 0; r < requirements; ++r) {
      LabelRequirement req;
      req.key = Pick(in, kLabelKeys);
      req.op = static_cast<LabelOperator>(in.ConsumeIntegralInRange(0, 3));
      if (req.op == LabelOperator::kIn || req.op == LabelOperator::kNotIn) {
        const int values = in.ConsumeIntegralInRange(1, 3);
        for (int v = 0; v < values; ++v) req.values.push_back(Pick(in, kLabelValues));
      }
      bundle.selector.push_back(std::move(req));
    }
    input.bundles.push_back(std::move(bundle));
  }
  absl::StatusOr<PlacementGroupSpec> spec = PlacementGroupSpec::FromInput(input);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
    return std::nullopt;
  }
  FUZZ_CHECK(spec->bundles().size() == input.bundles.size());
  return *std::move(spec);
}

// Places `g`'s unplaced bundles next to `g.placed`, checking the outcome.
void Place(Cluster& c, Group& g) {
  // Determinism: a copy of the table decides the same.
  NodeResourceTable copy = c.table;
  absl::StatusOr<PlacementDecision> twin = BundlePlacer(&copy).Place(g.spec, g.placed);
  std::vector<ResourceSet> before;
  for (NodeIndex n = 0; n < c.table.slot_count(); ++n) before.push_back(c.table.node(n).available);

  absl::StatusOr<PlacementDecision> d = BundlePlacer(&c.table).Place(g.spec, g.placed);
  FUZZ_CHECK_MSG(d.ok(), d.status().ToString());
  FUZZ_CHECK(twin.ok() && twin->outcome == d->outcome && twin->reason == d->reason &&
             twin->placements.size() == d->placements.size());
  for (size_t i = 0; i < d->placements.size(); ++i) {
    FUZZ_CHECK(twin->placements[i].bundle_index == d->placements[i].bundle_index);
    FUZZ_CHECK(twin->placements[i].allocation.node == d->placements[i].allocation.node);
    FUZZ_CHECK(twin->placements[i].allocation.gpus == d->placements[i].allocation.gpus);
  }
  if (d->outcome == PlacementOutcome::kPlaced) {
    FUZZ_CHECK(d->reason.why == PlacementWhy::kNone);
    CheckPlacements(c, g.spec, g.placed, d->placements);
    g.placed.insert(g.placed.end(), d->placements.begin(), d->placements.end());
    return;
  }
  FUZZ_CHECK(d->reason.why != PlacementWhy::kNone && d->placements.empty());
  for (NodeIndex n = 0; n < c.table.slot_count(); ++n) {
    FUZZ_CHECK_MSG(c.table.node(n).available == before[n], PlacementReasonText(d->reason));
  }
  if (d->outcome == PlacementOutcome::kInfeasible && g.placed.empty()) {
    // "No set of ALIVE nodes could ever hold it": not even when idle.
    NodeResourceTable idle = IdleCopy(c);
    absl::StatusOr<PlacementDecision> fresh = BundlePlacer(&idle).Place(g.spec);
    FUZZ_CHECK(fresh.ok());
    FUZZ_CHECK_MSG(fresh->outcome != PlacementOutcome::kPlaced,
                   absl::StrCat("INFEASIBLE (", PlacementReasonText(d->reason),
                                ") but places on the idle cluster"));
  }
}

void ReleaseGroup(Cluster& c, size_t i) {
  for (const BundlePlacement& p : c.groups[i].placed) {
    absl::Status s = c.table.Release(p.allocation);
    // A removed node took its allocations with it.
    FUZZ_CHECK_MSG(s.ok() == !c.table.node(p.allocation.node).removed, s.ToString());
  }
  c.groups.erase(c.groups.begin() + i);
}

// Text forms: Quantity and LabelSelector parse what they print.
void CheckText(FuzzedDataProvider& in) {
  const std::string text = in.ConsumeRandomLengthString(64);
  absl::StatusOr<Quantity> q = Quantity::Parse(text, "q");
  if (q.ok()) {
    FUZZ_CHECK(q->units() >= 0 && q->units() <= Quantity::kMaxUnits);
    absl::StatusOr<Quantity> again = Quantity::Parse(q->ToString(), "q");
    FUZZ_CHECK_MSG(again.ok() && *again == *q, text);
  }
  absl::StatusOr<LabelSelector> s = LabelSelector::Parse(text, "s");
  if (s.ok()) {
    absl::StatusOr<LabelSelector> again = LabelSelector::Parse(s->ToString(), "s");
    FUZZ_CHECK_MSG(again.ok() && *again == *s,
                   absl::StrCat("'", text, "' prints as '", s->ToString(), "'"));
  }
}

}  // namespace
}  // namespace berth

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace berth;
  FuzzedDataProvider in(data, size);
  Cluster c;
  AddNodes(in, c);
  CheckTable(c);
  for (int step = 0; step < 48 && in.remaining_bytes() > 0; ++step) {
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0:
      case 1: {  // a new group
        std::optional<PlacementGroupSpec> spec = MakeSpec(in);
        if (!spec) break;
        c.groups.push_back({*std::move(spec), {}});
        Place(c, c.groups.back());
        if (c.groups.back().placed.empty()) c.groups.pop_back();
        break;
      }
      case 2:  // a group removed
        if (!c.groups.empty()) {
          ReleaseGroup(c, in.ConsumeIntegralInRange<size_t>(0, c.groups.size() - 1));
        }
        break;
      case 3: {  // some bundles lost, then rescheduled
        if (c.groups.empty()) break;
        Group& g = c.groups[in.ConsumeIntegralInRange<size_t>(0, c.groups.size() - 1)];
        std::vector<BundlePlacement> kept;
        for (const BundlePlacement& p : g.placed) {
          if (in.ConsumeBool()) {
            kept.push_back(p);
          } else if (!c.table.node(p.allocation.node).removed) {
            FUZZ_CHECK(c.table.Release(p.allocation).ok());
          }
        }
        g.placed = std::move(kept);
        Place(c, g);
        break;
      }
      case 4:
      case 5: {  // a node changes state
        if (c.specs.empty()) break;
        const NodeIndex n = in.ConsumeIntegralInRange<NodeIndex>(0, c.specs.size() - 1);
        const NodeState before = c.table.node(n).state;
        const auto state = static_cast<NodeState>(in.ConsumeIntegralInRange(0, 2));
        absl::Status s = c.table.SetNodeState(c.specs[n].node_id, state);
        if (c.table.node(n).removed) {
          FUZZ_CHECK(s.code() == absl::StatusCode::kNotFound);
        } else if (before == NodeState::kDead && state != NodeState::kDead) {
          FUZZ_CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
        } else {
          FUZZ_CHECK(s.ok() && c.table.node(n).state == state);
        }
        break;
      }
      case 6: {  // a node leaves
        if (c.specs.empty()) break;
        const NodeIndex n = in.ConsumeIntegralInRange<NodeIndex>(0, c.specs.size() - 1);
        const bool was_removed = c.table.node(n).removed;
        absl::Status s = c.table.RemoveNode(c.specs[n].node_id);
        FUZZ_CHECK(was_removed ? s.code() == absl::StatusCode::kNotFound : s.ok());
        FUZZ_CHECK(c.table.node(n).removed && !c.table.FindNode(c.specs[n].node_id));
        break;
      }
      default:
        CheckText(in);
    }
    CheckTable(c);
  }
  while (!c.groups.empty()) ReleaseGroup(c, c.groups.size() - 1);
  CheckTable(c);
  for (NodeIndex n = 0; n < c.table.slot_count(); ++n) {
    const NodeResourceTable::Node& node = c.table.node(n);
    if (node.removed) continue;
    FUZZ_CHECK(node.available == node.total);
    FUZZ_CHECK(node.gpus.TotalFree() == Quantity::Whole(node.gpus.count()));
  }
  return 0;
}
