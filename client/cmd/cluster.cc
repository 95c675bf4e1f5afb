// berth status: the cluster's totals, availability and pending demand.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cmd/command.h"
#include "client/format.h"

namespace berth {
namespace {

// "CREATED 2, PENDING 1" from a state count list; `prefix` is stripped from
// the enum names.
template <typename Counts, typename NameOf>
std::string StateCounts(const Counts& counts, absl::string_view prefix, NameOf name_of) {
  if (counts.empty()) return "(none)";
  std::vector<std::string> parts;
  for (const auto& c : counts) {
    std::string name = name_of(c.state());
    if (absl::StartsWith(name, prefix)) name.erase(0, prefix.size());
    parts.push_back(absl::StrCat(name, " ", c.count()));
  }
  return absl::StrJoin(parts, ", ");
}

int RunStatus(const Context& ctx, const NoFlags&) {
  return Print(ctx, ctx.client.GetClusterStatus(), [](const v1::GetClusterStatusResponse& r) {
    return absl::StrCat(
        FormatClusterStatus(r), "\nPlacement groups: ",
        StateCounts(r.placement_groups(), "PLACEMENT_GROUP_STATE_",
                    [](v1::PlacementGroupState s) { return v1::PlacementGroupState_Name(s); }),
        "\nTrain jobs: ",
        StateCounts(r.train_jobs(), "TRAIN_JOB_STATE_",
                    [](v1::TrainJobState s) { return v1::TrainJobState_Name(s); }),
        "\n");
  });
}

}  // namespace

void AddClusterCommands(CLI::App& app, Action* action) {
  OnChosen(app.add_subcommand("status", "Cluster totals, availability and pending demand"), action,
           std::make_shared<NoFlags>(), RunStatus);
}

}  // namespace berth
