// berth status: the cluster's totals, availability and pending demand.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cmd/command.h"
#include "client/format.h"
#include "common/head_addresses.h"

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

// "Head: A (epoch 3)", or with several addresses given, each one's role:
// the head that answered is active; every other address is asked alone.
std::string HeadsLine(const Context& ctx, const v1::HeadInfo& active) {
  const std::vector<std::string> addresses = SplitHeadAddresses(ctx.address);
  const std::string epoch = absl::StrCat("epoch ", active.epoch());
  if (addresses.size() < 2) return absl::StrCat("Head: ", active.address(), " (", epoch, ")\n");
  std::vector<std::string> roles = {absl::StrCat(active.address(), " active (", epoch, ")")};
  HeadClientOptions options = ctx.options;
  options.timeout = absl::Seconds(2);
  options.max_retries = 0;  // a head that is down is reported, not waited for
  for (const std::string& address : addresses) {
    if (address == active.address()) continue;
    absl::StatusOr<std::unique_ptr<HeadClient>> alone = HeadClient::Create(address, options);
    absl::Status answer = alone.ok() ? (*alone)->GetClusterStatus().status() : alone.status();
    std::string role = "unreachable";
    if (absl::StartsWith(answer.message(), kStandbyHeadAnswer)) {
      role = "standby";
    } else if (answer.ok()) {
      role = "active too?";  // a second active head: say so rather than hide it
    }
    roles.push_back(absl::StrCat(address, " ", role));
  }
  return absl::StrCat("Heads: ", absl::StrJoin(roles, "; "), "\n");
}

int RunStatus(const Context& ctx, const NoFlags&) {
  return Print(ctx, ctx.client.GetClusterStatus(), [&ctx](const v1::GetClusterStatusResponse& r) {
    return absl::StrCat(
        HeadsLine(ctx, r.head()), FormatClusterStatus(r), "\nPlacement groups: ",
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
