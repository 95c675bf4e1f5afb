#include "queueing/queue_config.h"

#include <cmath>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "placement/label_selector.h"
#include "placement/resource_set.h"

namespace berth {
namespace {

// Queue, cohort, class and team names: Kubernetes label values, not empty.
absl::Status ValidateName(absl::string_view name, absl::string_view field) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": must not be empty"));
  return ValidateLabelValue(name, field);
}

absl::StatusOr<QuotaAmounts> AmountsFromInput(const std::map<std::string, double>& input,
                                              absl::string_view field) {
  QuotaAmounts amounts;
  for (const auto& [name, value] : input) {
    const std::string where = absl::StrCat(field, "[\"", name, "\"]");
    if (absl::Status s = ValidateResourceName(name, field); !s.ok()) return s;
    if (name == kGpuOfTypePrefix) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": names no accelerator type (write e.g. GPU:A10G)"));
    }
    if (std::isfinite(value) && value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", value, " is negative; quotas and limits are >= 0"));
    }
    absl::StatusOr<Quantity> q = Quantity::FromDouble(value, where);
    if (!q.ok()) return q.status();
    amounts[name] = *q;
  }
  return amounts;
}

// QueueSpecFromInput's within_queue_preemption and time limits.
absl::Status ReadPolicyAndTimeLimits(const QueueInput& input, absl::string_view field,
                                     QueueSpec* q) {
  if (!input.within_queue_preemption.empty()) {
    bool known = false;
    for (WithinQueuePreemption policy :
         {WithinQueuePreemption::kNever, WithinQueuePreemption::kLowerPriority,
          WithinQueuePreemption::kLowerOrNewerEqualPriority}) {
      if (input.within_queue_preemption == WithinQueuePreemptionName(policy)) {
        q->within_queue_preemption = policy;
        known = true;
      }
    }
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".within_queue_preemption: '", input.within_queue_preemption,
                       "' is none of Never, LowerPriority, LowerOrNewerEqualPriority"));
    }
  }
  if (input.default_time_limit_s < 0 || input.max_time_limit_s < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, input.default_time_limit_s < 0 ? ".default_time_limit_s" : ".max_time_limit_s",
        ": must be >= 0 (0: none)"));
  }
  if (input.max_time_limit_s > 0 && input.default_time_limit_s > input.max_time_limit_s) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".default_time_limit_s: ", input.default_time_limit_s,
                     " s is above max_time_limit_s (", input.max_time_limit_s, " s)"));
  }
  q->default_time_limit_s = input.default_time_limit_s;
  q->max_time_limit_s = input.max_time_limit_s;
  return absl::OkStatus();
}

}  // namespace

std::string GpuOfTypeResource(absl::string_view accelerator_type) {
  return absl::StrCat(kGpuOfTypePrefix, accelerator_type);
}

absl::string_view WithinQueuePreemptionName(WithinQueuePreemption policy) {
  switch (policy) {
    case WithinQueuePreemption::kNever:
      return "Never";
    case WithinQueuePreemption::kLowerPriority:
      return "LowerPriority";
    case WithinQueuePreemption::kLowerOrNewerEqualPriority:
      return "LowerOrNewerEqualPriority";
  }
  return "";
}

absl::StatusOr<QueueSpec> QueueSpecFromInput(const QueueInput& input, absl::string_view field) {
  QueueSpec q;
  if (absl::Status s = ValidateName(input.name, absl::StrCat(field, ".name")); !s.ok()) return s;
  q.name = input.name;
  if (!input.cohort.empty()) {
    if (absl::Status s = ValidateLabelValue(input.cohort, absl::StrCat(field, ".cohort")); !s.ok())
      return s;
  }
  q.cohort = input.cohort;
  if (!input.team.empty()) {
    if (absl::Status s = ValidateLabelValue(input.team, absl::StrCat(field, ".team")); !s.ok())
      return s;
  }
  q.team = input.team;
  for (auto [amounts, from, name] :
       {std::tuple{&q.nominal, &input.nominal, "nominal_quota"},
        std::tuple{&q.borrowing_limit, &input.borrowing_limit, "borrowing_limit"},
        std::tuple{&q.lending_limit, &input.lending_limit, "lending_limit"}}) {
    absl::StatusOr<QuotaAmounts> parsed = AmountsFromInput(*from, absl::StrCat(field, ".", name));
    if (!parsed.ok()) return parsed.status();
    *amounts = *std::move(parsed);
  }
  for (auto [limits, name] : {std::pair{&q.borrowing_limit, "borrowing_limit"},
                              std::pair{&q.lending_limit, "lending_limit"}}) {
    for (const auto& [resource, amount] : *limits) {
      if (q.nominal.count(resource) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".", name, "[\"", resource,
                         "\"]: the nominal quota has no such resource; a limit bounds a quota"));
      }
      if (q.cohort.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".", name, ": the queue has no cohort to borrow from or lend to"));
      }
    }
  }
  for (const auto& [resource, amount] : q.lending_limit) {
    if (amount > q.nominal.at(resource)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".lending_limit[\"", resource, "\"]: ", amount.ToString(),
                       " is above the nominal quota (", q.nominal.at(resource).ToString(), ")"));
    }
  }
  if (input.weight) {
    if (!std::isfinite(*input.weight) || *input.weight <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".weight: ", *input.weight, " is not a positive number"));
    }
    q.weight = *input.weight;
  }
  if (absl::Status s = ReadPolicyAndTimeLimits(input, field, &q); !s.ok()) return s;
  return q;
}

QueueConfig::QueueConfig() {
  QueueSpec fallback;
  fallback.name = std::string(kDefaultQueue);
  queues_.emplace(fallback.name, fallback);
}

absl::StatusOr<QueueConfig> QueueConfig::WithQueue(QueueSpec queue) const {
  if (absl::Status s = ValidateName(queue.name, "name"); !s.ok()) return s;
  if (!queue.cohort.empty() && !HasCohort(queue.cohort)) {
    return absl::NotFoundError(absl::StrCat("cohort: no cohort '", queue.cohort,
                                            "' (create it first: berth queue cohort create ",
                                            queue.cohort, ")"));
  }
  QueueConfig next = *this;
  next.queues_[queue.name] = std::move(queue);
  return next;
}

absl::StatusOr<QueueConfig> QueueConfig::WithoutQueue(absl::string_view name) const {
  if (name == kDefaultQueue) {
    return absl::InvalidArgumentError("name: the default queue cannot be deleted");
  }
  if (FindQueue(name) == nullptr) {
    return absl::NotFoundError(absl::StrCat("name: no queue '", name, "'"));
  }
  QueueConfig next = *this;
  next.queues_.erase(std::string(name));
  return next;
}

absl::StatusOr<QueueConfig> QueueConfig::WithCohort(absl::string_view name) const {
  if (absl::Status s = ValidateName(name, "name"); !s.ok()) return s;
  QueueConfig next = *this;
  next.cohorts_.insert(std::string(name));
  return next;
}

absl::StatusOr<QueueConfig> QueueConfig::WithoutCohort(absl::string_view name) const {
  if (!HasCohort(name)) return absl::NotFoundError(absl::StrCat("name: no cohort '", name, "'"));
  for (const auto& [queue_name, queue] : queues_) {
    if (queue.cohort == name) {
      return absl::FailedPreconditionError(
          absl::StrCat("name: cohort '", name, "' still has queue '", queue_name, "'"));
    }
  }
  QueueConfig next = *this;
  next.cohorts_.erase(std::string(name));
  return next;
}

absl::StatusOr<QueueConfig> QueueConfig::WithPriorityClass(PriorityClass priority_class) const {
  if (absl::Status s = ValidateName(priority_class.name, "name"); !s.ok()) return s;
  QueueConfig next = *this;
  next.classes_[priority_class.name] = std::move(priority_class);
  return next;
}

absl::StatusOr<QueueConfig> QueueConfig::WithoutPriorityClass(absl::string_view name) const {
  if (FindPriorityClass(name) == nullptr) {
    return absl::NotFoundError(absl::StrCat("name: no priority class '", name, "'"));
  }
  QueueConfig next = *this;
  next.classes_.erase(std::string(name));
  return next;
}

const QueueSpec* QueueConfig::FindQueue(absl::string_view name) const {
  auto it = queues_.find(std::string(name));
  return it == queues_.end() ? nullptr : &it->second;
}

const PriorityClass* QueueConfig::FindPriorityClass(absl::string_view name) const {
  auto it = classes_.find(std::string(name));
  return it == classes_.end() ? nullptr : &it->second;
}

absl::Status QueueConfig::MayUse(absl::string_view queue, absl::string_view team,
                                 absl::string_view field) const {
  const QueueSpec* q = FindQueue(queue.empty() ? kDefaultQueue : queue);
  if (q == nullptr || q->team.empty() || q->team == team) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(field, ": queue '", q->name,
                                                  "' is granted to team '", q->team, "'; team '",
                                                  team, "' may not use it"));
}

absl::StatusOr<const QueueSpec*> QueueConfig::Resolve(absl::string_view queue,
                                                      absl::string_view field) const {
  const QueueSpec* q = FindQueue(queue.empty() ? kDefaultQueue : queue);
  if (q == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(field, ": no queue '", queue, "' (berth queues lists them)"));
  }
  return q;
}

absl::StatusOr<int32_t> QueueConfig::PriorityOf(absl::string_view priority_class, int32_t priority,
                                                absl::string_view field) const {
  if (priority_class.empty()) return priority;
  const PriorityClass* c = FindPriorityClass(priority_class);
  if (c == nullptr) {
    return absl::NotFoundError(absl::StrCat(field, ": no priority class '", priority_class, "'"));
  }
  return c->value;
}

}  // namespace berth
