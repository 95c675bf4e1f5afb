#include "client/format.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
#include "placement/quantity.h"
#include "placement/resource_set.h"
#include "wire/train_job_state.h"

namespace berth {
namespace {

// Columns separated by two spaces, each as wide as its widest cell; empty
// cells show as "-".
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }

  void AddRow(std::vector<std::string> row) {
    for (std::string& cell : row) {
      if (cell.empty()) cell = "-";
    }
    rows_.push_back(std::move(row));
  }

  std::string ToString() const {
    std::vector<size_t> widths;
    for (const auto& row : rows_) {
      widths.resize(std::max(widths.size(), row.size()));
      for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line;
      for (size_t c = 0; c < row.size(); ++c) {
        absl::StrAppend(&line, row[c]);
        if (c + 1 < row.size()) line.append(widths[c] - row[c].size() + 2, ' ');
      }
      absl::StrAppend(&out, line, "\n");
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

// Enum value name without its prefix ("NODE_STATE_ALIVE" -> "ALIVE"); the
// number for values this build does not know.
std::string EnumName(const google::protobuf::EnumDescriptor* descriptor, int value,
                     absl::string_view prefix) {
  const google::protobuf::EnumValueDescriptor* v = descriptor->FindValueByNumber(value);
  if (v == nullptr) return absl::StrCat(value);
  absl::string_view name = v->name();
  absl::ConsumePrefix(&name, prefix);
  return std::string(name);
}

std::string StrategyName(v1::PlacementStrategy strategy) {
  // The head reports UNSPECIFIED as PACK, which is what it means.
  if (strategy == v1::PLACEMENT_STRATEGY_UNSPECIFIED) strategy = v1::PLACEMENT_STRATEGY_PACK;
  return EnumName(v1::PlacementStrategy_descriptor(), strategy, "PLACEMENT_STRATEGY_");
}

std::string GroupStateName(const v1::PlacementGroupInfo& group) {
  std::string name =
      EnumName(v1::PlacementGroupState_descriptor(), group.state(), "PLACEMENT_GROUP_STATE_");
  if (group.infeasible()) absl::StrAppend(&name, " (infeasible)");
  return name;
}

// Exact decimal when the value is a valid quantity, as sent otherwise.
std::string Amount(double value) {
  absl::StatusOr<Quantity> q = Quantity::FromDouble(value, "");
  return q.ok() ? q->ToString() : absl::StrCat(value);
}

std::string ResourceAmount(absl::string_view name, double value) {
  absl::StatusOr<Quantity> q = Quantity::FromDouble(value, "");
  if (!q.ok()) return absl::StrCat(value);
  return name == kMemory ? FormatMemory(*q) : q->ToString();
}

double Get(const v1::ResourceSet& set, absl::string_view name) {
  auto it = set.amounts().find(std::string(name));
  return it == set.amounts().end() ? 0 : it->second;
}

// "3/4"; empty (shown "-") when the node has none of it.
std::string FreeOfTotal(const v1::NodeInfo& node, absl::string_view name) {
  const double total = Get(node.total(), name);
  if (total == 0) return "";
  return absl::StrCat(Amount(Get(node.available(), name)), "/", Amount(total));
}

// Bytes as Gi with at most one decimal: "15.5", "128".
std::string Gibibytes(double bytes) {
  std::string text = absl::StrFormat("%.1f", bytes / (1 << 30));
  if (absl::EndsWith(text, ".0")) text.resize(text.size() - 2);
  return text;
}

std::string SortedLabels(const google::protobuf::Map<std::string, std::string>& labels) {
  const std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::string AcceleratorType(const v1::NodeInfo& node) {
  auto label = node.labels().find(std::string(kAcceleratorTypeLabel));
  if (label != node.labels().end()) return label->second;
  return node.gpus().empty() ? "" : node.gpus(0).accelerator_type();
}

// "0,1" for whole GPUs, "0(0.25)" for a share of one.
std::string GpuIds(const v1::BundleLocation& location) {
  return absl::StrJoin(location.gpus(), ",", [](std::string* out, const v1::GpuShare& share) {
    absl::StrAppend(out, share.index());
    if (share.units() != Quantity::kUnitsPerWhole) {
      absl::StrAppend(out, "(", Quantity::FromUnits(share.units()).ToString(), ")");
    }
  });
}

// The trainer reports from step 1 on, so step 0 means "no report yet" and
// both show as empty ("-").
std::string Step(const v1::TrainJobInfo& job) {
  return job.last_step() == 0 ? "" : absl::StrCat(job.last_step());
}

// Four significant digits: enough to see a loss fall, short enough to scan.
std::string Loss(const v1::TrainJobInfo& job) {
  return job.last_step() == 0 ? "" : absl::StrFormat("%.4g", job.last_loss());
}

// How the attempt got to a formed group, stage by stage (train.proto,
// StartupTimeline); empty until the ranks reported joining it.
std::string Startup(const v1::StartupTimeline& t) {
  if (t.group_joined_unix_us() == 0) return "";
  auto ms = [](int64_t from_us, int64_t to_us) {
    return absl::StrFormat("%.0f ms", static_cast<double>(to_us - from_us) / 1000.0);
  };
  // A restart's start-up counts from the restart, not from the submission.
  const int64_t began = t.restarted_unix_us() != 0 ? t.restarted_unix_us() : t.submitted_unix_us();
  return absl::StrCat(ms(began, t.group_joined_unix_us()), " (placement ",
                      ms(began, t.placed_unix_us()), ", launch ",
                      ms(t.placed_unix_us(), t.workers_started_unix_us()), ", process start ",
                      ms(t.workers_started_unix_us(), t.ranks_running_unix_us()), ", rendezvous ",
                      ms(t.ranks_running_unix_us(), t.group_joined_unix_us()), ")");
}

bool IsWaiting(const v1::PlacementGroupInfo& group) {
  return group.state() == v1::PLACEMENT_GROUP_STATE_PENDING ||
         group.state() == v1::PLACEMENT_GROUP_STATE_RESCHEDULING || group.infeasible();
}

}  // namespace

std::string Timestamp(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

std::string TrainJobStateName(v1::TrainJobState state) {
  return EnumName(v1::TrainJobState_descriptor(), state, "TRAIN_JOB_STATE_");
}

std::string FormatResources(const v1::ResourceSet& resources) {
  const std::map<std::string, double> sorted(resources.amounts().begin(),
                                             resources.amounts().end());
  return absl::StrCat("{",
                      absl::StrJoin(sorted, ", ",
                                    [](std::string* out, const std::pair<std::string, double>& e) {
                                      absl::StrAppend(out, e.first, ": ",
                                                      ResourceAmount(e.first, e.second));
                                    }),
                      "}");
}

std::string FormatSelector(const v1::LabelSelector& selector) {
  return absl::StrJoin(
      selector.requirements(), ", ", [](std::string* out, const v1::LabelSelectorRequirement& r) {
        const std::string values = absl::StrCat("(", absl::StrJoin(r.values(), ","), ")");
        switch (r.op()) {
          case v1::LABEL_OPERATOR_IN:
            absl::StrAppend(out, r.key(), " in ", values);
            break;
          case v1::LABEL_OPERATOR_NOT_IN:
            absl::StrAppend(out, r.key(), " notin ", values);
            break;
          case v1::LABEL_OPERATOR_EXISTS:
            absl::StrAppend(out, r.key());
            break;
          case v1::LABEL_OPERATOR_DOES_NOT_EXIST:
            absl::StrAppend(out, "!", r.key());
            break;
          default:
            absl::StrAppend(out, r.key(), " <operator ", r.op(), "> ", values);
        }
      });
}

std::string FormatBundle(const v1::Bundle& bundle) {
  std::string text = FormatResources(bundle.resources());
  if (bundle.selector().requirements().empty()) return text;
  text.pop_back();  // the closing brace
  return absl::StrCat(text, "; ", FormatSelector(bundle.selector()), "}");
}

std::string FormatNodes(const v1::ListNodesResponse& response) {
  Table table({"NODE_ID", "STATE", "ADDRESS", "ACCELERATOR", "GPU", "HEALTHY", "CPU", "MEMORY",
               "METRICS", "LABELS"});
  for (const v1::NodeInfo& node : response.nodes()) {
    // Healthy of all GPUs; none without GPUs.
    const int gpus = static_cast<int>(Get(node.total(), kGpu));
    const std::string healthy =
        gpus == 0 ? "" : absl::StrCat(gpus - node.unhealthy_gpus_size(), "/", gpus);
    std::string memory;
    if (const double total = Get(node.total(), kMemory); total != 0) {
      memory = absl::StrCat(Gibibytes(Get(node.available(), kMemory)), "/", Gibibytes(total), "Gi");
    }
    table.AddRow({node.node_id(), EnumName(v1::NodeState_descriptor(), node.state(), "NODE_STATE_"),
                  node.address(), AcceleratorType(node), FreeOfTotal(node, kGpu), healthy,
                  FreeOfTotal(node, kCpu), memory, node.metrics_address(),
                  SortedLabels(node.labels())});
  }
  std::string out = table.ToString();
  // A drain's terms below the table (few nodes drain; a column would be
  // empty for the rest).
  for (const v1::NodeInfo& node : response.nodes()) {
    for (const v1::UnhealthyGpu& gpu : node.unhealthy_gpus()) {
      absl::StrAppend(&out, node.node_id(), " GPU ", gpu.index(), " unhealthy since ",
                      Timestamp(gpu.since_unix_ms()), ": ", gpu.reason(), "\n");
    }
    if (node.state() != v1::NODE_STATE_DRAINING) continue;
    absl::StrAppend(&out, node.node_id(), " drains: ", node.drain_reason(),
                    node.drain_deadline_unix_ms() == 0
                        ? "; no deadline"
                        : absl::StrCat("; deadline ", Timestamp(node.drain_deadline_unix_ms())),
                    "\n");
  }
  return out;
}

std::string FormatPlacementGroups(const v1::ListPlacementGroupsResponse& response) {
  Table table({"ID", "NAME", "STRATEGY", "STATE", "BUNDLES"});
  for (const v1::PlacementGroupInfo& group : response.placement_groups()) {
    table.AddRow({group.placement_group_id(), group.name(), StrategyName(group.strategy()),
                  GroupStateName(group), absl::StrCat(group.bundles_size())});
  }
  return table.ToString();
}

std::string FormatPlacementGroup(const v1::PlacementGroupInfo& group) {
  Table fields({"id:", group.placement_group_id()});
  fields.AddRow({"name:", group.name()});
  fields.AddRow({"strategy:", StrategyName(group.strategy())});
  fields.AddRow({"state:", GroupStateName(group)});
  fields.AddRow({"priority:", absl::StrCat(group.priority())});
  if (!group.queue().empty()) fields.AddRow({"queue:", group.queue()});
  if (!group.job_id().empty()) fields.AddRow({"job:", group.job_id()});
  if (group.created_unix_ms() != 0) fields.AddRow({"created:", Timestamp(group.created_unix_ms())});
  if (group.placed_unix_ms() != 0) fields.AddRow({"placed:", Timestamp(group.placed_unix_ms())});
  fields.AddRow({"attempts:", absl::StrCat(group.scheduling_attempts())});
  if (!group.topology().required().empty()) {
    fields.AddRow({"topology:", absl::StrCat("required ", group.topology().required())});
  } else if (group.topology().preferred_size() > 0) {
    fields.AddRow({"topology:",
                   absl::StrCat("preferred ", absl::StrJoin(group.topology().preferred(), ", "))});
  }
  if (!group.topology_domain().empty()) fields.AddRow({"domain:", group.topology_domain()});
  if (IsWaiting(group)) fields.AddRow({"reason:", group.pending_reason()});
  if (group.moving()) {
    fields.AddRow({"moving:", group.move_deadline_unix_ms() == 0
                                  ? group.moving_reason()
                                  : absl::StrCat(group.moving_reason(), " (by ",
                                                 Timestamp(group.move_deadline_unix_ms()), ")")});
  }

  std::map<uint32_t, const v1::BundleLocation*> locations;
  for (const v1::BundleLocation& location : group.locations()) {
    locations[location.bundle_index()] = &location;
  }
  Table bundles({"BUNDLE", "NODE", "GPUS", "RESOURCES", "SELECTOR"});
  for (int i = 0; i < group.bundles_size(); ++i) {
    auto it = locations.find(static_cast<uint32_t>(i));
    const v1::BundleLocation* location = it == locations.end() ? nullptr : it->second;
    bundles.AddRow({absl::StrCat(i), location ? location->node_id() : "",
                    location ? GpuIds(*location) : "",
                    FormatResources(group.bundles(i).resources()),
                    FormatSelector(group.bundles(i).selector())});
  }
  return absl::StrCat(fields.ToString(), "\n", bundles.ToString());
}

std::string FormatPendingDemand(const v1::PendingDemand& demand) {
  // Runs of identical bundles collapse to "{GPU: 1} * 8", as in `ray status`.
  std::vector<std::pair<std::string, int>> runs;
  for (const v1::Bundle& bundle : demand.shape()) {
    std::string text = FormatBundle(bundle);
    if (!runs.empty() && runs.back().first == text) {
      ++runs.back().second;
    } else {
      runs.emplace_back(std::move(text), 1);
    }
  }
  std::string line = absl::StrJoin(runs, ", ", [](std::string* out, const auto& run) {
    absl::StrAppend(out, run.first, " * ", run.second);
  });
  absl::StrAppend(&line, " (", StrategyName(demand.strategy()), "): ", demand.count(), "+ pending");
  if (demand.infeasible()) absl::StrAppend(&line, ", infeasible");
  return line;
}

std::string FormatClusterStatus(const v1::GetClusterStatusResponse& status) {
  std::string out = absl::StrCat(
      "Nodes: ", status.alive_nodes(), " alive, ", status.draining_nodes(), " draining, ",
      status.dead_nodes(), " dead",
      status.unhealthy_gpus() == 0
          ? ""
          : absl::StrCat("; ", status.unhealthy_gpus(), " unhealthy GPU(s) (see `berth nodes`)"),
      "\n\n");

  // Accelerator types have their own table below.
  std::map<std::string, std::pair<double, double>> resources;  // name -> (available, total)
  for (const auto& [name, total] : status.total().amounts()) {
    if (!PinnedAcceleratorType(name)) resources[name].second = total;
  }
  for (const auto& [name, available] : status.available().amounts()) {
    if (!PinnedAcceleratorType(name)) resources[name].first = available;
  }
  Table totals({"RESOURCE", "AVAILABLE", "TOTAL"});
  for (const auto& [name, amounts] : resources) {
    totals.AddRow(
        {name, ResourceAmount(name, amounts.first), ResourceAmount(name, amounts.second)});
  }
  absl::StrAppend(&out, totals.ToString());

  if (!status.accelerators().empty()) {
    // Used / total per accelerator type: what the GPU nodes of each model hold.
    Table accelerators(
        {"ACCELERATOR", "NODES", "GPU_AVAILABLE", "GPU_TOTAL", "CPU_USED", "MEMORY_USED"});
    auto used = [](const v1::AcceleratorTypeCount& a, const std::string& name) {
      const double total = Get(a.total(), name);
      const double in_use = total - Get(a.available(), name);
      return name == kMemory ? absl::StrCat(Gibibytes(in_use), "/", Gibibytes(total), "Gi")
                             : absl::StrCat(Amount(in_use), "/", Amount(total));
    };
    for (const v1::AcceleratorTypeCount& a : status.accelerators()) {
      accelerators.AddRow({a.accelerator_type(), absl::StrCat(a.nodes()),
                           Amount(a.gpus_available()), absl::StrCat(a.gpus_total()),
                           used(a, std::string(kCpu)), used(a, std::string(kMemory))});
    }
    absl::StrAppend(&out, "\n", accelerators.ToString());
  }

  absl::StrAppend(&out, "\nPending demand:\n");
  if (status.pending_demand().empty()) absl::StrAppend(&out, "  (none)\n");
  for (const v1::PendingDemand& demand : status.pending_demand()) {
    absl::StrAppend(&out, "  ", FormatPendingDemand(demand), "\n");
    if (!demand.reason().empty()) absl::StrAppend(&out, "    ", demand.reason(), "\n");
  }
  if (status.has_placement_scorer()) {
    const v1::PlacementScorerStatus& scorer = status.placement_scorer();
    absl::StrAppend(&out, "\nPlacement scorer: ", scorer.name());
    auto count = [](uint64_t n, absl::string_view one, absl::string_view many) {
      return absl::StrCat(n, " ", n == 1 ? one : many);
    };
    if (scorer.active() != scorer.name()) {
      absl::StrAppend(&out, " (", scorer.active(),
                      " meanwhile: ", count(scorer.window_tasks(), "GPU task", "GPU tasks"),
                      " seen, too few to learn from)");
    } else if (scorer.builds() > 0) {
      absl::StrAppend(&out, ", learned from ",
                      count(scorer.window_tasks(), "GPU task", "GPU tasks"), " of ",
                      count(scorer.window_shapes(), "shape", "shapes"), ", built ",
                      count(scorer.builds(), "time", "times"));
    }
    absl::StrAppend(&out, "\n");
  }
  if (!status.queues().empty()) {
    absl::StrAppend(&out, "\nQueues (berth queues says why gangs wait):\n",
                    FormatQueueStatuses(status.queues(), /*pending_gangs=*/false));
  }
  if (status.has_autoscaler())
    absl::StrAppend(&out, "\n", FormatAutoscalerStatus(status.autoscaler()));
  if (!status.metrics_address().empty()) {
    absl::StrAppend(&out, "\nMetrics: http://", status.metrics_address(),
                    "/metrics (raylets: `berth nodes`)\n");
  }
  return out;
}

std::string FormatQueueStatuses(const google::protobuf::RepeatedPtrField<v1::QueueStatus>& queues,
                                bool pending_gangs) {
  // GPUs are what teams share; other resources show in `berth queue get`.
  auto gpus = [](const google::protobuf::Map<std::string, double>& amounts) {
    auto it = amounts.find(std::string(kGpu));
    return it == amounts.end() ? std::string("-") : Amount(it->second);
  };
  Table table({"QUEUE", "GPU_QUOTA", "GPU_USED", "GPU_BORROWED", "PENDING", "RUNNING", "SHARE"});
  std::string waiting;
  for (const v1::QueueStatus& q : queues) {
    table.AddRow({q.name(), gpus(q.nominal_quota()), gpus(q.usage()), gpus(q.borrowed()),
                  absl::StrCat(q.pending()), absl::StrCat(q.running()),
                  absl::StrFormat("%.3f", q.fair_share())});
    for (const v1::PendingGang& gang : q.pending_gangs()) {
      absl::StrAppend(
          &waiting, "  ", q.name(), "  ",
          gang.job_id().empty() ? gang.placement_group_id() : absl::StrCat("job ", gang.job_id()),
          ": ", gang.reason(), "\n");
    }
  }
  std::string out = table.ToString();
  if (pending_gangs && !waiting.empty()) absl::StrAppend(&out, "\nWaiting:\n", waiting);
  return out;
}

std::string FormatAutoscalerStatus(const v1::AutoscalerStatus& autoscaler) {
  std::string out =
      absl::StrCat("Autoscaler (reported ", Timestamp(autoscaler.reported_unix_ms()), "):\n");
  Table pools({"POOL", "ACCELERATOR", "NODES", "TARGET", "MIN", "MAX"});
  for (const v1::NodePoolStatus& pool : autoscaler.pools()) {
    pools.AddRow({pool.name(), pool.accelerator_type().empty() ? "-" : pool.accelerator_type(),
                  absl::StrCat(pool.nodes()), absl::StrCat(pool.target_nodes()),
                  absl::StrCat(pool.min_nodes()), absl::StrCat(pool.max_nodes())});
  }
  absl::StrAppend(&out, pools.ToString());
  if (!autoscaler.recent_actions().empty()) absl::StrAppend(&out, "Recent decisions:\n");
  for (const v1::AutoscalerAction& action : autoscaler.recent_actions()) {
    absl::StrAppend(
        &out, "  ", action.decided_unix_ms() == 0 ? "" : Timestamp(action.decided_unix_ms()), " ",
        EnumName(v1::AutoscalerActionKind_descriptor(), action.kind(), "AUTOSCALER_ACTION_KIND_"),
        " ", action.pool(), " -> ", action.target_nodes(), " node(s)");
    if (!action.node_ids().empty())
      absl::StrAppend(&out, " [", absl::StrJoin(action.node_ids(), ", "), "]");
    if (!action.reason().empty()) absl::StrAppend(&out, ": ", action.reason());
    if (!action.error().empty()) absl::StrAppend(&out, " (failed: ", action.error(), ")");
    absl::StrAppend(&out, "\n");
  }
  for (const v1::UnsatisfiableDemand& demand : autoscaler.unsatisfiable()) {
    v1::PendingDemand as_demand;
    *as_demand.mutable_shape() = demand.shape();
    as_demand.set_strategy(demand.strategy());
    as_demand.set_count(1);
    absl::StrAppend(&out, "  no pool can hold ", FormatPendingDemand(as_demand), ": ",
                    demand.reason(), "\n");
  }
  return out;
}

std::string FormatTrainJobs(const v1::ListTrainJobsResponse& response) {
  Table table({"JOB_ID", "NAME", "STATE", "WORKERS", "FAILURES", "STEP", "LOSS", "SUBMITTED"});
  for (const v1::TrainJobInfo& job : response.jobs()) {
    // num_workers 0 means the default, 1.
    const uint32_t workers = std::max(job.spec().scaling_config().num_workers(), 1u);
    table.AddRow({job.job_id(), job.spec().name(), TrainJobStateName(job.state()),
                  absl::StrCat(workers), absl::StrCat(job.failures()), Step(job), Loss(job),
                  job.submitted_unix_ms() == 0 ? "" : Timestamp(job.submitted_unix_ms())});
  }
  return table.ToString();
}

namespace {

// The job's time limit (and when it ends), progress timeout and grace.
void AddClockRows(const v1::TrainJobInfo& job, Table& fields) {
  if (job.spec().time_limit_s() > 0) {
    fields.AddRow(
        {"time limit:",
         absl::StrCat(
             absl::FormatDuration(absl::Seconds(job.spec().time_limit_s())),
             job.time_limit_ends_unix_ms() == 0 || IsTerminal(job.state())
                 ? ""
                 : absl::StrCat(" (ends by ", Timestamp(job.time_limit_ends_unix_ms()), ")"))});
  }
  if (job.spec().failure_config().progress_timeout_s() > 0) {
    fields.AddRow({"progress timeout:", absl::FormatDuration(absl::Seconds(
                                            job.spec().failure_config().progress_timeout_s()))});
  }
  if (job.spec().has_stop_grace_period_s()) {
    fields.AddRow({"stop grace period:",
                   absl::FormatDuration(absl::Seconds(job.spec().stop_grace_period_s()))});
  }
}

}  // namespace

std::string FormatTrainJob(const v1::TrainJobInfo& job) {
  Table fields({"id:", job.job_id()});
  fields.AddRow({"name:", job.spec().name()});
  fields.AddRow({"queue:", job.spec().queue().empty() ? "default" : job.spec().queue()});
  fields.AddRow({"state:", TrainJobStateName(job.state())});
  if (!job.message().empty()) fields.AddRow({"message:", job.message()});
  fields.AddRow({"placement group:", job.placement_group_id()});
  fields.AddRow({"master:", job.master_address()});
  if (job.spec().entrypoint().has_command()) {
    // Where a rank's relative paths lead: the submitter's folder only when
    // every node mounts it (berth copies nothing there).
    const v1::Entrypoint::Command& command = job.spec().entrypoint().command();
    const std::string& dir = command.working_dir();
    fields.AddRow({"working dir:",
                   !command.working_dir_package().empty()
                       ? absl::StrCat("package ", command.working_dir_package(),
                                      " (uploaded; unpacked on each node)")
                   : dir.empty()
                       ? "each node's own folder for the job (not shared)"
                       : absl::StrCat(dir, " (the same path on every node: a shared filesystem)")});
  }
  fields.AddRow({"attempt:", absl::StrCat(job.attempt())});
  const int32_t max_failures = job.spec().failure_config().max_failures();
  fields.AddRow({"failures:",
                 absl::StrCat(job.failures(), " (max ",
                              max_failures < 0 ? "unlimited" : absl::StrCat(max_failures), ")")});
  for (int i = 0; i < job.failure_causes_size(); ++i) {
    fields.AddRow({absl::StrCat("failure ", i + 1, ":"), job.failure_causes(i)});
  }
  if (job.preemptions() > 0) fields.AddRow({"preemptions:", absl::StrCat(job.preemptions())});
  if (job.moves() > 0)
    fields.AddRow({"moves:", absl::StrCat(job.moves(), " (off draining nodes)")});
  if (const v1::ScalingConfig& scaling = job.spec().scaling_config();
      scaling.min_workers() > 0 && scaling.min_workers() < scaling.num_workers()) {
    fields.AddRow(
        {"workers:", absl::StrCat(job.workers_size(), " (elastic, ", scaling.min_workers(), " to ",
                                  scaling.num_workers(), ")")});
  }
  for (int i = 0; i < job.resizes_size(); ++i) {
    const v1::ResizeEvent& r = job.resizes(i);
    fields.AddRow({absl::StrCat("resize ", i + 1, ":"),
                   absl::StrCat(r.from(), " -> ", r.to(), " workers at attempt ", r.attempt(), ", ",
                                Timestamp(r.unix_ms()), ": ", r.reason())});
  }
  if (job.spec().priority() != 0) fields.AddRow({"priority:", absl::StrCat(job.spec().priority())});
  AddClockRows(job, fields);
  fields.AddRow({"step:", Step(job)});
  fields.AddRow({"loss:", Loss(job)});
  if (!job.last_metrics().empty()) {
    std::map<std::string, double> metrics(job.last_metrics().begin(), job.last_metrics().end());
    std::vector<std::string> shown;
    for (const auto& [name, value] : metrics)
      shown.push_back(absl::StrCat(name, "=", absl::SixDigits(value)));
    fields.AddRow({"metrics:", absl::StrJoin(shown, " ")});
  }
  fields.AddRow({"checkpoint:", job.latest_checkpoint().empty()
                                    ? ""
                                    : absl::StrCat(job.latest_checkpoint(), " (step ",
                                                   job.latest_checkpoint_step(), ")")});
  if (job.submitted_unix_ms() != 0) {
    fields.AddRow({"submitted:", Timestamp(job.submitted_unix_ms())});
  }
  if (job.started_unix_ms() != 0) fields.AddRow({"started:", Timestamp(job.started_unix_ms())});
  if (job.ended_unix_ms() != 0) fields.AddRow({"ended:", Timestamp(job.ended_unix_ms())});
  if (const std::string startup = Startup(job.startup()); !startup.empty()) {
    fields.AddRow({"startup:", startup});
  }

  Table ranks({"RANK", "NODE", "BUNDLE", "LOCAL_RANK", "NODE_RANK", "GPUS", "WORKER_ID"});
  for (const v1::WorkerRank& worker : job.workers()) {
    ranks.AddRow({absl::StrCat(worker.world_rank()), worker.node_id(),
                  absl::StrCat(worker.bundle_index()), absl::StrCat(worker.local_rank()),
                  absl::StrCat(worker.node_rank()), absl::StrJoin(worker.gpu_indices(), ","),
                  worker.worker_id()});
  }
  return absl::StrCat(fields.ToString(), "\n", ranks.ToString());
}

std::string FormatTrainProgress(const v1::TrainJobInfo& job) {
  const std::string step = Step(job);
  const std::string loss = Loss(job);
  return absl::StrCat("step ", step.empty() ? "-" : step, " loss ", loss.empty() ? "-" : loss, " [",
                      TrainJobStateName(job.state()), "]");
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  // "ready": false and "count": 0 matter to scripts; print them.
  options.always_print_primitive_fields = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot render ", message.GetTypeName(), " as JSON: ", status.ToString()));
  }
  if (json.empty() || json.back() != '\n') json.push_back('\n');
  return json;
}

}  // namespace berth
