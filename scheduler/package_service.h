// PackageServiceImpl: PackageService (head.proto) over the head's
// PackageStore: clients upload a job's working directory, raylets download
// it. Each upload first collects the packages no unfinished job names.
#ifndef BERTH_SCHEDULER_PACKAGE_SERVICE_H_
#define BERTH_SCHEDULER_PACKAGE_SERVICE_H_

#include "auth/admission.h"
#include "berth/v1/head.grpc.pb.h"
#include "scheduler/head_state.h"

namespace berth {

// Who may call is decided before any handler runs (auth/admission.h).
class PackageServiceImpl final : public Admitted<v1::PackageService::Service> {
 public:
  // Not owned; it outlives the service.
  explicit PackageServiceImpl(HeadState* state);

  grpc::Status StatPackage(grpc::ServerContext* context, const v1::StatPackageRequest* request,
                           v1::StatPackageResponse* response) override;
  grpc::Status UploadPackage(grpc::ServerContext* context,
                             grpc::ServerReader<v1::UploadPackageRequest>* reader,
                             v1::UploadPackageResponse* response) override;
  grpc::Status DownloadPackage(grpc::ServerContext* context,
                               const v1::DownloadPackageRequest* request,
                               grpc::ServerWriter<v1::DownloadPackageResponse>* writer) override;

 private:
  // Drops the packages no unfinished job names (PackageStore::Collect).
  void Collect();

  HeadState* const state_;
};

}  // namespace berth

#endif  // BERTH_SCHEDULER_PACKAGE_SERVICE_H_
