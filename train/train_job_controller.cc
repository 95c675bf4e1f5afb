#include "train/train_job_controller.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/log.h"
#include "common/random_id.h"
#include "train/train_job_spec.h"
#include "wire/message_fingerprint.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

const char* ActionName(const JobAction& action) {
  static constexpr const char* kNames[] = {"create group", "allocate port",  "start processes",
                                           "list workers", "stop processes", "remove group",
                                           "release group"};
  static_assert(std::size(kNames) == std::variant_size_v<JobAction>, "a name for every action");
  return kNames[action.index()];
}

}  // namespace

TrainJobController::TrainJobController(PlacementGroupHost* groups, RayletClients* raylets,
                                       TrainControllerConfig config)
    : groups_(groups), raylets_(raylets), config_(std::move(config)) {
  for (int i = 0; i < std::max(1, config_.worker_threads); ++i) {
    pool_.emplace_back([this] { PoolLoop(); });
  }
}

TrainJobController::~TrainJobController() { Shutdown(); }

void TrainJobController::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (pool_stopping_) return;
    shutting_down_ = true;
    for (auto& [id, job] : jobs_) {
      if (job->reconciler.RequestStop()) WakeLocked(id, *job);
    }
    mu_.Await(absl::Condition(
        +[](size_t* active) { return *active == 0; }, &active_));
    pool_stopping_ = true;
  }
  for (std::thread& t : pool_) t.join();
}

void TrainJobController::Leave() {
  {
    absl::MutexLock lock(&mu_);
    if (pool_stopping_) return;
    shutting_down_ = true;
    leaving_ = true;
    pool_stopping_ = true;
  }
  for (std::thread& t : pool_) t.join();
}

void TrainJobController::AddLocked(const std::string& id, std::unique_ptr<Job> job) {
  Job& added = *job;
  if (!added.reconciler.placement_group_id().empty()) {
    by_group_[added.reconciler.placement_group_id()] = id;
  }
  for (const std::string& group : added.reconciler.elastic_group_ids()) by_group_[group] = id;
  by_request_id_[added.request_id] = id;
  jobs_[id] = std::move(job);
  if (added.reconciler.done()) return;
  ++active_;
  WakeLocked(id, added);
}

absl::StatusOr<std::string> TrainJobController::Submit(v1::SubmitTrainJobRequest request) {
  // Unset (0) is Ray's default, one worker: kept as 1, so a retry that
  // says 1 is the same job and the job shows its world size.
  v1::ScalingConfig& scaling = *request.mutable_spec()->mutable_scaling_config();
  if (scaling.num_workers() == 0) scaling.set_num_workers(1);
  if (absl::Status s =
          ValidateTrainJobRequest(request, config_.max_name_length, config_.max_stop_grace);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<PlacementGroupSpec> group = PlacementGroupForJob(request.spec());
  if (!group.ok()) return group.status();
  if (absl::Status s = groups_->CheckJobGroup(request.mutable_spec()); !s.ok()) return s;

  absl::MutexLock lock(&mu_);
  const uint64_t fingerprint = MessageFingerprint(request);
  if (auto it = by_request_id_.find(request.request_id()); it != by_request_id_.end()) {
    if (jobs_.at(it->second)->fingerprint != fingerprint) {
      return absl::InvalidArgumentError(
          absl::StrCat("request_id: '", request.request_id(), "' was used for a different job"));
    }
    return it->second;
  }
  if (shutting_down_) return absl::UnavailableError("the head is shutting down");
  if (active_ >= config_.max_active_jobs) {
    return absl::ResourceExhaustedError(
        absl::StrCat(active_, " train jobs are not finished (berth-head --max-active-jobs ",
                     config_.max_active_jobs, "); stop some or retry later"));
  }
  std::string id;
  do {
    id = absl::StrFormat("job-%08x", RandomIdBits() & 0xffffffffULL);
  } while (jobs_.count(id) > 0);
  const absl::Time now = absl::Now();
  v1::TrainJobInfo info;
  info.set_job_id(id);
  *info.mutable_spec() = request.spec();
  info.set_state(v1::TRAIN_JOB_STATE_PENDING);
  info.set_message("creating the placement group");
  info.set_submitted_unix_ms(absl::ToUnixMillis(now));
  info.mutable_startup()->set_submitted_unix_us(absl::ToUnixMicros(now));
  auto job = std::make_unique<Job>(JobReconciler(std::move(info), *std::move(group), config_.job));
  job->request_id = request.request_id();
  job->fingerprint = fingerprint;
  PersistLocked(*job);
  AddLocked(id, std::move(job));
  return id;
}

absl::Status TrainJobController::Get(const std::string& job_id, v1::TrainJobInfo* info) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job_id: no job '", job_id, "'"));
  *info = it->second->reconciler.info();
  return absl::OkStatus();
}

void TrainJobController::List(const v1::ListTrainJobsRequest& request,
                              v1::ListTrainJobsResponse* response) const {
  absl::MutexLock lock(&mu_);
  std::vector<const v1::TrainJobInfo*> infos;
  for (const auto& [id, job] : jobs_) {
    const v1::TrainJobInfo& info = job->reconciler.info();
    if (request.states_size() > 0 && std::find(request.states().begin(), request.states().end(),
                                               info.state()) == request.states().end()) {
      continue;
    }
    infos.push_back(&info);
  }
  std::sort(infos.begin(), infos.end(), [](const v1::TrainJobInfo* a, const v1::TrainJobInfo* b) {
    return a->submitted_unix_ms() < b->submitted_unix_ms();
  });
  for (const v1::TrainJobInfo* info : infos) *response->add_jobs() = *info;
}

absl::StatusOr<v1::TrainJobState> TrainJobController::Stop(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job_id: no job '", job_id, "'"));
  const v1::TrainJobState state = it->second->reconciler.info().state();
  if (!it->second->reconciler.RequestStop()) return state;
  PersistLocked(*it->second);  // a head restarted from here on still stops it
  WakeLocked(job_id, *it->second);
  return state;
}

absl::Status TrainJobController::ReportProgress(const v1::ReportTrainProgressRequest& request) {
  if (request.job_id().empty()) return absl::InvalidArgumentError("job_id: required");
  constexpr int kMaxMetrics = 64;
  if (request.metrics_size() > kMaxMetrics) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: ", request.metrics_size(), " entries, at most ", kMaxMetrics));
  }
  for (const auto& [name, value] : request.metrics()) {
    if (absl::Status s = ValidateString(name, "metrics key", 128, true); !s.ok()) return s;
  }
  std::vector<std::string> checkpointed;  // the job's groups, told outside the lock
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(request.job_id());
    if (it == jobs_.end()) {
      return absl::NotFoundError(absl::StrCat("job_id: no job '", request.job_id(), "'"));
    }
    JobReconciler& job = it->second->reconciler;
    const auto checkpoint_of = [&] {
      return std::make_pair(job.info().latest_checkpoint(), job.info().latest_checkpoint_step());
    };
    const auto checkpoint_before = checkpoint_of();
    const bool due = job.OnProgress(absl::Now(), request);
    // Staged now, in the order of the reports; waited for without the lock,
    // so the other jobs' events and reads do not wait for a write.
    seq = StageLocked(*it->second);
    if (due) WakeLocked(request.job_id(), *it->second);
    if (checkpoint_of() != checkpoint_before) {
      if (!job.placement_group_id().empty()) checkpointed.push_back(job.placement_group_id());
      checkpointed.insert(checkpointed.end(), job.elastic_group_ids().begin(),
                          job.elastic_group_ids().end());
    }
  }
  Durable(seq);  // the report is answered once kept
  for (const std::string& group : checkpointed) groups_->GroupCheckpointed(group);
  return absl::OkStatus();
}

void TrainJobController::OnWorkerExit(const std::string& node_id, const v1::WorkerStatus& status) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(status.job_id());
  if (it == jobs_.end()) return;
  it->second->reconciler.OnWorkerExit(status);
  WakeLocked(it->first, *it->second);
}

void TrainJobController::OnGroupChanged(GroupSnapshot group) {
  absl::MutexLock lock(&mu_);
  auto it = by_group_.find(group.id);
  if (it == by_group_.end()) return;
  Job& job = *jobs_.at(it->second);
  // Told from several threads, a change may arrive after a later one.
  auto seen = job.seen.find(group.id);
  if (seen != job.seen.end() && seen->second >= group.version) return;
  auto told = job.told.find(group.id);
  if (told != job.told.end() && told->second.version >= group.version) return;
  const std::string id = group.id;
  job.told[id] = std::move(group);
  WakeLocked(it->second, job);
}

void TrainJobController::OnNodeDead(const std::string& node_id) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, job] : jobs_) {
    if (job->reconciler.WatchedNodes().count(node_id) > 0) WakeLocked(id, *job);
  }
}

absl::StatusOr<std::vector<RankLog>> TrainJobController::Logs(
    const std::string& job_id, std::optional<uint32_t> rank,
    std::optional<uint32_t> attempt) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job_id: no job '", job_id, "'"));
  const JobReconciler& job = it->second->reconciler;
  if (rank && *rank >= job.info().spec().scaling_config().num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("rank: ", *rank, " >= num_workers"));
  }
  std::vector<RankLog> logs;
  std::set<std::string> workers;  // a launcher per node writes for several ranks
  for (const RankLog& l : job.logs()) {
    if ((!rank || l.rank == *rank) && (!attempt || l.attempt == *attempt) &&
        workers.insert(l.worker_id).second) {
      logs.push_back(l);
    }
  }
  if (attempt && logs.empty() && *attempt <= job.info().attempt()) {
    return absl::NotFoundError(absl::StrCat("attempt: the logs of attempt ", *attempt,
                                            " are not kept (the latest ",
                                            JobReconciler::kAttemptsWithLogs, " attempts' are)"));
  }
  if (attempt && *attempt > job.info().attempt()) {
    return absl::NotFoundError(absl::StrCat("attempt: ", *attempt, " has not started (attempt ",
                                            job.info().attempt(), " is the latest)"));
  }
  return logs;
}

void TrainJobController::Restore(const std::vector<v1::TrainJobRecord>& records) {
  absl::MutexLock lock(&mu_);
  for (const v1::TrainJobRecord& record : records) {
    const std::string& id = record.info().job_id();
    absl::StatusOr<PlacementGroupSpec> group = PlacementGroupForJob(record.info().spec());
    if (id.empty() || jobs_.count(id) > 0 || !group.ok()) continue;
    auto job =
        std::make_unique<Job>(JobReconciler::Restored(record, *std::move(group), config_.job));
    job->request_id = record.request_id();
    v1::SubmitTrainJobRequest submitted;
    *submitted.mutable_spec() = record.info().spec();
    submitted.set_request_id(record.request_id());
    job->fingerprint = MessageFingerprint(submitted);
    AddLocked(id, std::move(job));
  }
}

uint64_t TrainJobController::StageLocked(const Job& job) {
  if (!config_.stage) return 0;
  v1::TrainJobRecord record = job.reconciler.Record();
  record.set_request_id(job.request_id);
  return config_.stage(record);
}

void TrainJobController::Durable(uint64_t seq) const {
  if (config_.durable) config_.durable(seq);
}

void TrainJobController::WakeLocked(const std::string& job_id, Job& job) {
  if (job.running) {
    job.again = true;
  } else if (!job.queued) {
    job.queued = true;
    ready_.push_back(job_id);
  }
}

bool TrainJobController::DueLocked() const {
  return pool_stopping_ || !ready_.empty() ||
         (!timers_.empty() && timers_.begin()->first <= absl::Now());
}

void TrainJobController::PoolLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    // Until work is due, or a timer earlier than the one waited for is set.
    const absl::Time next_timer = timers_.empty() ? absl::InfiniteFuture() : timers_.begin()->first;
    auto due = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return DueLocked() || (!timers_.empty() && timers_.begin()->first < next_timer);
    };
    mu_.AwaitWithDeadline(absl::Condition(&due), next_timer);
    if (leaving_) return;
    const absl::Time now = absl::Now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      auto [at, id] = *timers_.begin();
      timers_.erase(timers_.begin());
      Job& job = *jobs_.at(id);
      if (job.wake_at == at) WakeLocked(id, job);
    }
    if (ready_.empty()) {
      if (pool_stopping_) return;
      continue;
    }
    const std::string id = std::move(ready_.front());
    ready_.pop_front();
    Job& job = *jobs_.at(id);
    job.queued = false;
    job.running = true;
    mu_.Unlock();
    Drive(id);
    mu_.Lock();
    job.running = false;
    if (leaving_) return;
    if (std::exchange(job.again, false)) WakeLocked(id, job);
  }
}

void TrainJobController::Drive(const std::string& job_id) {
  while (true) {
    std::string group_id;
    std::vector<std::string> elastic_ids;
    std::set<std::string> nodes;
    std::map<std::string, GroupSnapshot> told;
    {
      absl::MutexLock lock(&mu_);
      Job& job = *jobs_.at(job_id);
      if (job.reconciler.done()) {
        if (!std::exchange(job.finished, true)) {
          // Its end (the result that removed its last group) was not
          // written: no Step follows.
          PersistLocked(job);
          by_group_.erase(job.reconciler.placement_group_id());
          for (const std::string& group : job.reconciler.elastic_group_ids()) {
            by_group_.erase(group);
          }
          --active_;
        }
        return;
      }
      group_id = job.reconciler.placement_group_id();
      elastic_ids.assign(job.reconciler.elastic_group_ids().begin(),
                         job.reconciler.elastic_group_ids().end());
      nodes = job.reconciler.WatchedNodes();
      told = std::exchange(job.told, {});
      job.again = false;  // an event from here on makes it read the head again
    }
    // The head is called without mu_ (it calls this controller with its own).
    std::map<std::string, uint64_t> seen;
    const JobWorld world = ReadWorld(group_id, elastic_ids, nodes, std::move(told), &seen);
    JobStep step;
    {
      absl::MutexLock lock(&mu_);
      Job& job = *jobs_.at(job_id);
      SeenLocked(job, seen);
      const v1::TrainJobState state_before = job.reconciler.info().state();
      const std::string message_before = job.reconciler.info().message();
      const int causes_before = job.reconciler.info().failure_causes_size();
      step = job.reconciler.Step(absl::Now(), world);
      if (step.restarted && config_.on_restart) config_.on_restart();
      // Every change of state, and of what it says outside PENDING (which
      // says the pending reason at each look).
      const v1::TrainJobInfo& info = job.reconciler.info();
      for (int c = causes_before; c < info.failure_causes_size(); ++c) {
        LogWarning("train job ", job_id, ": attempt ", info.attempt(),
                   " failed: ", info.failure_causes(c));
      }
      if (info.state() != state_before ||
          (info.state() != v1::TRAIN_JOB_STATE_PENDING && info.message() != message_before)) {
        LogInfo("train job ", job_id, ": ", v1::TrainJobState_Name(info.state()), " ",
                info.message());
      }
      if (step.action) LogDebug("train job ", job_id, ": action ", ActionName(*step.action));
      if (step.persist) PersistLocked(job);
      if (!step.action) {
        // An event came while the head was read: read it again now.
        if (job.again || job.reconciler.done()) continue;
        job.wake_at = step.wake_at;
        if (step.wake_at != absl::InfiniteFuture()) timers_.emplace(step.wake_at, job_id);
        return;
      }
    }
    JobActionResult result = Execute(job_id, *std::move(step.action));
    absl::MutexLock lock(&mu_);
    Job& job = *jobs_.at(job_id);
    job.reconciler.OnResult(absl::Now(), std::move(result));
    // Durable before the lock is let go: a job shown RUNNING is RUNNING for
    // the head that restores it.
    if (job.reconciler.TakePersist()) PersistLocked(job);
    if (!job.reconciler.placement_group_id().empty()) {
      by_group_[job.reconciler.placement_group_id()] = job_id;
    }
    for (const std::string& group : job.reconciler.elastic_group_ids()) by_group_[group] = job_id;
  }
}

void TrainJobController::SeenLocked(Job& job, const std::map<std::string, uint64_t>& seen) {
  for (const auto& [id, version] : seen) {
    uint64_t& last = job.seen[id];
    last = std::max(last, version);
    auto told = job.told.find(id);
    if (told != job.told.end() && told->second.version <= last) job.told.erase(told);
  }
  // A step sees every group the job has: the others are gone from it.
  for (auto it = job.seen.begin(); it != job.seen.end();) {
    it = seen.count(it->first) > 0 ? std::next(it) : job.seen.erase(it);
  }
}

JobWorld TrainJobController::ReadWorld(const std::string& placement_group_id,
                                       const std::vector<std::string>& elastic_ids,
                                       const std::set<std::string>& nodes,
                                       std::map<std::string, GroupSnapshot> told,
                                       std::map<std::string, uint64_t>* seen) {
  auto snapshot = [&](const std::string& id) {
    auto it = told.find(id);
    GroupSnapshot group = it != told.end() ? std::move(it->second) : groups_->GetGroup(id);
    (*seen)[id] = group.version;
    return std::move(group.info);
  };
  JobWorld world;
  if (!placement_group_id.empty()) world.group = snapshot(placement_group_id);
  for (const std::string& id : elastic_ids) world.elastic.emplace(id, snapshot(id));
  for (const std::string& node : nodes) {
    if (!groups_->RayletAddress(node).empty()) world.alive.insert(node);
  }
  return world;
}

JobActionResult TrainJobController::Execute(const std::string& job_id, JobAction action) {
  if (auto* create = std::get_if<CreateGroup>(&action)) {
    return GroupCreated{groups_->CreateGroup(std::move(create->spec), create->meta)};
  }
  if (auto* port = std::get_if<AllocatePort>(&action)) {
    const std::string address = groups_->RayletAddress(port->node_id);
    if (address.empty()) return PortAllocated{absl::UnavailableError("rank 0's node is gone")};
    absl::StatusOr<v1::AllocatePortResponse> allocated = raylets_->AllocatePort(address);
    if (!allocated.ok()) return PortAllocated{allocated.status()};
    const std::string host = allocated->host().empty() ? HostOf(address) : allocated->host();
    return PortAllocated{std::make_pair(host, static_cast<uint16_t>(allocated->port()))};
  }
  if (auto* start = std::get_if<StartProcesses>(&action)) return Start(std::move(*start));
  if (auto* list = std::get_if<ListWorkers>(&action)) return ListOn(job_id, list->nodes);
  if (auto* stop = std::get_if<StopProcesses>(&action)) return StopAll(*stop);
  if (auto* release = std::get_if<ReleaseGroup>(&action)) {
    return GroupReleased{groups_->LetGo(release->placement_group_id)};
  }
  groups_->RemoveGroup(std::get<RemoveGroup>(action).placement_group_id);
  return GroupRemoved{};
}

ProcessesStarted TrainJobController::Start(StartProcesses action) {
  // The nodes in parallel (as many at once as the executor for raylet calls
  // runs, this thread too), each node's processes one by one: one by one
  // overall, a job would wait a round trip per process, each slow on a node
  // busy loading the processes started before. Not all of a node's at once:
  // a raylet forks one process at a time, so calls queued behind each other
  // would spend their deadlines waiting.
  auto& by_node = action.by_node;
  absl::Mutex mu;
  ProcessesStarted result;
  std::atomic<size_t> next{0};
  auto start_nodes = [&] {
    for (size_t i = next++; i < by_node.size(); i = next++) {
      const std::string& node_id = by_node[i].first;
      const std::string address = groups_->RayletAddress(node_id);
      for (v1::WorkerSpec& worker : by_node[i].second) {
        v1::StartWorkerRequest request;
        request.set_request_id(absl::StrCat("start/", worker.worker_id()));
        *request.mutable_spec() = std::move(worker);
        absl::StatusOr<v1::StartWorkerResponse> response =
            address.empty() ? absl::UnavailableError(absl::StrCat("node ", node_id, " is gone"))
                            : raylets_->StartWorker(address, request);
        if (absl::IsNotFound(response.status())) {
          // Else the job would start here again and again, on a bundle the
          // head's books hold and the node does not.
          groups_->BundleNotOnNode(node_id, request.spec().placement_group_id(),
                                   request.spec().bundle_index());
        }
        absl::MutexLock lock(&mu);
        if (response.ok()) {
          result.started[request.spec().worker_id()] = node_id;
        } else if (result.status.ok()) {
          result.status = absl::Status(response.status().code(),
                                       absl::StrCat("starting ", request.spec().worker_id(), " on ",
                                                    node_id, ": ", response.status().message()));
        }
        if (!result.status.ok()) return;  // this attempt is over, on every node
      }
    }
  };
  // One share per node besides this thread's (a share that finds no node
  // left ends at once): the executor's size bounds how many run.
  const size_t helpers = config_.raylet_calls && !by_node.empty() ? by_node.size() - 1 : 0;
  absl::BlockingCounter finished(static_cast<int>(helpers));
  for (size_t t = 0; t < helpers; ++t) {
    config_.raylet_calls([&] {
      start_nodes();
      finished.DecrementCount();
    });
  }
  start_nodes();
  finished.Wait();
  return result;
}

WorkersListed TrainJobController::ListOn(const std::string& job_id,
                                         const std::set<std::string>& nodes) {
  WorkersListed listed;
  for (const std::string& node : nodes) {
    const std::string address = groups_->RayletAddress(node);
    if (address.empty()) {
      listed.by_node.emplace(node,
                             absl::UnavailableError(absl::StrCat("node ", node, " is not ALIVE")));
      continue;
    }
    v1::ListWorkersRequest request;
    request.set_job_id(job_id);
    listed.by_node.emplace(node, raylets_->ListWorkers(address, request));
  }
  return listed;
}

StopsSent TrainJobController::StopAll(const StopProcesses& stop) {
  StopsSent sent;
  for (const auto& [worker_id, node_id] : stop.processes) {
    const std::string address = groups_->RayletAddress(node_id);
    if (address.empty()) continue;
    v1::StopWorkerRequest request;
    request.set_worker_id(worker_id);
    request.set_grace_period_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(stop.grace)));
    request.set_request_id(absl::StrCat("stop/", worker_id));
    raylets_->StopWorker(address, request).IgnoreError();
  }
  // Waited for (bounded) until the processes on live nodes are gone, so the
  // next attempt does not share GPUs with the last one.
  for (const auto& [worker_id, node_id] : stop.processes) {
    if (!groups_->RayletAddress(node_id).empty()) sent.awaited.push_back(worker_id);
  }
  return sent;
}

}  // namespace berth
