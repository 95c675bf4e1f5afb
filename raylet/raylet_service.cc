#include "raylet/raylet_service.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "auth/cluster_tls.h"
#include "common/log.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "raylet/raylet_convert.h"
#include "raylet/tcp_port.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

// Test hooks: waits while `file` exists (an empty name: not at all) or
// until `give_up()`; false when it gave up.
bool WaitWhileExists(const std::string& file, const std::function<bool()>& give_up) {
  struct stat ignored;
  while (!file.empty() && stat(file.c_str(), &ignored) == 0) {
    if (give_up()) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

constexpr size_t kMaxIdBytes = 256;
// Results remembered for retries; a head retries within seconds, so the
// newest few thousand are plenty.
constexpr size_t kMaxCachedResults = 4096;

// Same bytes for equal messages (map order included), to recognise retries.
std::string Fingerprint(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

std::string IndicesToString(const google::protobuf::RepeatedField<uint32_t>& indices) {
  return indices.empty() ? "all" : absl::StrJoin(indices, ",");
}

// Only the head places bundles and starts processes here.
AdmissionPolicy HeadOnly(const RayletService::Options& options) {
  AdmissionPolicy policy{options.cluster_token, options.tls};
  policy.role_of_every_method = TlsRole::kHead;
  if (HeadEpochFence* fence = options.fence) {
    policy.gate = [fence](const grpc::ServerContextBase& context) { return fence->Admit(context); };
  }
  return policy;
}

}  // namespace

RayletService::RayletService(Options options, BundleReservations reservations,
                             WorkerProcessManager* workers)
    : Admitted(HeadOnly(options)),
      options_(std::move(options)),
      workers_(workers),
      reservations_(std::move(reservations)) {}

grpc::Status RayletService::Idempotent(absl::string_view method, const std::string& request_id,
                                       const google::protobuf::Message& request,
                                       google::protobuf::Message* response,
                                       const std::function<absl::Status()>& apply) {
  if (absl::Status s = ValidateString(request_id, "request_id", kMaxIdBytes, true); !s.ok()) {
    return ToGrpcStatus(s);
  }
  const std::string key = absl::StrCat(method, "/", request_id);
  std::string fingerprint = Fingerprint(request);
  absl::MutexLock lock(&mu_);
  if (auto it = results_.find(key); it != results_.end()) {
    if (it->second.request_fingerprint != fingerprint) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("request_id: \"", request_id, "\" was already used for a ",
                                       method, " with different arguments"));
    }
    response->ParseFromString(it->second.response);
    return it->second.status;
  }
  const absl::Status status = apply();
  if (!status.ok()) response->Clear();  // an error carries no half-filled answer
  if (result_order_.size() >= kMaxCachedResults) {
    results_.erase(result_order_.front());
    result_order_.pop_front();
  }
  results_[key] = {std::move(fingerprint), ToGrpcStatus(status), response->SerializeAsString()};
  result_order_.push_back(key);
  return ToGrpcStatus(status);
}

grpc::Status RayletService::PrepareBundleResources(grpc::ServerContext* context,
                                                   const v1::PrepareBundleResourcesRequest* request,
                                                   v1::PrepareBundleResourcesResponse* response) {
  return Prepare(request, response);
}

grpc::Status RayletService::Prepare(const v1::PrepareBundleResourcesRequest* request,
                                    v1::PrepareBundleResourcesResponse* response) {
  return Idempotent(
      "PrepareBundleResources", request->request_id(), *request, response, [&]() -> absl::Status {
        const std::string& pg = request->placement_group_id();
        if (absl::Status s = ValidateString(pg, "placement_group_id", kMaxIdBytes, true); !s.ok()) {
          return s;
        }
        std::vector<BundleRequest> bundles;
        for (int i = 0; i < request->bundles_size(); ++i) {
          const v1::BundleReservation& b = request->bundles(i);
          absl::StatusOr<BundleRequest> bundle = BundleRequestFromProto(
              b.bundle_index(), b.resources(), b.gpus(), absl::StrCat("bundles[", i, "]"));
          if (!bundle.ok()) return bundle.status();
          bundles.push_back(*std::move(bundle));
        }
        struct stat ignored;
        if (!options_.refuse_prepare_file.empty() &&
            stat(options_.refuse_prepare_file.c_str(), &ignored) == 0) {
          response->set_prepared(false);
          response->set_reason(
              absl::StrCat("refusing prepares: ", options_.refuse_prepare_file, " exists"));
          LogWarning("prepare ", pg, " refused: ", response->reason());
          return absl::OkStatus();
        }
        absl::StatusOr<PrepareOutcome> outcome = reservations_.Prepare(pg, bundles);
        if (!outcome.ok()) return outcome.status();
        if (outcome->prepared) {
          for (const BundleRequest& b : bundles)
            prepared_since_registration_.insert({pg, b.bundle_index});
        }
        if (outcome->prepared && request->commit()) {
          std::vector<uint32_t> indices;
          for (const BundleRequest& b : bundles) indices.push_back(b.bundle_index);
          if (absl::Status s = reservations_.Commit(pg, indices); !s.ok()) return s;
        }
        response->set_prepared(outcome->prepared);
        response->set_reason(outcome->reason);
        LogInfo("prepare ", pg, " (", bundles.size(), " bundles): ",
                outcome->prepared ? (request->commit() ? "prepared and committed" : "prepared")
                                  : absl::StrCat("not prepared: ", outcome->reason));
        return absl::OkStatus();
      });
}

grpc::Status RayletService::CommitBundleResources(grpc::ServerContext* context,
                                                  const v1::CommitBundleResourcesRequest* request,
                                                  v1::CommitBundleResourcesResponse* response) {
  return Commit(request, response);
}

grpc::Status RayletService::Commit(const v1::CommitBundleResourcesRequest* request,
                                   v1::CommitBundleResourcesResponse* response) {
  struct stat ignored;
  if (!options_.hold_commits_file.empty() &&
      stat(options_.hold_commits_file.c_str(), &ignored) == 0) {
    LogInfo("commit ", request->placement_group_id(), ": holding commits while ",
            options_.hold_commits_file, " exists");
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    WaitWhileExists(options_.hold_commits_file, [&] { return absl::Now() > give_up; });
  }
  return Idempotent(
      "CommitBundleResources", request->request_id(), *request, response, [&]() -> absl::Status {
        const std::string& pg = request->placement_group_id();
        if (absl::Status s = ValidateString(pg, "placement_group_id", kMaxIdBytes, true); !s.ok()) {
          return s;
        }
        if (request->bundle_indices().empty()) {
          return absl::InvalidArgumentError("bundle_indices: at least one bundle is required");
        }
        const std::vector<uint32_t> indices(request->bundle_indices().begin(),
                                            request->bundle_indices().end());
        if (absl::Status s = reservations_.Commit(pg, indices); !s.ok()) return s;
        LogInfo("commit ", pg, " bundles ", IndicesToString(request->bundle_indices()));
        return absl::OkStatus();
      });
}

grpc::Status RayletService::CancelResourceReserve(grpc::ServerContext* context,
                                                  const v1::CancelResourceReserveRequest* request,
                                                  v1::CancelResourceReserveResponse* response) {
  return Cancel(request, response);
}

grpc::Status RayletService::Cancel(const v1::CancelResourceReserveRequest* request,
                                   v1::CancelResourceReserveResponse* response) {
  return Idempotent(
      "CancelResourceReserve", request->request_id(), *request, response, [&]() -> absl::Status {
        const std::string& pg = request->placement_group_id();
        if (absl::Status s = ValidateString(pg, "placement_group_id", kMaxIdBytes, true); !s.ok()) {
          return s;
        }
        const std::vector<uint32_t> indices(request->bundle_indices().begin(),
                                            request->bundle_indices().end());
        const std::vector<BundleKey> released = reservations_.Cancel(pg, indices);
        StopWorkersOf(released);
        LogInfo("cancel ", pg, " bundles ", IndicesToString(request->bundle_indices()), ": ",
                released.size(), " released");
        return absl::OkStatus();
      });
}

grpc::Status RayletService::ApplyBundleOps(grpc::ServerContext* context,
                                           const v1::ApplyBundleOpsRequest* request,
                                           v1::ApplyBundleOpsResponse* response) {
  for (int i = 0; i < request->ops_size(); ++i) {
    if (request->ops(i).op_case() == v1::BundleOp::OP_NOT_SET) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("ops[", i, "]: one of prepare, commit or cancel is required"));
    }
  }
  for (const v1::BundleOp& op : request->ops()) {
    v1::BundleOpResult* result = response->add_results();
    grpc::Status status;
    switch (op.op_case()) {
      case v1::BundleOp::kPrepare:
        status = Prepare(&op.prepare(), result->mutable_prepare());
        break;
      case v1::BundleOp::kCommit: {
        v1::CommitBundleResourcesResponse ignored;
        status = Commit(&op.commit(), &ignored);
        break;
      }
      case v1::BundleOp::kCancel: {
        v1::CancelResourceReserveResponse ignored;
        status = Cancel(&op.cancel(), &ignored);
        break;
      }
      case v1::BundleOp::OP_NOT_SET:
        break;  // refused above
    }
    result->set_code(status.error_code());
    result->set_message(status.error_message());
  }
  return grpc::Status::OK;
}

grpc::Status RayletService::ReleaseUnusedBundles(grpc::ServerContext* context,
                                                 const v1::ReleaseUnusedBundlesRequest* request,
                                                 v1::ReleaseUnusedBundlesResponse* response) {
  return Idempotent(
      "ReleaseUnusedBundles", request->request_id(), *request, response, [&]() -> absl::Status {
        std::set<BundleKey> in_use;
        for (int i = 0; i < request->in_use_size(); ++i) {
          const v1::BundleKey& key = request->in_use(i);
          if (absl::Status s = ValidateString(key.placement_group_id(),
                                              absl::StrCat("in_use[", i, "].placement_group_id"),
                                              kMaxIdBytes, true);
              !s.ok()) {
            return s;
          }
          in_use.insert(BundleKeyFromProto(key));
        }
        std::vector<ReservedBundle> expected;
        for (int i = 0; i < request->kept_size(); ++i) {
          const v1::KeptBundle& kept = request->kept(i);
          absl::StatusOr<BundleRequest> bundle =
              BundleRequestFromProto(kept.bundle().bundle_index(), kept.bundle().resources(),
                                     kept.bundle().gpus(), absl::StrCat("kept[", i, "].bundle"));
          if (!bundle.ok()) return bundle.status();
          expected.push_back(
              {{kept.placement_group_id(), bundle->bundle_index}, bundle->resources, bundle->gpus});
        }
        const std::vector<BundleKey> released = reservations_.ReleaseUnused(in_use, expected);
        StopWorkersOf(released);
        for (const BundleKey& key : released) BundleKeyToProto(key, response->add_released());
        LogInfo("release unused: kept ", in_use.size(), ", released ", released.size());
        return absl::OkStatus();
      });
}

grpc::Status RayletService::StartWorker(grpc::ServerContext* context,
                                        const v1::StartWorkerRequest* request,
                                        v1::StartWorkerResponse* response) {
  if (!WaitWhileExists(options_.hold_starts_file, [&] {
        return context->IsCancelled() ||
               std::chrono::system_clock::now() + std::chrono::milliseconds(100) >
                   context->deadline();
      })) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("holding starts: ", options_.hold_starts_file, " exists"));
  }
  // The package before the lock: a download must not hold up the node's
  // other calls.
  absl::StatusOr<std::string> package_folder = PackageFolder(request->spec(), context->deadline());
  if (!package_folder.ok()) return ToGrpcStatus(package_folder.status());
  return Idempotent("StartWorker", request->request_id(), *request, response, [&]() {
    return StartWorkerLocked(request->spec(), *package_folder, response);
  });
}

absl::StatusOr<std::string> RayletService::PackageFolder(
    const v1::WorkerSpec& spec, std::chrono::system_clock::time_point deadline) {
  const std::string& digest = spec.working_dir_package();
  if (digest.empty()) return std::string();
  if (!spec.cwd().empty()) {
    return absl::InvalidArgumentError(
        "spec.working_dir_package: give either a cwd or a package to run in, not both");
  }
  if (options_.packages == nullptr) {
    return absl::FailedPreconditionError(
        "spec.working_dir_package: this raylet keeps no package cache");
  }
  // Time to answer left after the download.
  return options_.packages->Ensure(digest, absl::FromChrono(deadline) - absl::Milliseconds(500));
}

namespace {

// The worker's limits: what the bundles it holds hold together (its own,
// or each the spec names, which must include its own).
absl::Status SetLimits(const v1::WorkerSpec& spec, const BundleReservations& reservations,
                       WorkerLaunch* launch) {
  std::set<uint32_t> indices(spec.bundle_indices().begin(), spec.bundle_indices().end());
  if (!indices.empty() && indices.count(spec.bundle_index()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.bundle_indices: must include bundle_index ", spec.bundle_index()));
  }
  indices.insert(spec.bundle_index());
  absl::StatusOr<ResourceSet> held =
      reservations.CommittedSum(spec.placement_group_id(), indices, "spec.bundle_indices");
  if (!held.ok()) return held.status();
  launch->memory_bytes = held->Get(kMemory).units() / Quantity::kUnitsPerWhole;
  launch->cpus = held->Get(kCpu).ToDouble();
  return absl::OkStatus();
}

}  // namespace

absl::Status RayletService::StartWorkerLocked(const v1::WorkerSpec& spec,
                                              const std::string& package_folder,
                                              v1::StartWorkerResponse* response) {
  const std::string& pg = spec.placement_group_id();
  if (absl::Status s = ValidateString(pg, "spec.placement_group_id", kMaxIdBytes, true); !s.ok()) {
    return s;
  }
  const BundleKey key{pg, spec.bundle_index()};
  const ReservedBundle* bundle = reservations_.Find(key);
  if (bundle == nullptr && syncing_) {
    return absl::UnavailableError(absl::StrCat("spec.bundle_index: ", key.ToString(),
                                               " is not restored yet (registering with the head)"));
  }
  // NOT_FOUND tells the head its books are wrong (the bundle went with a
  // restart it did not see), and the group places it again.
  if (bundle == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("spec.bundle_index: ", key.ToString(), " is not held on this node"));
  }
  if (bundle->state != BundleState::kCommitted) {
    return absl::FailedPreconditionError(
        absl::StrCat("spec.bundle_index: ", key.ToString(), " is not committed on this node"));
  }
  WorkerLaunch launch;
  launch.worker_id = spec.worker_id();
  launch.job_id = spec.job_id();
  launch.placement_group_id = pg;
  launch.bundle_index = spec.bundle_index();
  launch.argv.assign(spec.argv().begin(), spec.argv().end());
  launch.env.insert(spec.env().begin(), spec.env().end());
  if (!options_.worker_pythonpath.empty()) {
    std::string& path = launch.env["PYTHONPATH"];
    path = path.empty() ? options_.worker_pythonpath
                        : absl::StrCat(path, ":", options_.worker_pythonpath);
  }
  // A trainer calls the head back; with TLS it verifies the head by this CA.
  if (options_.tls.enabled) launch.env["BERTH_TLS_CA_PEM"] = options_.tls.ca_pem;
  launch.cwd = package_folder.empty() ? spec.cwd() : package_folder;
  if (spec.has_rank()) launch.rank = absl::StrCat(spec.rank().world_rank());
  if (absl::Status s = SetLimits(spec, reservations_, &launch); !s.ok()) return s;
  if (spec.visible_gpu_indices().empty()) {
    for (const GpuShare& share : bundle->gpus) launch.visible_gpu_indices.push_back(share.index);
  } else {
    // Any GPU of the same group (or its job's peer groups) on this node, so
    // that a worker may see its node-mates' GPUs (NCCL peer access), as the
    // head decides.
    std::set<std::string> groups(spec.peer_placement_group_ids().begin(),
                                 spec.peer_placement_group_ids().end());
    groups.insert(pg);
    std::set<uint32_t> held;
    for (const ReservedBundle& b : reservations_.List()) {
      if (groups.count(b.key.placement_group_id) == 0 || b.state != BundleState::kCommitted) {
        continue;
      }
      for (const GpuShare& share : b.gpus) held.insert(share.index);
    }
    std::set<uint32_t> seen;
    for (int i = 0; i < spec.visible_gpu_indices_size(); ++i) {
      const uint32_t index = spec.visible_gpu_indices(i);
      const std::string field = absl::StrCat("spec.visible_gpu_indices[", i, "]");
      if (!seen.insert(index).second) {
        return absl::InvalidArgumentError(absl::StrCat(field, ": GPU ", index, " listed twice"));
      }
      if (held.count(index) == 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            field, ": GPU ", index, " is not held by placement group ", pg, " on this node"));
      }
      launch.visible_gpu_indices.push_back(index);
    }
  }
  absl::StatusOr<StartedWorker> started = workers_->Start(launch);
  if (!started.ok()) {
    LogWarning("worker ", launch.worker_id, " failed to start: ", started.status().message());
    return started.status();
  }
  response->set_pid(started->pid);
  response->set_already_running(started->already_running);
  if (!started->already_running) {
    LogInfo("worker ", launch.worker_id, " started: pid ", started->pid, ", ", key.ToString(),
            ", CUDA_VISIBLE_DEVICES=", absl::StrJoin(launch.visible_gpu_indices, ","));
  }
  return absl::OkStatus();
}

grpc::Status RayletService::StopWorker(grpc::ServerContext* context,
                                       const v1::StopWorkerRequest* request,
                                       v1::StopWorkerResponse* response) {
  return Idempotent("StopWorker", request->request_id(), *request, response, [&]() -> absl::Status {
    if (absl::Status s = ValidateString(request->worker_id(), "worker_id", kMaxIdBytes, true);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            workers_->Stop(request->worker_id(), absl::Milliseconds(request->grace_period_ms()));
        !s.ok()) {
      return s;
    }
    LogInfo("worker ", request->worker_id(), " stopping (grace ", request->grace_period_ms(),
            " ms)");
    return absl::OkStatus();
  });
}

grpc::Status RayletService::ListWorkers(grpc::ServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) {
  for (const WorkerRecord& record : workers_->List()) {
    if (!request->job_id().empty() && record.job_id != request->job_id()) continue;
    WorkerRecordToProto(record, response->add_workers());
  }
  return grpc::Status::OK;
}

grpc::Status RayletService::AllocatePort(grpc::ServerContext* context,
                                         const v1::AllocatePortRequest*,
                                         v1::AllocatePortResponse* response) {
  absl::StatusOr<TcpPortReservation> port = TcpPortReservation::Reserve(options_.advertise_host, 0);
  if (!port.ok()) return ToGrpcStatus(port.status());
  response->set_port(port->port());
  response->set_host(options_.advertise_host);
  return grpc::Status::OK;
}

grpc::Status RayletService::ReadWorkerLog(grpc::ServerContext* context,
                                          const v1::ReadWorkerLogRequest* request,
                                          v1::ReadWorkerLogResponse* response) {
  if (request->stream() != v1::LOG_STREAM_STDOUT && request->stream() != v1::LOG_STREAM_STDERR) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "stream: STDOUT or STDERR");
  }
  const std::string path =
      workers_->LogPath(request->worker_id(), request->stream() == v1::LOG_STREAM_STDERR);
  if (path.empty() || request->worker_id().size() > kMaxIdBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "worker_id: a worker id, not a path");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("worker_id: no log for '", request->worker_id(), "'"));
  }
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  const uint64_t max =
      request->max_bytes() == 0 ? 64 * 1024 : std::min<uint64_t>(request->max_bytes(), 1 << 20);
  if (request->offset() < size) {
    std::string data(std::min(max, size - request->offset()), '\0');
    in.seekg(static_cast<std::streamoff>(request->offset()));
    in.read(data.data(), static_cast<std::streamsize>(data.size()));
    data.resize(static_cast<size_t>(in.gcount()));
    response->set_data(std::move(data));
  }
  response->set_size(size);
  bool exited = true;
  for (const WorkerRecord& record : workers_->List()) {
    if (record.worker_id == request->worker_id()) exited = record.state != WorkerState::kRunning;
  }
  response->set_exited(exited);
  return grpc::Status::OK;
}

std::vector<ReservedBundle> RayletService::Bundles() const {
  absl::MutexLock lock(&mu_);
  return reservations_.List();
}

ResourceSet RayletService::Available() const {
  absl::MutexLock lock(&mu_);
  return reservations_.free();
}

void RayletService::BeginRegistration() {
  absl::MutexLock lock(&mu_);
  prepared_since_registration_.clear();
  syncing_ = true;
}

absl::Status RayletService::SyncHeldBundles(
    const google::protobuf::RepeatedPtrField<v1::HeldBundle>& held) {
  absl::MutexLock lock(&mu_);
  // The head placed these after it answered; they are not stale.
  std::set<BundleKey> keep = prepared_since_registration_;
  for (const v1::HeldBundle& h : held) {
    keep.insert(BundleKeyFromProto(h.key()));
  }
  const std::vector<BundleKey> released = reservations_.ReleaseUnused(keep);
  StopWorkersOf(released);
  absl::Status first_error;
  unrestored_.clear();
  for (int i = 0; i < held.size(); ++i) {
    const v1::HeldBundle& h = held[i];
    const std::string& pg = h.key().placement_group_id();
    absl::Status status = [&]() -> absl::Status {
      absl::StatusOr<BundleRequest> bundle = BundleRequestFromProto(
          h.key().bundle_index(), h.resources(), h.gpus(), absl::StrCat("held_bundles[", i, "]"));
      if (!bundle.ok()) return bundle.status();
      absl::StatusOr<PrepareOutcome> outcome = reservations_.Prepare(pg, {*bundle});
      if (!outcome.ok()) return outcome.status();
      if (!outcome->prepared) return absl::ResourceExhaustedError(outcome->reason);
      return h.committed() ? reservations_.Commit(pg, {h.key().bundle_index()}) : absl::OkStatus();
    }();
    if (status.ok()) continue;
    unrestored_.insert({pg, h.key().bundle_index()});
    if (first_error.ok()) {
      first_error =
          absl::Status(status.code(), absl::StrCat("held_bundles[", i, "]: ", status.message()));
    }
  }
  syncing_ = false;
  LogInfo("synced bundles with the head: holding ", held.size(), ", released ", released.size(),
          first_error.ok() ? "" : absl::StrCat("; ", first_error.message()));
  return first_error;
}

std::vector<v1::BundleKey> RayletService::Unrestored() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::BundleKey> keys;
  for (const BundleKey& key : unrestored_) BundleKeyToProto(key, &keys.emplace_back());
  return keys;
}

void RayletService::AcknowledgeUnrestored(const std::vector<v1::BundleKey>& keys) {
  absl::MutexLock lock(&mu_);
  for (const v1::BundleKey& key : keys) unrestored_.erase(BundleKeyFromProto(key));
}

void RayletService::StopWorkersOf(const std::vector<BundleKey>& bundles) {
  if (bundles.empty()) return;
  const std::set<BundleKey> keys(bundles.begin(), bundles.end());
  for (const WorkerRecord& record : workers_->List()) {
    if (record.state != WorkerState::kRunning) continue;
    if (keys.count({record.placement_group_id, record.bundle_index}) == 0) continue;
    if (workers_->Stop(record.worker_id, options_.bundle_release_grace).ok()) {
      LogInfo("worker ", record.worker_id, " stopping: its bundle was released");
    }
  }
}

grpc::Status RayletService::ReturnGpu(grpc::ServerContext* context,
                                      const v1::ReturnGpuRequest* request,
                                      v1::ReturnGpuResponse* response) {
  if (!options_.return_gpu) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this node watches no GPU health");
  }
  absl::StatusOr<std::string> reason = options_.return_gpu(request->gpu_index());
  if (!reason.ok()) return ToGrpcStatus(reason.status());
  response->set_was_unhealthy_reason(*std::move(reason));
  return grpc::Status::OK;
}

}  // namespace berth
