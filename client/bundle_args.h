// Parsing of resource and placement arguments (`berth pg`, `berth job`) into
// wire types.
//
// Pure functions, no I/O. A bundle is written `NAME=QUANTITY,...`, optionally
// followed by `;` and a label selector:
//   --bundle "GPU=1,CPU=2,memory=16Gi"
//   --bundle "GPU=1;zone in (a,b), !spot"
// Quantities go through Quantity::Parse (so "0.5" and "16Gi" work) and
// selectors through LabelSelector::Parse. Every error is INVALID_ARGUMENT
// naming the flag and, for repeated flags, the index: `--bundle[2]: ...`.
#ifndef BERTH_CLIENT_BUNDLE_ARGS_H_
#define BERTH_CLIENT_BUNDLE_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/v1/common.pb.h"

namespace berth {

// One `--bundle` value; `field` names it in errors, e.g. "--bundle[2]".
absl::StatusOr<v1::Bundle> ParseBundleArg(absl::string_view text, absl::string_view field);

// A resource list without selector, as `berth job submit` takes it:
// `--trainer-resources "CPU=1,memory=200Gi"`. Zero amounts are kept (the
// head drops them, so "CPU=0" asks for none); `field` names the flag.
absl::StatusOr<v1::ResourceSet> ParseResourcesArg(absl::string_view text, absl::string_view field);

// Every `--bundle` value in order, the whole list repeated `replicas` times
// (`--replicas`, >= 1). At most PlacementGroupSpec::kMaxBundles in all.
absl::StatusOr<std::vector<v1::Bundle>> ParseBundleArgs(const std::vector<std::string>& args,
                                                        int replicas);

// `--strategy`: PACK, SPREAD, STRICT_PACK, STRICT_SPREAD, any case.
absl::StatusOr<v1::PlacementStrategy> ParseStrategyArg(absl::string_view text);

// `--state`: PENDING, PREPARED, CREATED, RESCHEDULING, REMOVED, any case.
absl::StatusOr<v1::PlacementGroupState> ParsePlacementGroupStateArg(absl::string_view text);

}  // namespace berth

#endif  // BERTH_CLIENT_BUNDLE_ARGS_H_
