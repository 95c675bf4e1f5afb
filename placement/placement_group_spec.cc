#include "placement/placement_group_spec.h"

#include <algorithm>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "placement/gpu_instances.h"

namespace berth {

absl::string_view PlacementStrategyName(PlacementStrategy strategy) {
  switch (strategy) {
    case PlacementStrategy::kPack:
      return "PACK";
    case PlacementStrategy::kSpread:
      return "SPREAD";
    case PlacementStrategy::kStrictPack:
      return "STRICT_PACK";
    case PlacementStrategy::kStrictSpread:
      return "STRICT_SPREAD";
  }
  return "UNKNOWN";
}

absl::StatusOr<PlacementStrategy> ParsePlacementStrategy(absl::string_view text,
                                                         absl::string_view field) {
  const std::string upper = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  for (PlacementStrategy s : {PlacementStrategy::kPack, PlacementStrategy::kSpread,
                              PlacementStrategy::kStrictPack, PlacementStrategy::kStrictSpread}) {
    if (upper == PlacementStrategyName(s)) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": unknown strategy '", text, "' (want PACK, SPREAD, STRICT_PACK or STRICT_SPREAD)"));
}

namespace {

absl::Status ValidateTopology(const Topology& topology) {
  if (!topology.required.empty() && !topology.preferred.empty()) {
    return absl::InvalidArgumentError(
        "topology: give required (one domain, or wait) or preferred (fewest domains), not both");
  }
  if (!topology.required.empty()) return ValidateLabelKey(topology.required, "topology.required");
  if (topology.preferred.size() > Topology::kMaxPreferred) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology.preferred: ", topology.preferred.size(), " keys; at most ",
                     Topology::kMaxPreferred));
  }
  for (size_t i = 0; i < topology.preferred.size(); ++i) {
    const std::string field = absl::StrCat("topology.preferred[", i, "]");
    if (absl::Status s = ValidateLabelKey(topology.preferred[i], field); !s.ok()) return s;
    for (size_t j = 0; j < i; ++j) {
      if (topology.preferred[j] == topology.preferred[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": '", topology.preferred[i], "' is listed twice"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

const Topology& PlacementGroupSpec::topology() const {
  static const Topology* const kNone = new Topology();
  return topology_ != nullptr ? *topology_ : *kNone;
}

absl::StatusOr<PlacementGroupSpec> PlacementGroupSpec::Create(std::vector<Bundle> bundles,
                                                              PlacementStrategy strategy,
                                                              Topology topology) {
  if (bundles.empty()) {
    return absl::InvalidArgumentError("bundles: a placement group needs at least one bundle");
  }
  if (bundles.size() > kMaxBundles) {
    return absl::InvalidArgumentError(
        absl::StrCat("bundles: ", bundles.size(), " bundles; at most ", kMaxBundles));
  }
  PlacementGroupSpec spec;
  for (size_t i = 0; i < bundles.size(); ++i) {
    const ResourceSet& r = bundles[i].resources;
    const std::string field = absl::StrCat("bundles[", i, "].resources");
    if (r.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": empty bundle; a bundle must request some resource"));
    }
    for (const auto& [name, amount] : r.entries()) {
      if (amount > Quantity::FromUnits(Quantity::kMaxUnits)) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, "[\"", name.str(), "\"]: larger than the maximum quantity"));
      }
    }
    if (absl::Status s = ValidateGpuRequest(r.Get(kGpu), absl::StrCat(field, "[\"GPU\"]"));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = spec.total_.Add(r); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bundles: the group's total demand overflows (", s.message(), ")"));
    }
  }
  if (absl::Status s = ValidateTopology(topology); !s.ok()) return s;
  spec.bundles_.assign(std::make_move_iterator(bundles.begin()),
                       std::make_move_iterator(bundles.end()));
  spec.strategy_ = strategy;
  if (!topology.empty()) spec.topology_ = std::make_shared<const Topology>(std::move(topology));
  return spec;
}

absl::StatusOr<PlacementGroupSpec> PlacementGroupSpec::FromInput(const PlacementGroupInput& input) {
  absl::StatusOr<PlacementStrategy> strategy = ParsePlacementStrategy(input.strategy, "strategy");
  if (!strategy.ok()) return strategy.status();
  std::vector<Bundle> bundles;
  bundles.reserve(input.bundles.size());
  for (size_t i = 0; i < input.bundles.size(); ++i) {
    absl::StatusOr<ResourceSet> resources = ResourceSet::FromDoubles(
        input.bundles[i].resources, absl::StrCat("bundles[", i, "].resources"));
    if (!resources.ok()) return resources.status();
    absl::StatusOr<LabelSelector> selector =
        LabelSelector::Create(input.bundles[i].selector, absl::StrCat("bundles[", i, "].selector"));
    if (!selector.ok()) return selector.status();
    bundles.push_back({*std::move(resources), *std::move(selector)});
  }
  return Create(std::move(bundles), *strategy);
}

std::optional<std::vector<std::string>> AllowedAcceleratorTypes(
    absl::Span<const Bundle> bundles, const std::vector<uint32_t>& indices) {
  std::optional<std::vector<std::string>> allowed;
  auto restrict = [&](std::vector<std::string> types) {
    std::sort(types.begin(), types.end());
    types.erase(std::unique(types.begin(), types.end()), types.end());
    if (!allowed) {
      allowed = std::move(types);
      return;
    }
    std::vector<std::string> both;
    std::set_intersection(allowed->begin(), allowed->end(), types.begin(), types.end(),
                          std::back_inserter(both));
    allowed = std::move(both);
  };
  for (uint32_t b : indices) {
    for (const auto& [name, amount] : bundles[b].resources.entries()) {
      if (std::optional<absl::string_view> type = PinnedAcceleratorType(name)) {
        restrict({std::string(*type)});
      }
    }
    if (auto v = bundles[b].selector.AllowedValues(kAcceleratorTypeLabel)) restrict(*v);
  }
  return allowed;
}

}  // namespace berth
