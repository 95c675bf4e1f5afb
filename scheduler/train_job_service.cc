#include "scheduler/train_job_service.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/working_dir_package.h"
#include "queueing/queue_config.h"
#include "train/train_job_spec.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

grpc::Status NotStarted() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the head is starting; retry");
}

}  // namespace

TrainJobServiceImpl::TrainJobServiceImpl(HeadState* state, Scheduler* scheduler,
                                         RayletClients* raylets)
    : Admitted<v1::TrainJobService::Service>(HeadAdmission(*state, /*node_methods=*/false)),
      state_(state),
      scheduler_(scheduler),
      raylets_(raylets) {}

grpc::Status TrainJobServiceImpl::SubmitTrainJob(grpc::ServerContext* context,
                                                 const v1::SubmitTrainJobRequest* request,
                                                 v1::SubmitTrainJobResponse* response) {
  TrainJobController* jobs = state_->jobs();
  if (jobs == nullptr) return NotStarted();
  const std::optional<std::string> team = state_->teams.TeamOf(context);
  if (const std::string& digest = request->spec().entrypoint().command().working_dir_package();
      !digest.empty()) {
    constexpr char kField[] = "spec.entrypoint.command.working_dir_package";
    if (absl::Status s = CheckDigest(digest, kField); !s.ok()) return ToGrpcStatus(s);
    // Marks it wanted too, so it is not collected before the job names it.
    if (!state_->packages.Stat(digest, absl::Now())) {
      return ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
          kField, ": package ", digest, " is not stored on the head (upload it first)")));
    }
  }
  if (team) {
    absl::MutexLock lock(&state_->mu);
    if (absl::Status s =
            state_->groups.queue_config().MayUse(request->spec().queue(), *team, "spec.queue");
        !s.ok()) {
      return ToGrpcStatus(s);
    }
  }
  absl::StatusOr<std::string> id = jobs->Submit(*request);
  if (!id.ok()) return ToGrpcStatus(id.status());
  response->set_job_id(*id);
  return grpc::Status::OK;
}

grpc::Status TrainJobServiceImpl::MayUseJob(const grpc::ServerContext* context,
                                            const std::string& job_id) {
  const std::optional<std::string> team = state_->teams.TeamOf(context);
  TrainJobController* jobs = state_->jobs();
  if (!team || jobs == nullptr) return grpc::Status::OK;
  v1::TrainJobInfo info;
  if (!jobs->Get(job_id, &info).ok()) return grpc::Status::OK;
  absl::MutexLock lock(&state_->mu);
  return ToGrpcStatus(state_->groups.queue_config().MayUse(info.spec().queue(), *team, "job_id"));
}

grpc::Status TrainJobServiceImpl::GetTrainJob(grpc::ServerContext* context,
                                              const v1::GetTrainJobRequest* request,
                                              v1::GetTrainJobResponse* response) {
  TrainJobController* jobs = state_->jobs();
  if (jobs == nullptr) return NotStarted();
  if (grpc::Status s = MayUseJob(context, request->job_id()); !s.ok()) return s;
  return ToGrpcStatus(jobs->Get(request->job_id(), response->mutable_job()));
}

grpc::Status TrainJobServiceImpl::ListTrainJobs(grpc::ServerContext* context,
                                                const v1::ListTrainJobsRequest* request,
                                                v1::ListTrainJobsResponse* response) {
  TrainJobController* jobs = state_->jobs();
  if (jobs == nullptr) return NotStarted();
  jobs->List(*request, response);
  auto* listed = response->mutable_jobs();
  if (!request->queue().empty()) {
    listed->erase(std::remove_if(listed->begin(), listed->end(),
                                 [&](const v1::TrainJobInfo& job) {
                                   const std::string& queue = job.spec().queue();
                                   return (queue.empty() ? kDefaultQueue : queue) !=
                                          request->queue();
                                 }),
                  listed->end());
  }
  if (const std::optional<std::string> team = state_->teams.TeamOf(context)) {
    // A team sees the jobs of the queues granted to it.
    absl::MutexLock lock(&state_->mu);
    const QueueConfig& queues = state_->groups.queue_config();
    listed->erase(std::remove_if(listed->begin(), listed->end(),
                                 [&](const v1::TrainJobInfo& job) {
                                   return !queues.MayUse(job.spec().queue(), *team, "").ok();
                                 }),
                  listed->end());
  }
  return grpc::Status::OK;
}

grpc::Status TrainJobServiceImpl::StopTrainJob(grpc::ServerContext* context,
                                               const v1::StopTrainJobRequest* request,
                                               v1::StopTrainJobResponse* response) {
  TrainJobController* jobs = state_->jobs();
  if (jobs == nullptr) return NotStarted();
  if (grpc::Status s = MayUseJob(context, request->job_id()); !s.ok()) return s;
  absl::StatusOr<v1::TrainJobState> state = jobs->Stop(request->job_id());
  if (!state.ok()) return ToGrpcStatus(state.status());
  response->set_state(*state);
  return grpc::Status::OK;
}

grpc::Status TrainJobServiceImpl::StreamTrainJobLogs(grpc::ServerContext* context,
                                                     const v1::StreamTrainJobLogsRequest* request,
                                                     grpc::ServerWriter<v1::LogChunk>* writer) {
  TrainJobController* jobs = state_->jobs();
  if (jobs == nullptr) return NotStarted();
  if (grpc::Status s = MayUseJob(context, request->job_id()); !s.ok()) return s;
  std::optional<uint32_t> rank, attempt;
  if (request->has_rank()) rank = request->rank();
  if (request->has_attempt()) attempt = request->attempt();
  // Read offsets per (worker, stream); a restart brings new worker ids.
  std::map<std::pair<std::string, int>, uint64_t> offsets;
  while (true) {
    absl::StatusOr<std::vector<RankLog>> sources = jobs->Logs(request->job_id(), rank, attempt);
    if (!sources.ok()) return ToGrpcStatus(sources.status());
    bool wrote = false;
    bool all_exited = true;
    for (const RankLog& source : *sources) {
      const std::string address = scheduler_->RayletAddress(source.node_id);
      if (address.empty()) continue;
      for (v1::LogStream stream : {v1::LOG_STREAM_STDOUT, v1::LOG_STREAM_STDERR}) {
        auto [it, fresh] =
            offsets.try_emplace({source.worker_id, stream},
                                stream == v1::LOG_STREAM_STDOUT ? request->from_offset() : 0);
        v1::ReadWorkerLogRequest read;
        read.set_worker_id(source.worker_id);
        read.set_stream(stream);
        read.set_offset(it->second);
        absl::StatusOr<v1::ReadWorkerLogResponse> chunk = raylets_->ReadWorkerLog(address, read);
        if (!chunk.ok()) {
          all_exited = false;  // not started yet, or the raylet is busy
          continue;
        }
        if (!chunk->data().empty()) {
          v1::LogChunk out;
          out.set_rank(source.rank);
          out.set_attempt(source.attempt);
          out.set_worker_id(source.worker_id);
          if (source.node_rank) out.set_node_rank(*source.node_rank);
          out.set_stream(stream);
          out.set_offset(it->second);
          out.set_data(chunk->data());
          if (!writer->Write(out)) return grpc::Status::OK;  // the client went away
          it->second += chunk->data().size();
          wrote = true;
        }
        if (!chunk->exited() || chunk->size() > it->second) all_exited = false;
      }
    }
    if (wrote) continue;  // drain what is there before deciding anything
    if (!request->follow() || context->IsCancelled()) return grpc::Status::OK;
    v1::TrainJobInfo info;
    if (jobs->Get(request->job_id(), &info).ok() && all_exited && IsTerminal(info.state())) {
      return grpc::Status::OK;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

grpc::Status TrainJobServiceImpl::ReportTrainProgress(grpc::ServerContext* context,
                                                      const v1::ReportTrainProgressRequest* request,
                                                      v1::ReportTrainProgressResponse*) {
  TrainJobController* jobs = state_->jobs();
  if (jobs == nullptr) return NotStarted();
  return ToGrpcStatus(jobs->ReportProgress(*request));
}

}  // namespace berth
