#include "client/bundle_args.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/substitute.h"
#include "placement/label_selector.h"
#include "placement/placement_group_spec.h"
#include "placement/quantity.h"
#include "placement/resource_set.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

constexpr absl::string_view kBundleExample = "want e.g. \"GPU=1,CPU=2,memory=16Gi;zone in (a,b)\"";
constexpr absl::string_view kResourcesExample = "want e.g. \"GPU=1,CPU=2,memory=16Gi\"";

// `NAME=QUANTITY,...` (ParseResourceList) into a resource set, zero
// amounts kept. `example`
// ends the syntax errors; `accelerator_hint` ($0 = the type) says what to
// write instead of an internal accelerator_type:* name (the head would
// reject it too, but in terms of the wire field).
absl::StatusOr<v1::ResourceSet> ParseResources(absl::string_view text, absl::string_view field,
                                               absl::string_view example,
                                               absl::string_view accelerator_hint) {
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": no resources; ", example));
  }
  absl::StatusOr<std::vector<std::pair<std::string, Quantity>>> amounts =
      ParseResourceList(text, field, example);
  if (!amounts.ok()) return amounts.status();
  v1::ResourceSet out;
  for (const auto& [name, amount] : *amounts) {
    if (std::optional<absl::string_view> type = PinnedAcceleratorType(name)) {
      return InternalAcceleratorResource(absl::StrCat(field, "[\"", name, "\"]"), *type,
                                         accelerator_hint);
    }
    (*out.mutable_amounts())[name] = amount.ToDouble();
  }
  return out;
}

}  // namespace

absl::StatusOr<v1::Bundle> ParseBundleArg(absl::string_view text, absl::string_view field) {
  // Selectors contain commas ("zone in (a,b), !spot") but never ';'.
  const size_t semicolon = text.find(';');
  absl::StatusOr<v1::ResourceSet> resources = ParseResources(
      text.substr(0, semicolon), field, kBundleExample,
      absl::StrCat("select the accelerator with \";", kAcceleratorTypeLabel, " in ($0)\""));
  if (!resources.ok()) return resources.status();
  // The head drops zero amounts; a bundle of nothing but zeros is a typo.
  bool any_nonzero = false;
  for (const auto& [name, amount] : resources->amounts()) any_nonzero |= amount != 0;
  if (!any_nonzero) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": a bundle needs at least one non-zero resource; ", kBundleExample));
  }
  v1::Bundle bundle;
  *bundle.mutable_resources() = *std::move(resources);
  if (semicolon != absl::string_view::npos) {
    absl::StatusOr<LabelSelector> selector =
        LabelSelector::Parse(text.substr(semicolon + 1), absl::StrCat(field, ".selector"));
    if (!selector.ok()) return selector.status();
    LabelSelectorToProto(*selector, bundle.mutable_selector());
  }
  return bundle;
}

absl::StatusOr<v1::ResourceSet> ParseResourcesArg(absl::string_view text, absl::string_view field) {
  return ParseResources(text, field, kResourcesExample,
                        "select the accelerator with --accelerator-type $0");
}

absl::StatusOr<std::vector<v1::Bundle>> ParseBundleArgs(const std::vector<std::string>& args,
                                                        int replicas) {
  if (args.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bundle: at least one is required; ", kBundleExample));
  }
  if (replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--replicas: ", replicas, " is not >= 1"));
  }
  if (static_cast<size_t>(replicas) > PlacementGroupSpec::kMaxBundles / args.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--replicas: ", replicas, " x ", args.size(),
                                                   " bundles is more than ",
                                                   PlacementGroupSpec::kMaxBundles));
  }
  std::vector<v1::Bundle> bundles;
  bundles.reserve(args.size() * replicas);
  for (size_t i = 0; i < args.size(); ++i) {
    absl::StatusOr<v1::Bundle> bundle = ParseBundleArg(args[i], absl::StrCat("--bundle[", i, "]"));
    if (!bundle.ok()) return bundle.status();
    bundles.push_back(*std::move(bundle));
  }
  for (int r = 1; r < replicas; ++r) {
    for (size_t i = 0; i < args.size(); ++i) bundles.push_back(bundles[i]);
  }
  return bundles;
}

absl::StatusOr<v1::PlacementStrategy> ParseStrategyArg(absl::string_view text) {
  absl::StatusOr<PlacementStrategy> strategy = ParsePlacementStrategy(text, "--strategy");
  if (!strategy.ok()) return strategy.status();
  return StrategyToProto(*strategy);
}

absl::StatusOr<v1::PlacementGroupState> ParsePlacementGroupStateArg(absl::string_view text) {
  v1::PlacementGroupState state;
  const std::string upper = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  if (upper == "UNSPECIFIED" ||
      !v1::PlacementGroupState_Parse(absl::StrCat("PLACEMENT_GROUP_STATE_", upper), &state)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--state: unknown state '", text,
                     "' (want PENDING, PREPARED, CREATED, RESCHEDULING or REMOVED)"));
  }
  return state;
}

}  // namespace berth
