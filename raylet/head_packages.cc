#include "raylet/head_packages.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "auth/cluster_token.h"
#include "berth/v1/head.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "wire/proto_convert.h"

namespace berth {

PackageCache::Download DownloadFromHead(std::shared_ptr<grpc::Channel> channel,
                                        std::string cluster_token) {
  std::shared_ptr<v1::PackageService::Stub> stub = v1::PackageService::NewStub(std::move(channel));
  return [stub, cluster_token](const std::string& digest,
                               absl::Time deadline) -> absl::StatusOr<std::string> {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    AttachClusterToken(&context, cluster_token);
    v1::DownloadPackageRequest request;
    request.set_digest(digest);
    std::unique_ptr<grpc::ClientReader<v1::DownloadPackageResponse>> reader =
        stub->DownloadPackage(&context, request);
    std::string bytes;
    uint64_t size = 0;
    v1::DownloadPackageResponse chunk;
    while (reader->Read(&chunk)) {
      if (bytes.empty()) {
        size = chunk.size_bytes();
        bytes.reserve(size);
      }
      bytes.append(chunk.data());
    }
    if (grpc::Status status = reader->Finish(); !status.ok()) return FromGrpcStatus(status);
    if (bytes.size() != size) {
      return absl::DataLossError(absl::StrCat("got ", bytes.size(), " of ", size, " bytes"));
    }
    return bytes;
  };
}

}  // namespace berth
