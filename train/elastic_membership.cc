#include "train/elastic_membership.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "train/attempt_plan.h"

namespace berth {
namespace {

// Whether rank `w` runs in one of the job's elastic groups (not its own).
bool InElasticGroup(const v1::TrainJobInfo& job, const v1::WorkerRank& w) {
  return !w.placement_group_id().empty() && w.placement_group_id() != job.placement_group_id();
}

// The elastic groups the attempt's ranks run in.
std::set<std::string> ElasticInUse(const v1::TrainJobInfo& job) {
  std::set<std::string> ids;
  for (const v1::WorkerRank& w : job.workers()) {
    if (InElasticGroup(job, w)) ids.insert(w.placement_group_id());
  }
  return ids;
}

// How many of the attempt's ranks run in the job's own group.
size_t CoreWorkers(const v1::TrainJobInfo& job) {
  return std::count_if(job.workers().begin(), job.workers().end(),
                       [&](const v1::WorkerRank& w) { return !InElasticGroup(job, w); });
}

// Why one of the attempt's ranks can no longer run where it does, or "".
std::string RankLoss(const v1::TrainJobInfo& job, const JobWorld& world,
                     const std::vector<BundleSite>& core_sites, const v1::WorkerRank& w) {
  if (!InElasticGroup(job, w)) {
    if (world.group.ok() && (w.bundle_index() >= core_sites.size() ||
                             core_sites[w.bundle_index()].node_id != w.node_id())) {
      return absl::StrCat("the job's group lost bundle ", w.bundle_index(), " (node ", w.node_id(),
                          ")");
    }
    return "";
  }
  auto g = world.elastic.find(w.placement_group_id());
  if (g == world.elastic.end() || !g->second.ok()) return "";  // the head's error: ask again
  if (g->second->state() != v1::PLACEMENT_GROUP_STATE_CREATED) {
    return absl::StrCat("elastic group ", w.placement_group_id(), " lost its bundle");
  }
  if (g->second->preempting()) {
    return absl::StrCat("elastic group ", w.placement_group_id(),
                        " is preempted: ", g->second->preempted_by());
  }
  return "";
}

}  // namespace

ElasticMembership::ElasticMembership(bool elastic, size_t core_bundles, uint32_t min_workers,
                                     uint32_t num_workers)
    : elastic_(elastic),
      core_bundles_(core_bundles),
      min_workers_(min_workers),
      num_workers_(num_workers) {}

bool ElasticMembership::WantsAnotherGroup(const v1::TrainJobInfo& job) const {
  return elastic_ && job.elastic_group_ids_size() < static_cast<int>(num_workers_ - core_bundles_);
}

std::vector<uint32_t> ElasticMembership::CoreBundlesToRun(const v1::TrainJobInfo& job,
                                                          const JobWorld& world) const {
  if (!world.group.ok()) return {};
  std::vector<uint32_t> bundles;
  if (world.group->state() == v1::PLACEMENT_GROUP_STATE_CREATED) {
    for (uint32_t b = 0; b < core_bundles_; ++b) bundles.push_back(b);
    return bundles;
  }
  if (!elastic_ || world.group->state() != v1::PLACEMENT_GROUP_STATE_RESCHEDULING) return {};
  // Only bundles the last attempt ran on: those are committed on their
  // raylets (one placed again may still be in two-phase commit).
  const std::vector<BundleSite> sites = SitesOf(*world.group);
  for (const v1::WorkerRank& w : job.workers()) {
    if (!InElasticGroup(job, w) && w.bundle_index() < sites.size() &&
        sites[w.bundle_index()].node_id == w.node_id()) {
      bundles.push_back(w.bundle_index());
    }
  }
  std::sort(bundles.begin(), bundles.end());
  size_t placed = bundles.size();
  for (const auto& [id, group] : world.elastic) placed += GroupUsable(group) ? 1 : 0;
  // Rank 0's bundle holds the trainer.
  if (bundles.empty() || bundles[0] != 0 || placed < min_workers_) return {};
  return bundles;
}

AttemptMembers ElasticMembership::NextAttempt(const v1::TrainJobInfo& job, const JobWorld& world,
                                              const std::vector<uint32_t>& core) const {
  AttemptMembers members;
  const std::vector<BundleSite> group_sites = SitesOf(*world.group);
  for (uint32_t b : core) {
    members.sites.push_back(group_sites[b]);
    members.bundles.emplace_back("", b);
  }
  for (const std::string& id : job.elastic_group_ids()) {
    auto g = world.elastic.find(id);
    if (g == world.elastic.end() || !GroupUsable(g->second)) continue;
    members.sites.push_back(SitesOf(*g->second)[0]);
    members.bundles.emplace_back(id, 0);
  }
  return members;
}

void ElasticMembership::RecordResize(absl::Time now, uint32_t attempt, uint32_t world_size,
                                     const std::string& reason, v1::TrainJobInfo* job) const {
  if (!elastic_ || job->workers_size() == 0) return;
  if (reason.empty() && static_cast<uint32_t>(job->workers_size()) == world_size) return;
  v1::ResizeEvent* resize = job->add_resizes();
  resize->set_unix_ms(absl::ToUnixMillis(now));
  resize->set_attempt(attempt);
  resize->set_from(job->workers_size());
  resize->set_to(world_size);
  resize->set_reason(reason.empty() ? "restarted with the workers placed" : reason);
}

std::string ElasticMembership::Loss(const v1::TrainJobInfo& job, const JobWorld& world,
                                    const std::set<std::string>& nodes,
                                    int64_t placed_unix_ms) const {
  if (!elastic_ || GroupGone(world)) return "";  // the latter: a failure (PlacementChange)
  if (std::optional<std::string> lost = FirstLostNode(nodes, world)) return NodeDeathCause(*lost);
  const std::vector<BundleSite> core_sites =
      world.group.ok() ? SitesOf(*world.group) : std::vector<BundleSite>{};
  for (const v1::WorkerRank& w : job.workers()) {
    if (std::string loss = RankLoss(job, world, core_sites, w); !loss.empty()) return loss;
  }
  // An attempt on all of the group: placed again since it started, even if
  // the node it lost came back under the same id and took its bundles back
  // between two looks.
  if (world.group.ok() && CoreWorkers(job) == core_bundles_ && placed_unix_ms != 0 &&
      world.group->state() == v1::PLACEMENT_GROUP_STATE_CREATED &&
      world.group->placed_unix_ms() != placed_unix_ms) {
    return "the job's group was placed again (a node of the attempt was lost)";
  }
  return "";
}

std::string ElasticMembership::ToRelease(const v1::TrainJobInfo& job, const JobWorld& world,
                                         bool running) const {
  const std::set<std::string> in_use = running ? ElasticInUse(job) : std::set<std::string>{};
  for (const auto& [id, group] : world.elastic) {
    if (in_use.count(id) == 0 && group.ok() && (group->preempting() || group->moving())) return id;
  }
  return "";
}

size_t ElasticMembership::Ready(const v1::TrainJobInfo& job, const JobWorld& world) const {
  const std::set<std::string> in_use = ElasticInUse(job);
  size_t ready = 0;
  for (const auto& [id, group] : world.elastic) {
    if (in_use.count(id) == 0 && GroupUsable(group)) ++ready;
  }
  // The job's own bundles placed again (all committed once it is CREATED).
  if (world.group.ok() && world.group->state() == v1::PLACEMENT_GROUP_STATE_CREATED) {
    ready += core_bundles_ - std::min(CoreWorkers(job), core_bundles_);
  }
  return ready;
}

std::string ElasticMembership::GrowReason(const v1::TrainJobInfo& job, const JobWorld& world) {
  if (!elastic_) return "";
  const uint64_t checkpoint = job.latest_checkpoint_step();
  if (const size_t ready = Ready(job, world); ready == 0) {
    grow_after_checkpoint_ = -1;
  } else if (grow_after_checkpoint_ < 0) {
    grow_after_checkpoint_ = static_cast<int64_t>(checkpoint);
  } else if (static_cast<int64_t>(checkpoint) > grow_after_checkpoint_) {
    return absl::StrCat(ready, " more worker(s) placed; grown at the checkpoint of step ",
                        checkpoint);
  }
  return "";
}

}  // namespace berth
