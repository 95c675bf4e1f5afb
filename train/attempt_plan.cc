#include "train/attempt_plan.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "train/train_job_spec.h"
#include "train/worker_env.h"

namespace berth {
namespace {

v1::WorkerRank RankProto(const RankedWorker& r, const std::string& worker_id) {
  v1::WorkerRank rank;
  rank.set_world_rank(r.world_rank);
  rank.set_local_rank(r.local_rank);
  rank.set_node_rank(r.node_rank);
  rank.set_local_world_size(r.local_world_size);
  rank.set_bundle_index(r.bundle_index);
  rank.set_node_id(r.node_id);
  for (uint32_t gpu : r.gpu_ids) rank.add_gpu_indices(gpu);
  rank.set_worker_id(worker_id);
  rank.set_placement_group_id(r.placement_group_id);
  return rank;
}

void SetEnv(v1::WorkerSpec& w, const std::map<std::string, std::string>& env) {
  w.mutable_env()->insert(env.begin(), env.end());
}

}  // namespace

std::string DescribeExit(const v1::WorkerStatus& s) {
  if (s.signal() != 0) return absl::StrCat("was killed by signal ", s.signal());
  return absl::StrCat("exited with code ", s.exit_code());
}

std::string DescribeProcess(const std::string& worker_id) {
  if (absl::EndsWith(worker_id, "-trainer")) return "the trainer";
  if (absl::EndsWith(worker_id, "-store")) return "the rendezvous store host";
  const size_t dash = worker_id.rfind('-');
  if (dash == std::string::npos || dash + 2 > worker_id.size()) return worker_id;
  const std::string number = worker_id.substr(dash + 2);
  if (worker_id[dash + 1] == 'r') return absl::StrCat("rank ", number);
  if (worker_id[dash + 1] == 'n') return absl::StrCat("the launcher of node rank ", number);
  return worker_id;
}

std::string DescribeFailure(const std::string& worker_id, const std::string& node_id,
                            const v1::WorkerStatus& s) {
  std::string cause = absl::StrCat(DescribeProcess(worker_id), " (", worker_id, " on ", node_id,
                                   ") ", DescribeExit(s));
  if (s.error().empty()) return cause;
  std::vector<absl::string_view> lines = absl::StrSplit(s.error(), '\n');
  absl::StrAppend(&cause, ": ", lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) absl::StrAppend(&cause, "\n    ", lines[i]);
  return cause;
}

int64_t FailedAtUs(const v1::WorkerStatus& s) {
  return s.failed_unix_us() != 0 ? s.failed_unix_us() : s.ended_unix_ms() * 1000;
}

std::optional<uint32_t> AttemptOf(const std::string& job_id, const std::string& worker_id) {
  const std::string prefix = absl::StrCat(job_id, "-a");
  if (!absl::StartsWith(worker_id, prefix)) return std::nullopt;
  absl::string_view rest = absl::string_view(worker_id).substr(prefix.size());
  uint32_t attempt = 0;
  if (!absl::SimpleAtoi(rest.substr(0, rest.find('-')), &attempt)) return std::nullopt;
  return attempt;
}

bool IsHelperProcess(const std::string& worker_id) {
  return absl::EndsWith(worker_id, "-trainer") || absl::EndsWith(worker_id, "-store");
}

std::vector<BundleSite> SitesOf(const v1::PlacementGroupInfo& group) {
  std::vector<BundleSite> sites(group.bundles_size());
  for (const v1::BundleLocation& loc : group.locations()) {
    if (loc.bundle_index() >= sites.size()) continue;
    BundleSite& site = sites[loc.bundle_index()];
    site.node_id = loc.node_id();
    for (const v1::GpuShare& g : loc.gpus()) site.gpu_ids.push_back(g.index());
  }
  return sites;
}

std::string AttemptProcessId(const std::string& job_id, uint32_t attempt, const std::string& role) {
  return absl::StrCat(job_id, "-a", attempt, "-", role);
}

std::map<std::string, std::string> RecordedProcesses(const v1::TrainJobInfo& job) {
  std::map<std::string, std::string> processes;
  for (const v1::WorkerRank& w : job.workers()) {
    processes[w.worker_id()] = w.node_id();
    if (w.world_rank() != 0) continue;
    processes[AttemptProcessId(job.job_id(), job.attempt(), "trainer")] = w.node_id();
    if (HasStoreHost(job.spec())) {
      processes[AttemptProcessId(job.job_id(), job.attempt(), "store")] = w.node_id();
    }
  }
  return processes;
}

namespace {

// The CPUs rank `rank` asked for itself (its resources_per_worker entry and
// rank_resources; the trainer's are the trainer's): its OMP_NUM_THREADS.
double WorkerCpus(const v1::ScalingConfig& scaling, uint32_t rank) {
  auto cpus = [](const v1::ResourceSet& r) {
    return r.amounts().contains("CPU") ? r.amounts().at("CPU") : 0.0;
  };
  double own = static_cast<int>(rank) < scaling.resources_per_worker_list_size()
                   ? cpus(scaling.resources_per_worker_list(rank))
                   : cpus(scaling.resources_per_worker());
  // Unset resources_per_worker: Ray's CPU 1 for CPU workers, none beside a GPU.
  if (scaling.resources_per_worker_list_size() == 0 &&
      scaling.resources_per_worker().amounts_size() == 0) {
    own = 1;
  }
  if (auto extra = scaling.rank_resources().find(rank); extra != scaling.rank_resources().end()) {
    own += cpus(extra->second);
  }
  return own;
}

// What every process of the attempt is told of it (worker_env.h).
AttemptEnv EnvOf(const AttemptInputs& in, const std::vector<RankedWorker>& ranks) {
  const v1::TrainJobSpec& spec = in.spec;
  const bool command = spec.entrypoint().has_command();
  AttemptEnv env;
  env.job_id = in.job_id;
  env.placement_group_id = in.placement_group_id;
  env.head_address = in.head_address;
  env.master_addr = in.master_addr;
  env.master_port = in.master_port;
  env.world_size = static_cast<uint32_t>(ranks.size());
  for (const RankedWorker& r : ranks) env.num_nodes = std::max(env.num_nodes, r.node_rank + 1);
  env.attempt = in.attempt;
  env.max_restarts = spec.failure_config().max_failures();
  // Built-in ranks meet at the trainer's store; a user command's store is
  // in the user's torch: a store host's, else rank 0's (worker_env.h).
  env.agent_store = !command || HasStoreHost(spec);
  env.storage_path = in.job_dir;
  if (command)
    env.report_file = absl::StrCat(in.job_dir, "/reports/attempt-", in.attempt, ".jsonl");
  env.latest_checkpoint = in.latest_checkpoint;
  env.cpus_per_worker = WorkerCpus(spec.scaling_config(), ranks.size() > 1 ? 1 : 0);
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    env.rank_cpus.push_back(WorkerCpus(spec.scaling_config(), r));
  }
  return env;
}

// Appends `worker` to the processes started on `node_id`.
void AddToNode(v1::WorkerSpec worker, const std::string& node_id, AttemptPlan* plan) {
  auto it = std::find_if(plan->by_node.begin(), plan->by_node.end(),
                         [&](const auto& node) { return node.first == node_id; });
  if (it == plan->by_node.end()) {
    plan->by_node.emplace_back(node_id, std::vector<v1::WorkerSpec>{});
    it = std::prev(plan->by_node.end());
  }
  it->second.push_back(std::move(worker));
}

// A process of the attempt in `role`, in the bundle of `in_bundle_of`.
v1::WorkerSpec NewWorker(const AttemptInputs& in, const std::string& role,
                         const RankedWorker& in_bundle_of) {
  v1::WorkerSpec w;
  w.set_worker_id(AttemptProcessId(in.job_id, in.attempt, role));
  w.set_job_id(in.job_id);
  w.set_placement_group_id(in_bundle_of.placement_group_id);
  w.set_bundle_index(in_bundle_of.bundle_index);
  return w;
}

// The process runs `argv` of the user's command, with its env and
// working directory.
void SetUserCommand(const v1::Entrypoint::Command& user, const std::vector<std::string>& argv,
                    v1::WorkerSpec* w) {
  for (const std::string& a : argv) w->add_argv(a);
  for (const auto& [k, v] : user.env()) (*w->mutable_env())[k] = v;
  w->set_cwd(user.working_dir());
  w->set_working_dir_package(user.working_dir_package());
}

std::vector<std::string> TrainerArgv(const AttemptInputs& in, const AttemptEnv& env) {
  std::vector<std::string> args;
  if (in.spec.entrypoint().has_command()) {
    args = {in.relay_binary, "--report-file", env.report_file, "--world-size",
            absl::StrCat(env.world_size)};
  } else {
    args = {in.worker_binary,   "trainer",
            "--world-size",     absl::StrCat(env.world_size),
            "--checkpoint-dir", absl::StrCat(in.job_dir, "/checkpoints"),
            "--port",           absl::StrCat(in.master_port)};
    if (!in.latest_checkpoint.empty()) {
      args.insert(args.end(), {"--resume-from", in.latest_checkpoint});
    }
  }
  args.insert(args.end(), {"--head", in.head_address, "--job-id", in.job_id});
  return args;
}

// The trainer: the job's driver. It hosts the built-in ranks' store
// (berth-worker trainer); for a user command it relays berth.train.report()
// from rank 0's node (berth-relay, which loads no libtorch).
v1::WorkerSpec Trainer(const AttemptInputs& in, const AttemptEnv& env, const RankedWorker& rank0) {
  v1::WorkerSpec trainer = NewWorker(in, "trainer", rank0);
  for (const std::string& a : TrainerArgv(in, env)) trainer.add_argv(a);
  SetEnv(trainer, NodeEnv(env, rank0.node_id, 0, rank0.local_world_size, 0, true));
  // Only the trainer calls the head (ReportTrainProgress); ranks never see the token.
  if (!in.cluster_token.empty()) (*trainer.mutable_env())["BERTH_CLUSTER_TOKEN"] = in.cluster_token;
  return trainer;
}

// The rendezvous store host of a per-rank Python command, on rank 0's node.
v1::WorkerSpec StoreHost(const AttemptInputs& in, const AttemptEnv& env,
                         const RankedWorker& rank0) {
  const v1::Entrypoint::Command& user = in.spec.entrypoint().command();
  v1::WorkerSpec store = NewWorker(in, "store", rank0);
  SetEnv(store, NodeEnv(env, rank0.node_id, 0, rank0.local_world_size, 0, true));
  SetUserCommand(user, StoreHostArgv(user.argv(0), env.master_port, env.world_size), &store);
  return store;
}

// The launcher of node rank `node_rank`, holding the node's bundles and
// GPUs; it starts the node's ranks itself (ranks follow the placement:
// rank 0's node is node rank 0).
absl::Status AddLauncher(const AttemptInputs& in, const AttemptEnv& env,
                         const std::vector<RankedWorker>& ranks, uint32_t node_rank,
                         AttemptPlan* plan) {
  const v1::Entrypoint::Command& user = in.spec.entrypoint().command();
  std::vector<const RankedWorker*> local;
  for (const RankedWorker& r : ranks) {
    if (r.node_rank == node_rank) local.push_back(&r);
  }
  const RankedWorker& first = *local.front();
  if (LauncherOf(user) == Launcher::kTorchrun && local.size() != ranks[0].local_world_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "torchrun runs the same number of ranks on every node, but the placement put ",
        ranks[0].local_world_size, " on node rank 0 and ", local.size(), " on node rank ",
        node_rank,
        " (use STRICT_SPREAD with one worker of all a node's GPUs, or a per-rank command)"));
  }
  NodeLaunch launch{node_rank,      env.num_nodes,  static_cast<uint32_t>(local.size()),
                    env.world_size, in.master_addr, env.master_port};
  absl::StatusOr<std::vector<std::string>> full_argv = LauncherArgv(
      LauncherOf(user), std::vector<std::string>(user.argv().begin(), user.argv().end()), launch);
  if (!full_argv.ok()) return full_argv.status();
  v1::WorkerSpec w = NewWorker(in, absl::StrCat("n", node_rank), first);
  for (uint32_t gpu : first.visible_gpu_ids) w.add_visible_gpu_indices(gpu);
  *w.mutable_rank() = RankProto(first, w.worker_id());
  const bool has_gpus = std::any_of(local.begin(), local.end(),
                                    [](const RankedWorker* r) { return !r->gpu_ids.empty(); });
  SetEnv(w, NodeEnv(env, first.node_id, node_rank, static_cast<uint32_t>(local.size()),
                    first.bundle_index, has_gpus));
  SetUserCommand(user, *full_argv, &w);
  for (const RankedWorker* r : local) {
    plan->ranks.push_back(RankProto(*r, w.worker_id()));
    w.add_bundle_indices(r->bundle_index);  // its limits are the node's bundles'
  }
  AddToNode(std::move(w), first.node_id, plan);
  return absl::OkStatus();
}

// The built-in trainer's rank: berth-worker train, with the flags set.
void SetBuiltinRank(const AttemptInputs& in, v1::WorkerSpec* w) {
  const auto& builtin = in.spec.entrypoint().builtin_trainer();
  w->add_argv(in.worker_binary);
  w->add_argv("train");
  auto flag = [&](const char* name, auto value) {
    if (value <= 0) return;
    w->add_argv(name);
    w->add_argv(absl::StrCat(value));
  };
  flag("--steps", builtin.steps());
  flag("--lr", builtin.learning_rate());
  flag("--batch-size", builtin.batch_size());
  flag("--checkpoint-every", builtin.checkpoint_every_steps());
}

void AddRank(const AttemptInputs& in, const AttemptEnv& env, const std::vector<RankedWorker>& ranks,
             const RankedWorker& r, AttemptPlan* plan) {
  v1::WorkerSpec w = NewWorker(in, absl::StrCat("r", r.world_rank), r);
  for (uint32_t gpu : r.visible_gpu_ids) w.add_visible_gpu_indices(gpu);
  // Its node-mates' GPUs may be in other groups of the job (elastic ones).
  std::set<std::string> peers;
  for (const RankedWorker& mate : ranks) {
    if (mate.node_id == r.node_id && mate.placement_group_id != r.placement_group_id) {
      peers.insert(mate.placement_group_id);
    }
  }
  for (const std::string& peer : peers) w.add_peer_placement_group_ids(peer);
  *w.mutable_rank() = RankProto(r, w.worker_id());
  SetEnv(w, RankEnv(env, r));
  if (in.spec.entrypoint().has_command()) {
    const v1::Entrypoint::Command& user = in.spec.entrypoint().command();
    SetUserCommand(user, {user.argv().begin(), user.argv().end()}, &w);
  } else {
    SetBuiltinRank(in, &w);
  }
  plan->ranks.push_back(w.rank());
  AddToNode(std::move(w), r.node_id, plan);
}

}  // namespace

absl::StatusOr<AttemptPlan> PlanAttempt(const AttemptInputs& in) {
  // Each rank says its group: the job's, or (elastic) one of its own.
  std::vector<RankedWorker> ranks = in.ranks;
  for (RankedWorker& r : ranks) {
    if (r.placement_group_id.empty()) r.placement_group_id = in.placement_group_id;
  }
  const AttemptEnv env = EnvOf(in, ranks);
  AttemptPlan plan;
  AddToNode(Trainer(in, env, ranks[0]), ranks[0].node_id, &plan);
  if (HasStoreHost(in.spec)) AddToNode(StoreHost(in, env, ranks[0]), ranks[0].node_id, &plan);
  if (IsPerNode(in.spec)) {
    for (uint32_t node_rank = 0; node_rank < env.num_nodes; ++node_rank) {
      if (absl::Status s = AddLauncher(in, env, ranks, node_rank, &plan); !s.ok()) return s;
    }
    return plan;
  }
  for (const RankedWorker& r : ranks) AddRank(in, env, ranks, r, &plan);
  return plan;
}

}  // namespace berth
