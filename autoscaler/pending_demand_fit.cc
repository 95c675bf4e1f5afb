#include "autoscaler/pending_demand_fit.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// "{GPU: 1}": one bundle's resources, sorted.
std::string BundleText(const v1::Bundle& bundle) {
  std::vector<std::string> amounts;
  for (const auto& [name, amount] : bundle.resources().amounts()) {
    std::optional<absl::string_view> type = PinnedAcceleratorType(name);
    amounts.push_back(type ? absl::StrCat("accelerator ", *type)
                           : absl::StrCat(name, ": ", amount));
  }
  std::sort(amounts.begin(), amounts.end());
  return absl::StrCat("{", absl::StrJoin(amounts, ", "), "}");
}

// "{GPU: 1} * 8 (STRICT_PACK)": runs of identical bundles counted.
std::string DemandText(const v1::PendingDemand& d) {
  std::vector<std::pair<std::string, int>> runs;
  for (const v1::Bundle& b : d.shape()) {
    std::string text = BundleText(b);
    if (!runs.empty() && runs.back().first == text) {
      ++runs.back().second;
    } else {
      runs.push_back({std::move(text), 1});
    }
  }
  std::string strategy = v1::PlacementStrategy_Name(d.strategy());
  strategy = strategy.substr(std::string("PLACEMENT_STRATEGY_").size());
  return absl::StrCat(absl::StrJoin(runs, " + ",
                                    [](std::string* out, const std::pair<std::string, int>& run) {
                                      absl::StrAppend(
                                          out, run.first,
                                          run.second > 1 ? absl::StrCat(" * ", run.second) : "");
                                    }),
                      " (", strategy, ")");
}

bool SameDemand(const v1::UnsatisfiableDemand& seen, const v1::PendingDemand& demand) {
  return seen.strategy() == demand.strategy() && seen.shape_size() == demand.shape_size() &&
         std::equal(seen.shape().begin(), seen.shape().end(), demand.shape().begin(),
                    [](const v1::Bundle& a, const v1::Bundle& b) {
                      return a.SerializeAsString() == b.SerializeAsString();
                    });
}

// Why no pool grew for `spec`: a pool could hold it but for its max_nodes
// (then it waits for room), or none could ever.
std::string UnsatisfiableReason(const std::vector<NodePool>& pools,
                                const PlacementGroupSpec& spec) {
  for (const NodePool& pool : pools) {
    if (PoolNodesCouldHold(pool, spec)) {
      return absl::StrCat("pool ", pool.name, " could hold it but is at max_nodes (",
                          pool.max_nodes, ")");
    }
  }
  return "no node pool's node shape (resources, accelerator type, labels) can hold it";
}

class DemandFitter {
 public:
  DemandFitter(const std::vector<NodePool>& pools, const std::map<std::string, uint32_t>& targets,
               SimulatedCluster* cluster)
      : pools_(pools), targets_(targets), cluster_(cluster) {
    for (const NodePool& pool : pools_) fit_.added[pool.name] = 0;
  }

  void Fit(const v1::PendingDemand& demand) {
    absl::StatusOr<PlacementGroupSpec> spec =
        PlacementGroupSpecFromProto(demand.shape(), demand.strategy(), /*allow_internal=*/true);
    if (!spec.ok()) return;  // the head validated it; nothing to plan for
    for (uint32_t copy = 0; copy < std::max<uint32_t>(demand.count(), 1); ++copy) {
      if (cluster_->Place(*spec) || GrowAPool(demand, *spec)) continue;
      ReportUnsatisfiable(demand, *spec);
    }
  }

  PendingDemandFit Take() { return std::move(fit_); }

 private:
  // Grows the first pool with room enough for `spec`; false if none has.
  bool GrowAPool(const v1::PendingDemand& demand, const PlacementGroupSpec& spec) {
    // Each new node must hold at least one bundle, so a gang never needs
    // more new nodes than it has bundles.
    const uint32_t bundles = static_cast<uint32_t>(spec.bundles().size());
    for (const NodePool& pool : pools_) {
      const uint32_t have = targets_.at(pool.name) + fit_.added[pool.name];
      const uint32_t room = std::min(bundles, pool.max_nodes > have ? pool.max_nodes - have : 0u);
      if (const uint32_t k = cluster_->GrowUntilPlaced(pool, spec, room); k > 0) {
        fit_.added[pool.name] += k;
        fit_.added_for[pool.name].push_back(DemandText(demand));
        return true;
      }
    }
    return false;
  }

  void ReportUnsatisfiable(const v1::PendingDemand& demand, const PlacementGroupSpec& spec) {
    for (const v1::UnsatisfiableDemand& seen : fit_.unsatisfiable) {
      if (SameDemand(seen, demand)) return;
    }
    v1::UnsatisfiableDemand& u = fit_.unsatisfiable.emplace_back();
    *u.mutable_shape() = demand.shape();
    u.set_strategy(demand.strategy());
    u.set_reason(UnsatisfiableReason(pools_, spec));
  }

  const std::vector<NodePool>& pools_;
  const std::map<std::string, uint32_t>& targets_;
  SimulatedCluster* cluster_;
  PendingDemandFit fit_;
};

}  // namespace

PendingDemandFit FitPendingDemand(const std::vector<NodePool>& pools,
                                  const std::map<std::string, uint32_t>& targets,
                                  const std::vector<v1::PendingDemand>& pending,
                                  SimulatedCluster* cluster) {
  DemandFitter fitter(pools, targets, cluster);
  for (const v1::PendingDemand& demand : pending) fitter.Fit(demand);
  return fitter.Take();
}

}  // namespace berth
