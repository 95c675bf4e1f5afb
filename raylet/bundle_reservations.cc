#include "raylet/bundle_reservations.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

std::vector<GpuShare> SortedByIndex(std::vector<GpuShare> shares) {
  std::sort(shares.begin(), shares.end(),
            [](const GpuShare& a, const GpuShare& b) { return a.index < b.index; });
  return shares;
}

// Checks one bundle's shape against the node (not against what is free).
absl::Status ValidateBundle(const BundleRequest& bundle, uint32_t gpu_count,
                            const std::string& field) {
  if (bundle.resources.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".resources: a bundle needs resources"));
  }
  const Quantity gpus = bundle.resources.Get(kGpu);
  if (absl::Status s = ValidateGpuRequest(gpus, absl::StrCat(field, ".resources.amounts[\"GPU\"]"));
      !s.ok()) {
    return s;
  }
  int64_t share_units = 0;
  for (size_t j = 0; j < bundle.gpus.size(); ++j) {
    const GpuShare& share = bundle.gpus[j];
    const std::string share_field = absl::StrCat(field, ".gpus[", j, "]");
    if (share.index >= gpu_count) {
      return absl::InvalidArgumentError(absl::StrCat(share_field, ".index: GPU ", share.index,
                                                     " does not exist (the node has ", gpu_count,
                                                     " GPUs)"));
    }
    if (share.amount.units() < 1 || share.amount > Quantity::Whole(1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(share_field, ".units: ", share.amount.units(), " is not in 1..10000"));
    }
    share_units += share.amount.units();
  }
  if (share_units != gpus.units()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".gpus: the shares sum to ", Quantity::FromUnits(share_units).ToString(),
        " GPU but the bundle's resources ask for ", gpus.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string BundleKey::ToString() const {
  return absl::StrCat("bundle ", bundle_index, " of placement group ", placement_group_id);
}

BundleReservations::BundleReservations(ResourceSet total, uint32_t gpu_count)
    : total_(std::move(total)), free_(total_), free_gpus_(gpu_count) {}

absl::StatusOr<PrepareOutcome> BundleReservations::Prepare(
    const std::string& placement_group_id, const std::vector<BundleRequest>& bundles) {
  if (bundles.empty())
    return absl::InvalidArgumentError("bundles: at least one bundle is required");
  // Work on copies and swap them in at the end: all or nothing.
  ResourceSet free = free_;
  GpuInstances free_gpus = free_gpus_;
  std::vector<ReservedBundle> added;
  std::set<uint32_t> seen;
  for (size_t i = 0; i < bundles.size(); ++i) {
    const BundleRequest& bundle = bundles[i];
    const std::string field = absl::StrCat("bundles[", i, "]");
    if (!seen.insert(bundle.bundle_index).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".bundle_index: bundle ", bundle.bundle_index, " is listed twice"));
    }
    if (absl::Status s = ValidateBundle(bundle, free_gpus_.count(), field); !s.ok()) return s;
    ReservedBundle reserved{{placement_group_id, bundle.bundle_index},
                            bundle.resources,
                            SortedByIndex(bundle.gpus),
                            BundleState::kPrepared};
    if (const ReservedBundle* held = Find(reserved.key)) {
      if (held->resources == reserved.resources && held->gpus == reserved.gpus) continue;
      return absl::FailedPreconditionError(
          absl::StrCat(field, ": ", reserved.key.ToString(), " is already held here with ",
                       held->resources.ToString(), " on GPUs [", GpuIdsToString(held->gpus),
                       "]; this request asks for ", reserved.resources.ToString(), " on GPUs [",
                       GpuIdsToString(reserved.gpus), "]"));
    }
    if (!free.Contains(reserved.resources)) {
      const std::string name = free.FirstShortfall(reserved.resources);
      return PrepareOutcome{false,
                            absl::StrCat("bundle ", bundle.bundle_index, " needs ", name, ": ",
                                         reserved.resources.Get(name).ToString(), ", the node has ",
                                         free.Get(name).ToString(), " free")};
    }
    if (absl::Status s = free_gpus.Take(reserved.gpus); !s.ok()) {
      if (s.code() != absl::StatusCode::kResourceExhausted) return s;
      return PrepareOutcome{false, absl::StrCat("bundle ", bundle.bundle_index, ": ", s.message())};
    }
    if (absl::Status s = free.Subtract(reserved.resources); !s.ok()) return s;
    added.push_back(std::move(reserved));
  }
  free_ = std::move(free);
  free_gpus_ = std::move(free_gpus);
  for (ReservedBundle& b : added) {
    BundleKey key = b.key;
    bundles_.emplace(std::move(key), std::move(b));
  }
  return PrepareOutcome{true, ""};
}

absl::Status BundleReservations::Commit(const std::string& placement_group_id,
                                        const std::vector<uint32_t>& bundle_indices) {
  std::vector<ReservedBundle*> to_commit;
  for (size_t i = 0; i < bundle_indices.size(); ++i) {
    auto it = bundles_.find({placement_group_id, bundle_indices[i]});
    if (it == bundles_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "bundle_indices[", i, "]: ", BundleKey{placement_group_id, bundle_indices[i]}.ToString(),
          " is not prepared on this node"));
    }
    to_commit.push_back(&it->second);
  }
  for (ReservedBundle* b : to_commit) b->state = BundleState::kCommitted;
  return absl::OkStatus();
}

std::vector<BundleKey> BundleReservations::Cancel(const std::string& placement_group_id,
                                                  const std::vector<uint32_t>& bundle_indices) {
  std::vector<BundleKey> released;
  if (bundle_indices.empty()) {
    auto it = bundles_.lower_bound({placement_group_id, 0});
    while (it != bundles_.end() && it->first.placement_group_id == placement_group_id) {
      released.push_back(it->first);
      Release(it++);
    }
    return released;
  }
  for (uint32_t index : bundle_indices) {
    auto it = bundles_.find({placement_group_id, index});
    if (it == bundles_.end()) continue;
    released.push_back(it->first);
    Release(it);
  }
  return released;
}

std::vector<BundleKey> BundleReservations::ReleaseUnused(
    const std::set<BundleKey>& in_use, const std::vector<ReservedBundle>& expected) {
  std::map<BundleKey, const ReservedBundle*> as_expected;
  for (const ReservedBundle& b : expected) as_expected[b.key] = &b;
  std::vector<BundleKey> released;
  for (auto it = bundles_.begin(); it != bundles_.end();) {
    const auto want = as_expected.find(it->first);
    const bool differs =
        want != as_expected.end() && (want->second->resources != it->second.resources ||
                                      SortedByIndex(want->second->gpus) != it->second.gpus);
    if (in_use.count(it->first) > 0 && !differs) {
      ++it;
      continue;
    }
    released.push_back(it->first);
    Release(it++);
  }
  return released;
}

const ReservedBundle* BundleReservations::Find(const BundleKey& key) const {
  auto it = bundles_.find(key);
  return it == bundles_.end() ? nullptr : &it->second;
}

absl::StatusOr<ResourceSet> BundleReservations::CommittedSum(const std::string& placement_group_id,
                                                             const std::set<uint32_t>& indices,
                                                             absl::string_view field) const {
  ResourceSet sum;
  for (uint32_t index : indices) {
    const BundleKey key{placement_group_id, index};
    const ReservedBundle* bundle = Find(key);
    if (bundle == nullptr || bundle->state != BundleState::kCommitted) {
      return absl::FailedPreconditionError(
          absl::StrCat(field, ": ", key.ToString(), " is not committed on this node"));
    }
    if (absl::Status s = sum.Add(bundle->resources); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", s.message()));
    }
  }
  return sum;
}

std::vector<ReservedBundle> BundleReservations::List() const {
  std::vector<ReservedBundle> out;
  out.reserve(bundles_.size());
  for (const auto& [key, bundle] : bundles_) out.push_back(bundle);
  return out;
}

void BundleReservations::Release(std::map<BundleKey, ReservedBundle>::iterator it) {
  // Both give back exactly what Prepare took from the same free pools, so
  // neither can overflow a total nor overfill an instance.
  free_.Add(it->second.resources).IgnoreError();
  free_gpus_.Release(it->second.gpus).IgnoreError();
  bundles_.erase(it);
}

}  // namespace berth
