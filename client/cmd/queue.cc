// berth queue create|update|delete|get|list and berth queue cohort
// create|delete: the queues teams share the cluster through (QueueService).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cmd/command.h"
#include "client/format.h"
#include "client/queue_file.h"
#include "placement/resource_set.h"

namespace berth {
namespace {

struct QueueFlags {
  std::string name;
  std::string cohort;
  std::string quota;
  std::string borrowing_limit;
  std::string lending_limit;
  double weight = 1;
  std::string team;
  std::string within_queue_preemption;
};

// `GPU=8,CPU=64` into a proto map; errors name the flag.
absl::Status ParseAmounts(const std::string& text, const std::string& flag,
                          google::protobuf::Map<std::string, double>* out) {
  absl::StatusOr<std::vector<std::pair<std::string, Quantity>>> amounts =
      ParseResourceList(text, flag, "GPU=8,CPU=64,memory=512Gi");
  if (!amounts.ok()) return amounts.status();
  for (const auto& [name, amount] : *amounts) (*out)[name] = amount.ToDouble();
  return absl::OkStatus();
}

absl::StatusOr<v1::Queue> QueueOf(const QueueFlags& flags) {
  v1::Queue queue;
  queue.set_name(flags.name);
  queue.set_cohort(flags.cohort);
  queue.set_weight(flags.weight);
  queue.set_team(flags.team);
  queue.set_within_queue_preemption(flags.within_queue_preemption);
  for (auto [text, flag, out] :
       {std::tuple{&flags.quota, "--quota", queue.mutable_nominal_quota()},
        std::tuple{&flags.borrowing_limit, "--borrowing-limit", queue.mutable_borrowing_limit()},
        std::tuple{&flags.lending_limit, "--lending-limit", queue.mutable_lending_limit()}}) {
    if (absl::Status s = ParseAmounts(*text, flag, out); !s.ok()) return s;
  }
  return queue;
}

std::string Amounts(const google::protobuf::Map<std::string, double>& amounts) {
  if (amounts.empty()) return "-";
  const std::map<std::string, double> sorted(amounts.begin(), amounts.end());
  return absl::StrJoin(sorted, ",", [](std::string* out, const auto& entry) {
    absl::StrAppend(out, entry.first, "=", entry.second);
  });
}

// "default/max" of a queue's jobs' time limits; "-" for none.
std::string TimeLimits(const v1::Queue& q) {
  auto limit = [](int64_t s) {
    return s == 0 ? std::string("-") : absl::FormatDuration(absl::Seconds(s));
  };
  if (q.default_time_limit_s() == 0 && q.max_time_limit_s() == 0) return "-";
  return absl::StrCat(limit(q.default_time_limit_s()), "/", limit(q.max_time_limit_s()));
}

std::string FormatQueues(const v1::ListQueuesResponse& r) {
  std::string out = absl::StrFormat("%-20s %-12s %-6s %-24s %-20s %-20s %-25s %-16s %s\n", "NAME",
                                    "COHORT", "WEIGHT", "QUOTA", "BORROWING LIMIT", "LENDING LIMIT",
                                    "PREEMPTS IN QUEUE", "TIME LIMIT", "TEAM");
  for (const v1::Queue& q : r.queues()) {
    absl::StrAppendFormat(
        &out, "%-20s %-12s %-6g %-24s %-20s %-20s %-25s %-16s %s\n", q.name(),
        q.cohort().empty() ? "-" : q.cohort(), q.weight(), Amounts(q.nominal_quota()),
        Amounts(q.borrowing_limit()), Amounts(q.lending_limit()),
        q.within_queue_preemption().empty() ? "LowerPriority" : q.within_queue_preemption(),
        TimeLimits(q), q.team().empty() ? "-" : q.team());
  }
  absl::StrAppend(
      &out, "Cohorts: ", r.cohorts().empty() ? "(none)" : absl::StrJoin(r.cohorts(), ", "), "\n");
  if (!r.priority_classes().empty()) {
    absl::StrAppend(&out, "Priority classes: ",
                    absl::StrJoin(r.priority_classes(), ", ",
                                  [](std::string* s, const v1::PriorityClass& c) {
                                    absl::StrAppend(s, c.name(), "=", c.value());
                                  }),
                    "\n");
  }
  google::protobuf::RepeatedPtrField<v1::QueueStatus> statuses;
  for (const v1::Queue& q : r.queues()) {
    if (q.has_status()) *statuses.Add() = q.status();
  }
  if (!statuses.empty())
    absl::StrAppend(&out, "\n", FormatQueueStatuses(statuses, /*pending_gangs=*/true));
  return out;
}

std::string FormatQueue(const v1::Queue& q) {
  v1::ListQueuesResponse one;
  *one.add_queues() = q;
  std::string table = FormatQueues(one);
  return table.substr(0, table.rfind("Cohorts: "));
}

int RunQueueCreate(const Context& ctx, const QueueFlags& flags) {
  absl::StatusOr<v1::Queue> queue = QueueOf(flags);
  if (!queue.ok()) return UsageError(queue.status());
  v1::CreateQueueRequest request;
  *request.mutable_queue() = *std::move(queue);
  return Print(ctx, ctx.client.CreateQueue(request),
               [](const v1::CreateQueueResponse& r) { return FormatQueue(r.queue()); });
}

int RunQueueUpdate(const Context& ctx, const QueueFlags& flags) {
  absl::StatusOr<v1::Queue> queue = QueueOf(flags);
  if (!queue.ok()) return UsageError(queue.status());
  v1::UpdateQueueRequest request;
  *request.mutable_queue() = *std::move(queue);
  return Print(ctx, ctx.client.UpdateQueue(request),
               [](const v1::UpdateQueueResponse& r) { return FormatQueue(r.queue()); });
}

struct NameFlags {
  std::string name;
};

int RunQueueDelete(const Context& ctx, const NameFlags& flags) {
  v1::DeleteQueueRequest request;
  request.set_name(flags.name);
  return Print(ctx, ctx.client.DeleteQueue(request), [&](const v1::DeleteQueueResponse&) {
    return absl::StrCat("deleted queue ", flags.name, "\n");
  });
}

int RunQueueGet(const Context& ctx, const NameFlags& flags) {
  v1::GetQueueRequest request;
  request.set_name(flags.name);
  return Print(ctx, ctx.client.GetQueue(request),
               [](const v1::GetQueueResponse& r) { return FormatQueue(r.queue()); });
}

int RunQueueList(const Context& ctx, const NoFlags&) {
  return Print(ctx, ctx.client.ListQueues(), FormatQueues);
}

struct ApplyFlags {
  std::string file;
};

int RunQueueApply(const Context& ctx, const ApplyFlags& flags) {
  absl::StatusOr<v1::ApplyQueuesRequest> request = LoadQueueFile(flags.file);
  if (!request.ok()) return UsageError(request.status());
  return Print(ctx, ctx.client.ApplyQueues(*request),
               [](const v1::ApplyQueuesResponse& r) { return FormatQueues(r.config()); });
}

struct PriorityClassFlags {
  std::string name;
  int32_t value = 0;
};

int RunPriorityClassCreate(const Context& ctx, const PriorityClassFlags& flags) {
  v1::CreatePriorityClassRequest request;
  request.mutable_priority_class()->set_name(flags.name);
  request.mutable_priority_class()->set_value(flags.value);
  return Print(ctx, ctx.client.CreatePriorityClass(request),
               [&](const v1::CreatePriorityClassResponse&) {
                 return absl::StrCat("priority class ", flags.name, " = ", flags.value, "\n");
               });
}

int RunPriorityClassDelete(const Context& ctx, const NameFlags& flags) {
  v1::DeletePriorityClassRequest request;
  request.set_name(flags.name);
  return Print(ctx, ctx.client.DeletePriorityClass(request),
               [&](const v1::DeletePriorityClassResponse&) {
                 return absl::StrCat("deleted priority class ", flags.name, "\n");
               });
}

int RunCohortCreate(const Context& ctx, const NameFlags& flags) {
  v1::CreateCohortRequest request;
  request.set_name(flags.name);
  return Print(ctx, ctx.client.CreateCohort(request), [&](const v1::CreateCohortResponse&) {
    return absl::StrCat("cohort ", flags.name, "\n");
  });
}

int RunCohortDelete(const Context& ctx, const NameFlags& flags) {
  v1::DeleteCohortRequest request;
  request.set_name(flags.name);
  return Print(ctx, ctx.client.DeleteCohort(request), [&](const v1::DeleteCohortResponse&) {
    return absl::StrCat("deleted cohort ", flags.name, "\n");
  });
}

void AddQueueFlags(CLI::App* cmd, QueueFlags* flags) {
  cmd->add_option("NAME", flags->name, "Queue name")->required();
  cmd->add_option("--cohort", flags->cohort, "Cohort whose queues lend each other idle quota");
  cmd->add_option("--quota", flags->quota,
                  "Nominal quota: GPU=8,CPU=64,memory=512Gi, GPU:A10G=4 for one GPU type");
  cmd->add_option("--borrowing-limit", flags->borrowing_limit,
                  "How far above its quota it may borrow, per resource (default: no limit)");
  cmd->add_option("--lending-limit", flags->lending_limit,
                  "How much of its quota it lends, per resource (default: all)");
  cmd->add_option("--weight", flags->weight, "Fair-share weight")->capture_default_str();
  cmd->add_option("--team", flags->team, "The team that may use it (default: any)");
  cmd->add_option("--within-queue-preemption", flags->within_queue_preemption,
                  "Which of its running gangs a waiting one may preempt: Never, LowerPriority "
                  "(default) or LowerOrNewerEqualPriority (also later ones of its priority, "
                  "when it waits for room, not quota), as Kueue's withinClusterQueue");
}

}  // namespace

void AddQueueCommands(CLI::App& app, Action* action) {
  CLI::App* queue = app.add_subcommand("queue", "Queues, their quotas and cohorts");
  queue->require_subcommand(1);

  auto create = std::make_shared<QueueFlags>();
  CLI::App* create_cmd = queue->add_subcommand("create", "Create a queue");
  AddQueueFlags(create_cmd, create.get());
  OnChosen(create_cmd, action, create, RunQueueCreate);

  auto update = std::make_shared<QueueFlags>();
  CLI::App* update_cmd = queue->add_subcommand("update", "Replace a queue's quota and limits");
  AddQueueFlags(update_cmd, update.get());
  OnChosen(update_cmd, action, update, RunQueueUpdate);

  auto remove = std::make_shared<NameFlags>();
  CLI::App* delete_cmd = queue->add_subcommand("delete", "Delete a queue");
  delete_cmd->add_option("NAME", remove->name, "Queue name")->required();
  OnChosen(delete_cmd, action, remove, RunQueueDelete);

  auto get = std::make_shared<NameFlags>();
  CLI::App* get_cmd = queue->add_subcommand("get", "Show one queue");
  get_cmd->add_option("NAME", get->name, "Queue name")->required();
  OnChosen(get_cmd, action, get, RunQueueGet);

  CLI::App* list_cmd = queue->add_subcommand("list", "List the queues and cohorts");
  OnChosen(list_cmd, action, std::make_shared<NoFlags>(), RunQueueList);
  CLI::App* queues_cmd = app.add_subcommand("queues", "List the queues and cohorts");
  OnChosen(queues_cmd, action, std::make_shared<NoFlags>(), RunQueueList);

  auto apply = std::make_shared<ApplyFlags>();
  CLI::App* apply_cmd = queue->add_subcommand(
      "apply", "Create or replace the cohorts, priority classes and queues of a YAML file, whole");
  apply_cmd->add_option("-f,--file", apply->file, "Queue file (queues.yaml)")->required();
  OnChosen(apply_cmd, action, apply, RunQueueApply);

  CLI::App* classes =
      queue->add_subcommand("priority-class", "Named priorities jobs and groups may use");
  classes->require_subcommand(1);
  auto class_create = std::make_shared<PriorityClassFlags>();
  CLI::App* class_create_cmd = classes->add_subcommand("create", "Create or replace one");
  class_create_cmd->add_option("NAME", class_create->name, "Priority class name")->required();
  class_create_cmd->add_option("--value", class_create->value, "Higher goes first")->required();
  OnChosen(class_create_cmd, action, class_create, RunPriorityClassCreate);
  auto class_delete = std::make_shared<NameFlags>();
  CLI::App* class_delete_cmd = classes->add_subcommand("delete", "Delete one");
  class_delete_cmd->add_option("NAME", class_delete->name, "Priority class name")->required();
  OnChosen(class_delete_cmd, action, class_delete, RunPriorityClassDelete);

  CLI::App* cohort = queue->add_subcommand("cohort", "Cohorts: queues that lend each other quota");
  cohort->require_subcommand(1);
  auto cohort_create = std::make_shared<NameFlags>();
  CLI::App* cohort_create_cmd = cohort->add_subcommand("create", "Create a cohort");
  cohort_create_cmd->add_option("NAME", cohort_create->name, "Cohort name")->required();
  OnChosen(cohort_create_cmd, action, cohort_create, RunCohortCreate);
  auto cohort_delete = std::make_shared<NameFlags>();
  CLI::App* cohort_delete_cmd = cohort->add_subcommand("delete", "Delete a cohort no queue names");
  cohort_delete_cmd->add_option("NAME", cohort_delete->name, "Cohort name")->required();
  OnChosen(cohort_delete_cmd, action, cohort_delete, RunCohortDelete);
}

}  // namespace berth
