#include "auth/head_epoch.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace berth {
namespace {

constexpr char kHeadEpochMetadata[] = "x-berth-head-epoch";

}  // namespace

void AttachHeadEpoch(grpc::ClientContext* context, uint64_t epoch) {
  if (epoch != 0) context->AddMetadata(kHeadEpochMetadata, absl::StrCat(epoch));
}

void HeadEpochFence::Saw(uint64_t epoch) {
  uint64_t newest = newest_.load();
  while (epoch > newest && !newest_.compare_exchange_weak(newest, epoch)) {
  }
}

grpc::Status HeadEpochFence::Admit(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kHeadEpochMetadata);
  if (it == metadata.end()) return grpc::Status::OK;
  uint64_t epoch = 0;
  if (!absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &epoch)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat(kHeadEpochMetadata, ": not a number"));
  }
  Saw(epoch);
  const uint64_t newest = newest_.load();
  if (epoch < newest) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("this call came from a head of epoch ", epoch,
                                     "; a newer head (epoch ", newest,
                                     ") has taken over and this node follows it"));
  }
  return grpc::Status::OK;
}

}  // namespace berth
