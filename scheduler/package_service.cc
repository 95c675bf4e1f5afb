#include "scheduler/package_service.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/working_dir_package.h"
#include "train/train_job_spec.h"
#include "wire/proto_convert.h"

namespace berth {
namespace {

constexpr size_t kDownloadChunkBytes = 1 << 20;

}  // namespace

PackageServiceImpl::PackageServiceImpl(HeadState* state)
    : Admitted<v1::PackageService::Service>(HeadAdmission(*state, /*node_methods=*/false)),
      state_(state) {}

grpc::Status PackageServiceImpl::StatPackage(grpc::ServerContext*,
                                             const v1::StatPackageRequest* request,
                                             v1::StatPackageResponse* response) {
  if (absl::Status s = CheckDigest(request->digest(), "digest"); !s.ok()) return ToGrpcStatus(s);
  if (std::optional<uint64_t> size = state_->packages.Stat(request->digest(), absl::Now())) {
    response->set_stored(true);
    response->set_size_bytes(*size);
  }
  return grpc::Status::OK;
}

grpc::Status PackageServiceImpl::UploadPackage(grpc::ServerContext*,
                                               grpc::ServerReader<v1::UploadPackageRequest>* reader,
                                               v1::UploadPackageResponse* response) {
  v1::UploadPackageRequest message;
  if (!reader->Read(&message) || !message.has_header()) {
    return ToGrpcStatus(absl::InvalidArgumentError("header: the first message must be the header"));
  }
  const v1::UploadPackageRequest::Header header = message.header();
  if (absl::Status s = CheckDigest(header.digest(), "header.digest"); !s.ok()) {
    return ToGrpcStatus(s);
  }
  const uint64_t limit = state_->packages.limit_bytes();
  if (header.size_bytes() == 0 || header.size_bytes() > limit) {
    return ToGrpcStatus(absl::ResourceExhaustedError(
        absl::StrCat("header.size_bytes: ", header.size_bytes(), " is not in 1..", limit,
                     " (the head's limit, berth-head --package-limit-mb)")));
  }
  Collect();
  std::string bytes;
  bytes.reserve(header.size_bytes());
  while (reader->Read(&message)) {
    if (message.has_header()) {
      return ToGrpcStatus(absl::InvalidArgumentError("header: sent twice"));
    }
    if (bytes.size() + message.data().size() > header.size_bytes()) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("data: more bytes than header.size_bytes (", header.size_bytes(), ")")));
    }
    bytes.append(message.data());
  }
  if (bytes.size() != header.size_bytes()) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "data: ", bytes.size(), " bytes came, header.size_bytes said ", header.size_bytes())));
  }
  absl::StatusOr<bool> added = state_->packages.Put(header.digest(), std::move(bytes), absl::Now());
  if (!added.ok()) return ToGrpcStatus(added.status());
  response->set_digest(header.digest());
  response->set_already_stored(!*added);
  return grpc::Status::OK;
}

grpc::Status PackageServiceImpl::DownloadPackage(
    grpc::ServerContext*, const v1::DownloadPackageRequest* request,
    grpc::ServerWriter<v1::DownloadPackageResponse>* writer) {
  if (absl::Status s = CheckDigest(request->digest(), "digest"); !s.ok()) return ToGrpcStatus(s);
  std::shared_ptr<const std::string> bytes = state_->packages.Get(request->digest());
  if (bytes == nullptr) {
    return ToGrpcStatus(absl::NotFoundError(
        absl::StrCat("digest: package ", request->digest(), " is not stored on the head")));
  }
  for (size_t offset = 0; offset < bytes->size(); offset += kDownloadChunkBytes) {
    v1::DownloadPackageResponse chunk;
    if (offset == 0) chunk.set_size_bytes(bytes->size());
    chunk.set_data(bytes->substr(offset, kDownloadChunkBytes));
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "reader went away");
  }
  return grpc::Status::OK;
}

void PackageServiceImpl::Collect() {
  TrainJobController* jobs = state_->jobs();
  if (jobs == nullptr) return;  // not started: nothing is known of the jobs yet
  v1::ListTrainJobsResponse listed;
  jobs->List(v1::ListTrainJobsRequest(), &listed);
  std::set<std::string> in_use;
  for (const v1::TrainJobInfo& job : listed.jobs()) {
    const std::string& digest = job.spec().entrypoint().command().working_dir_package();
    if (!IsTerminal(job.state()) && !digest.empty()) in_use.insert(digest);
  }
  state_->packages.Collect(in_use, absl::Now());
}

}  // namespace berth
