// The Alibaba GPU cluster trace (openb, 2023; Weng et al., "Beware of
// Fragmentation", USENIX ATC'23) read into berth's placement inputs.
//
// ParseNodeList/ParseTaskList read the trace's CSV files (columns found by
// header name, so their order does not matter) and return INVALID_ARGUMENT
// naming the line and column of anything malformed. The converters turn a
// node into a NodeSpec and a task into a placement group: one bundle (a
// share of one GPU when gpu_milli < 1000), or for a gang, one one-GPU bundle
// per GPU; `gpu_spec` becomes a selector `berth.io/accelerator-type in (...)`.
#ifndef BERTH_BENCH_REPLAY_TRACE_H_
#define BERTH_BENCH_REPLAY_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/fragmentation_scorer.h"
#include "placement/node_resource_table.h"
#include "placement/node_scorer.h"
#include "placement/placement_group_spec.h"

namespace berth::replay {

struct TraceNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t gpus = 0;
  std::string model;  // empty for nodes without GPUs
};

struct TraceTask {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t num_gpu = 0;
  int64_t gpu_milli = 0;              // per GPU; < 1000 only for a shared single GPU
  std::vector<std::string> gpu_spec;  // allowed models, sorted, unique; empty: any
  std::string qos;                    // LS, BE, ...; empty when the file has no qos column
  int64_t creation_time = 0;
  std::optional<int64_t> scheduled_time;  // absent for tasks that never ran
  int64_t deletion_time = 0;

  // GPUs requested, in thousandths: a share of one GPU or whole GPUs.
  int64_t GpuMilli() const { return num_gpu == 1 ? gpu_milli : num_gpu * 1000; }
};

// `sn,cpu_milli,memory_mib,gpu,model`.
absl::StatusOr<std::vector<TraceNode>> ParseNodeList(absl::string_view csv);
// A pod list as read, and which of the optional columns it lacks.
struct TaskList {
  std::vector<TraceTask> tasks;
  bool has_models = true;           // gpu_spec; without it every task takes any model
  bool has_times = true;            // creation_time and deletion_time
  std::vector<std::string> absent;  // the optional columns missing, to say so once
};
// `name,cpu_milli,memory_mib,num_gpu,gpu_milli` and, where the variant has
// them, `gpu_spec`, `qos`, `creation_time`, `deletion_time`,
// `scheduled_time` (other columns are ignored). Every openb variant reads:
// multigpu20 has the first five only.
absl::StatusOr<TaskList> ParseTaskList(absl::string_view csv);
// The Philly training-job run times (../shared/data/philly-runtime): one
// column, `runtime`, in seconds.
absl::StatusOr<std::vector<double>> ParseRuntimes(absl::string_view csv);
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

NodeSpec ToNodeSpec(const TraceNode& node);

// How a task becomes a placement group.
enum class TaskShaping {
  kOneBundle,       // one bundle with all of the task
  kGangPack,        // N-GPU tasks: N one-GPU bundles under PACK
  kGangStrictPack,  // N-GPU tasks: N one-GPU bundles under STRICT_PACK
  // N-GPU tasks as N one-GPU ranks under PACK, in one rack (kRackLabel):
  kGangRackRequired,   // topology required: waits for a rack with room
  kGangRackPreferred,  // topology preferred: one rack if one has room
};
// The rack label of the replay's nodes: racks of kRackSize in trace order.
inline constexpr char kRackLabel[] = "berth.io/topology-rack";
inline constexpr int kRackSize = 8;
absl::string_view TaskShapingName(TaskShaping shaping);

absl::StatusOr<PlacementGroupSpec> ToPlacementGroup(const TraceTask& task, TaskShaping shaping);

// The distinct kinds of GPU tasks (CPU, memory, GPU, allowed models), each
// weighted by how many tasks of that kind there are: the distribution a
// FragmentationScorer measures against. Tasks without GPUs are left out.
std::vector<TaskShape> GpuTaskShapes(const std::vector<TraceTask>& tasks);

}  // namespace berth::replay

#endif  // BERTH_BENCH_REPLAY_TRACE_H_
