// QueueConfig: the cluster's queues, cohorts and priority classes, as the
// cluster admin defines them, always valid as a whole.
//
// A queue (Kueue's ClusterQueue, a Slurm account with a GrpTRES limit) has a
// nominal quota per resource, an optional cohort whose members lend each
// other their idle quota, a borrowing limit (how far above its nominal quota
// it may go on what the cohort lends), a lending limit (how much of its
// nominal quota it lends), and a fair-share weight. A resource a queue's
// quota does not name is not limited by quota (only by capacity); so the
// built-in `default` queue, which names none, behaves as berth did before
// queues: every group competes for the cluster alone.
//
// Quota resources are the resources of bundles (GPU, CPU, memory, custom)
// and `GPU:<T>`, the GPUs placed on nodes of accelerator type T.
//
// Every change (WithQueue, WithoutQueue, ...) returns a new config or an
// error naming the field; the config it was called on is unchanged, so a
// refused change is never half applied.
#ifndef BERTH_QUEUEING_QUEUE_CONFIG_H_
#define BERTH_QUEUEING_QUEUE_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/quantity.h"

namespace berth {

inline constexpr absl::string_view kDefaultQueue = "default";
// Prefix of a quota resource counting the GPUs on nodes of one accelerator
// type: `GPU:A10G`.
inline constexpr absl::string_view kGpuOfTypePrefix = "GPU:";
std::string GpuOfTypeResource(absl::string_view accelerator_type);

// Amounts by resource name; unlike a ResourceSet a zero is kept (a quota of
// 0 GPUs limits GPUs; no entry does not).
using QuotaAmounts = std::map<std::string, Quantity>;

// Which running gangs of its own queue a waiting gang may preempt, with
// Kueue's names (ClusterQueue preemption.withinClusterQueue).
enum class WithinQueuePreemption {
  kNever,
  kLowerPriority,  // the default
  // Also gangs of its priority that arrived after it, whether or not it
  // would borrow (Kueue asks that it fit the nominal quota): a team's big
  // gang is not kept off by the team's own later small ones, scattered
  // over the nodes it needs.
  kLowerOrNewerEqualPriority,
};
absl::string_view WithinQueuePreemptionName(WithinQueuePreemption policy);

struct QueueSpec {
  std::string name;
  std::string cohort;  // "": lends and borrows nothing
  QuotaAmounts nominal;
  // Per resource; a resource not named may borrow (or lend) without limit.
  QuotaAmounts borrowing_limit;
  QuotaAmounts lending_limit;
  double weight = 1;  // fair-share weight, > 0
  // The team that may use the queue (credentials); "" = any caller.
  std::string team;
  WithinQueuePreemption within_queue_preemption = WithinQueuePreemption::kLowerPriority;
  // Of the train jobs submitted to it (Slurm's DefaultTime, MaxTime);
  // seconds, 0 = none.
  int64_t default_time_limit_s = 0;
  int64_t max_time_limit_s = 0;
};

struct PriorityClass {
  std::string name;
  int32_t value = 0;
};

// Untrusted input, as a YAML file or an RPC gives it.
struct QueueInput {
  std::string name;
  std::string cohort;
  std::map<std::string, double> nominal;
  std::map<std::string, double> borrowing_limit;
  std::map<std::string, double> lending_limit;
  std::optional<double> weight;
  std::string team;
  std::string within_queue_preemption;  // a WithinQueuePreemptionName; "": the default
  int64_t default_time_limit_s = 0;     // >= 0, at most max_time_limit_s when that is set
  int64_t max_time_limit_s = 0;         // >= 0
};

// Validates a queue. `field` prefixes errors, e.g. `queues[1]`.
absl::StatusOr<QueueSpec> QueueSpecFromInput(const QueueInput& input, absl::string_view field);

class QueueConfig {
 public:
  // Only the `default` queue, and no cohorts or priority classes.
  QueueConfig();

  // Adds a queue or replaces the one of the same name. Its cohort must have
  // been declared; a limit may only name a resource of the nominal quota.
  absl::StatusOr<QueueConfig> WithQueue(QueueSpec queue) const;
  // Removes a queue; `default` cannot be removed (it may be redefined).
  absl::StatusOr<QueueConfig> WithoutQueue(absl::string_view name) const;
  absl::StatusOr<QueueConfig> WithCohort(absl::string_view name) const;
  // A cohort still named by a queue cannot be removed.
  absl::StatusOr<QueueConfig> WithoutCohort(absl::string_view name) const;
  absl::StatusOr<QueueConfig> WithPriorityClass(PriorityClass priority_class) const;
  absl::StatusOr<QueueConfig> WithoutPriorityClass(absl::string_view name) const;

  const QueueSpec* FindQueue(absl::string_view name) const;
  const PriorityClass* FindPriorityClass(absl::string_view name) const;
  bool HasCohort(absl::string_view name) const { return cohorts_.count(std::string(name)) != 0; }

  // The queue a job or group names (empty = `default`), or NOT_FOUND
  // naming `field`.
  absl::StatusOr<const QueueSpec*> Resolve(absl::string_view queue, absl::string_view field) const;
  // The priority of a job or group: its class's value when it names one
  // (NOT_FOUND naming `field` if unknown), else `priority` as given.
  absl::StatusOr<int32_t> PriorityOf(absl::string_view priority_class, int32_t priority,
                                     absl::string_view field) const;

  // Whether `team` may use `queue` (empty = `default`): a queue granted to
  // no team is open to all; else PERMISSION_DENIED naming `field` and the
  // queue. An unknown queue is not refused here (Resolve names it).
  absl::Status MayUse(absl::string_view queue, absl::string_view team,
                      absl::string_view field) const;

  const std::map<std::string, QueueSpec>& queues() const { return queues_; }
  const std::map<std::string, PriorityClass>& priority_classes() const { return classes_; }
  std::vector<std::string> cohorts() const { return {cohorts_.begin(), cohorts_.end()}; }

 private:
  std::map<std::string, QueueSpec> queues_;
  std::map<std::string, PriorityClass> classes_;
  std::set<std::string> cohorts_;
};

}  // namespace berth

#endif  // BERTH_QUEUEING_QUEUE_CONFIG_H_
