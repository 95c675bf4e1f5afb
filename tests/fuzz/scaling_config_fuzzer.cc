// Fuzzes the train layer's ScalingConfig validation (train/scaling_config.h)
// as the head runs it on SubmitTrainJob: the input is a v1::TrainJobSpec in
// protobuf binary, turned into a placement group by PlacementGroupForJob. A
// group that validates must have the documented shape, survive the proto
// round trip the head uses to report it, and place on and release from a
// small simulated cluster without leaking a unit.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "berth/v1/train.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "placement/bundle_placer.h"
#include "placement/node_resource_table.h"
#include "tests/fuzz/fuzz_check.h"
#include "train/scaling_config.h"
#include "train/train_job_spec.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// Quantities survive ToDouble/FromDouble exactly below 2^51 units; above,
// the double may be a few units off (the wire type is double).
bool CloseEnough(Quantity a, Quantity b) {
  const int64_t diff = a.units() > b.units() ? a.units() - b.units() : b.units() - a.units();
  return diff == 0 || (a.units() >= (int64_t{1} << 51) && diff <= (a.units() >> 48));
}

bool SameResources(const ResourceSet& a, const ResourceSet& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a.entries()[i].first != b.entries()[i].first ||
        !CloseEnough(a.entries()[i].second, b.entries()[i].second)) {
      return false;
    }
  }
  return true;
}

NodeResourceTable SmallCluster() {
  NodeResourceTable table;
  auto add = [&](const std::string& id, ResourceSet r, const std::string& type) {
    NodeSpec spec;
    spec.node_id = id;
    spec.resources = std::move(r);
    spec.accelerator_type = type;
    table.AddNode(std::move(spec)).value();
  };
  add("a10g-0", ResourceSet::Of({{kCpu, 48}, {kGpu, 4}, {kMemory, 192.0 * (1 << 30)}}), "A10G");
  add("a10g-1", ResourceSet::Of({{kCpu, 48}, {kGpu, 4}, {kMemory, 192.0 * (1 << 30)}}), "A10G");
  add("a100-0", ResourceSet::Of({{kCpu, 96}, {kGpu, 8}, {kMemory, 1024.0 * (1 << 30)}}), "A100");
  add("cpu-0", ResourceSet::Of({{kCpu, 64}, {kMemory, 256.0 * (1 << 30)}}), "");
  return table;
}

void CheckGroup(const v1::TrainJobSpec& job, const PlacementGroupSpec& group) {
  const v1::ScalingConfig& s = job.scaling_config();
  const size_t n = group.bundles().size();
  FUZZ_CHECK(n == s.num_workers());
  const std::string accelerator = AcceleratorResourceName(s.accelerator_type());
  // Without per-rank fields every worker bundle is the same, and bundle 0
  // adds the trainer to it.
  const bool alike = s.rank_resources().empty() && s.resources_per_worker_list().empty() &&
                     s.label_selector_size() <= 1;
  FUZZ_CHECK(!alike || WorkerBundlesAlike(group));
  FUZZ_CHECK(s.resources_per_worker_list().empty() ||
             s.resources_per_worker_list_size() == static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) {
    const Bundle& b = group.bundles()[i];
    FUZZ_CHECK(!b.resources.empty());
    FUZZ_CHECK(b.selector.empty() ==
               (s.label_selector_size() == 0 ||
                s.label_selector(s.label_selector_size() == 1 ? 0 : i).requirements_size() == 0));
    FUZZ_CHECK(ValidateGpuRequest(b.resources.Get(kGpu), "gpu").ok());
    if (alike && i > 0) FUZZ_CHECK(b.resources == group.bundles()[1].resources);
    if (alike && n > 1)
      FUZZ_CHECK(group.bundles()[0].resources.Contains(group.bundles()[1].resources));
    // A rank's own entry is in its bundle.
    if (auto extra = s.rank_resources().find(static_cast<uint32_t>(i));
        extra != s.rank_resources().end()) {
      for (const auto& [name, amount] : extra->second.amounts())
        FUZZ_CHECK(amount == 0 || !b.resources.Get(name).IsZero());
    }
    if (s.use_gpu()) FUZZ_CHECK(!b.resources.Get(kGpu).IsZero());
    if (s.accelerator_type().empty()) {
      for (const auto& [name, amount] : b.resources.entries()) {
        FUZZ_CHECK(!absl::StartsWith(name, kAcceleratorResourcePrefix));
      }
    } else {
      FUZZ_CHECK(b.resources.Get(accelerator) == kAcceleratorRequest);
    }
  }

  // The head reports a train group's bundles over the wire (pending demand,
  // GetPlacementGroup); reading them back must give the same group.
  google::protobuf::RepeatedPtrField<v1::Bundle> wire;
  for (const Bundle& b : group.bundles()) BundleToProto(b, wire.Add());
  absl::StatusOr<PlacementGroupSpec> back =
      PlacementGroupSpecFromProto(wire, StrategyToProto(group.strategy()), /*allow_internal=*/true);
  FUZZ_CHECK_MSG(back.ok(), back.status().ToString());
  FUZZ_CHECK(back->strategy() == group.strategy() && back->bundles().size() == n);
  for (size_t i = 0; i < n; ++i) {
    FUZZ_CHECK_MSG(SameResources(back->bundles()[i].resources, group.bundles()[i].resources),
                   group.bundles()[i].resources.ToString() + " came back as " +
                       back->bundles()[i].resources.ToString());
  }
  // Users may not write the internal resource, so only a typeless group
  // reads back as user input.
  FUZZ_CHECK(PlacementGroupSpecFromProto(wire, StrategyToProto(group.strategy())).ok() ==
             s.accelerator_type().empty());

  // Placed, then released: the cluster is idle again.
  NodeResourceTable table = SmallCluster();
  const NodeResourceTable idle = table;
  absl::StatusOr<PlacementDecision> d = BundlePlacer(&table).Place(group);
  FUZZ_CHECK_MSG(d.ok(), d.status().ToString());
  if (d->outcome != PlacementOutcome::kPlaced) {
    FUZZ_CHECK(d->reason.why != PlacementWhy::kNone);
    return;
  }
  FUZZ_CHECK(d->placements.size() == n);
  for (const BundlePlacement& p : d->placements) {
    const NodeResourceTable::Node& node = table.node(p.allocation.node);
    FUZZ_CHECK(p.allocation.resources == group.bundles()[p.bundle_index].resources);
    if (!s.accelerator_type().empty()) FUZZ_CHECK(node.accelerator_type == s.accelerator_type());
  }
  for (const BundlePlacement& p : d->placements) FUZZ_CHECK(table.Release(p.allocation).ok());
  for (NodeIndex i = 0; i < table.slot_count(); ++i) {
    FUZZ_CHECK(table.node(i).available == idle.node(i).available);
    FUZZ_CHECK(table.node(i).gpus.TotalFree() == idle.node(i).gpus.TotalFree());
  }
}

}  // namespace
}  // namespace berth

// Mutated strings are often invalid UTF-8; protobuf's log line for each
// would drown the fuzzer's output.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  berth::v1::TrainJobSpec job;
  if (!job.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<berth::PlacementGroupSpec> group = berth::PlacementGroupForJob(job);
  if (!group.ok()) {
    FUZZ_CHECK_MSG(group.status().code() == absl::StatusCode::kInvalidArgument,
                   group.status().ToString());
    FUZZ_CHECK_MSG(absl::StartsWith(group.status().message(), "spec.scaling_config"),
                   group.status().ToString());
    return 0;
  }
  berth::CheckGroup(job, *group);
  return 0;
}
