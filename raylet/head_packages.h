// DownloadFromHead: PackageCache's download over the head's PackageService
// (head.proto), on the raylet's channel to the head, with the cluster
// token; the call ends at the given deadline.
#ifndef BERTH_RAYLET_HEAD_PACKAGES_H_
#define BERTH_RAYLET_HEAD_PACKAGES_H_

#include <memory>
#include <string>

#include "grpcpp/channel.h"
#include "raylet/package_cache.h"

namespace berth {

PackageCache::Download DownloadFromHead(std::shared_ptr<grpc::Channel> channel,
                                        std::string cluster_token);

}  // namespace berth

#endif  // BERTH_RAYLET_HEAD_PACKAGES_H_
