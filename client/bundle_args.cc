#include "client/bundle_args.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/proto_convert.h"
#include "scheduler/label_selector.h"
#include "scheduler/placement_group_spec.h"
#include "scheduler/quantity.h"
#include "scheduler/resource_set.h"

namespace berth {
namespace {

constexpr absl::string_view kBundleExample = "want e.g. \"GPU=1,CPU=2,memory=16Gi;zone in (a,b)\"";

absl::Status ParseResources(absl::string_view text, absl::string_view field, v1::ResourceSet* out) {
  bool any_nonzero = false;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": '", item, "' is not NAME=QUANTITY; ", kBundleExample));
    }
    const std::string name(absl::StripAsciiWhitespace(item.substr(0, eq)));
    const std::string entry_field = absl::StrCat(field, "[\"", name, "\"]");
    if (absl::Status s = ValidateResourceName(name, field); !s.ok()) return s;
    // The head would reject it too, but in terms of the wire field; say here
    // what to write instead.
    if (absl::StartsWith(name, kAcceleratorResourcePrefix)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", name, " is internal; select the accelerator with \";", kAcceleratorTypeLabel,
          " in (", name.substr(kAcceleratorResourcePrefix.size()), ")\""));
    }
    if (out->amounts().contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", name, " given twice"));
    }
    absl::StatusOr<Quantity> amount =
        Quantity::Parse(absl::StripAsciiWhitespace(item.substr(eq + 1)), entry_field);
    if (!amount.ok()) return amount.status();
    any_nonzero |= !amount->IsZero();
    (*out->mutable_amounts())[name] = amount->ToDouble();
  }
  if (!any_nonzero) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": a bundle needs at least one non-zero resource; ", kBundleExample));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Bundle> ParseBundleArg(absl::string_view text, absl::string_view field) {
  // Selectors contain commas ("zone in (a,b), !spot") but never ';'.
  const size_t semicolon = text.find(';');
  const absl::string_view resources = text.substr(0, semicolon);
  v1::Bundle bundle;
  if (absl::StripAsciiWhitespace(resources).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": no resources; ", kBundleExample));
  }
  if (absl::Status s = ParseResources(resources, field, bundle.mutable_resources()); !s.ok()) {
    return s;
  }
  if (semicolon != absl::string_view::npos) {
    absl::StatusOr<LabelSelector> selector =
        LabelSelector::Parse(text.substr(semicolon + 1), absl::StrCat(field, ".selector"));
    if (!selector.ok()) return selector.status();
    LabelSelectorToProto(*selector, bundle.mutable_selector());
  }
  return bundle;
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
