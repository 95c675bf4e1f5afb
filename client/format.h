// Human-readable and JSON renderings of the head's responses, for the CLI.
//
// Pure functions of their input, no I/O. Tables are plain text with columns
// aligned by spaces and a header row; amounts print as exact decimals
// ("0.5", "16"), memory in Gi. Every output ends with a newline. Any field
// may be missing or odd (an older or newer head): nothing here fails on it.
#ifndef BERTH_CLIENT_FORMAT_H_
#define BERTH_CLIENT_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "berth/v1/head.pb.h"
#include "google/protobuf/message.h"

namespace berth {

// "2026-12-07 16:50:12 UTC".
std::string Timestamp(int64_t unix_ms);
// "{CPU: 2, GPU: 1, memory: 16Gi}", names sorted.
std::string FormatResources(const v1::ResourceSet& resources);
// "zone in (a,b), !spot"; empty for an empty selector.
std::string FormatSelector(const v1::LabelSelector& selector);
// A bundle in the CLI's --bundle spirit: "{GPU: 1; zone in (a,b)}".
std::string FormatBundle(const v1::Bundle& bundle);

// One row per node: id, state, address, accelerator type, GPU, CPU and
// memory (free/total), labels; then a line per DRAINING node: its drain's
// reason and deadline.
std::string FormatNodes(const v1::ListNodesResponse& response);

// One row per group: id, name, strategy, state, bundles placed/total.
std::string FormatPlacementGroups(const v1::ListPlacementGroupsResponse& response);

// One group in detail: its fields, why it is not placed (when pending,
// infeasible or rescheduling), and one row per bundle: index, node, GPU ids,
// resources, selector.
std::string FormatPlacementGroup(const v1::PlacementGroupInfo& group);

// `berth status`: node counts, available/total per resource and per
// accelerator type, and pending demand lines like Ray's
// "{GPU: 1} * 8 (PACK): 2+ pending".
std::string FormatClusterStatus(const v1::GetClusterStatusResponse& status);
// Queues' quota, usage, borrowing, gangs and fair share as a table; with
// `pending_gangs`, each queue's first waiting gangs and why they wait.
std::string FormatQueueStatuses(const google::protobuf::RepeatedPtrField<v1::QueueStatus>& queues,
                                bool pending_gangs);
// The autoscaler's pools, recent decisions and unsatisfiable demand.
std::string FormatAutoscalerStatus(const v1::AutoscalerStatus& autoscaler);

// One line of pending demand (no newline).
std::string FormatPendingDemand(const v1::PendingDemand& demand);

// One row per train job: id, name, state, workers, failures, last step and
// loss, submission time.
std::string FormatTrainJobs(const v1::ListTrainJobsResponse& response);

// One train job in detail: its fields (state and message, placement group,
// rendezvous address, attempt, failures and the cause of each, last step
// and loss, latest checkpoint), then the rank table: one row per worker
// with its global rank, node, bundle, local rank, node rank, GPU ids and
// worker id.
std::string FormatTrainJob(const v1::TrainJobInfo& job);
// A job's state as the CLI shows it: "RUNNING", "TIMED_OUT".
std::string TrainJobStateName(v1::TrainJobState state);

// One line of progress for `berth job watch`, "step 120 loss 0.4312
// [RUNNING]" (no newline); step and loss are "-" before the first report.
std::string FormatTrainProgress(const v1::TrainJobInfo& job);

// Any message as indented JSON with the proto field names, plus a newline.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);

}  // namespace berth

#endif  // BERTH_CLIENT_FORMAT_H_
