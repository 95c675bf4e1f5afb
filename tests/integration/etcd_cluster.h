// EtcdCluster: a real 3-member etcd (Debian's etcd-server, BERTH_ETCD) for
// integration tests of heads on etcd: started on free ports, members killed
// and started again on their data, the leader found; every member killed
// with the cluster.
#ifndef BERTH_TESTS_INTEGRATION_ETCD_CLUSTER_H_
#define BERTH_TESTS_INTEGRATION_ETCD_CLUSTER_H_

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/local_etcd.h"
#include "scheduler/etcd_client.h"
#include "tests/integration/local_cluster.h"

namespace berth::testing {

// Three etcd members on `host` (loopback by default), killed with the
// test.
class EtcdCluster {
 public:
  explicit EtcdCluster(const std::string& dir, const std::string& host = "127.0.0.1") : dir_(dir) {
    absl::StatusOr<std::vector<EtcdMember>> plan = PlanLocalEtcd(dir + "/etcd", 3, host);
    if (!plan.ok()) throw std::runtime_error(std::string(plan.status().message()));
    members_ = *std::move(plan);
    processes_.resize(members_.size());
    for (size_t i = 0; i < members_.size(); ++i) Start(i);
    absl::Status healthy = WaitForEtcd(
        members_, [](size_t) { return absl::OkStatus(); }, absl::Seconds(30));
    if (!healthy.ok()) throw std::runtime_error(std::string(healthy.message()));
  }

  std::string url() const { return EtcdStoreUrl(members_); }
  size_t size() const { return members_.size(); }
  void Kill(size_t i) { processes_[i].reset(); }  // SIGKILL, reaped
  // Starts a killed member again on its data: it rejoins the cluster.
  void Start(size_t i) {
    std::vector<std::string> argv = {BERTH_ETCD};
    argv.insert(argv.end(), members_[i].flags.begin(), members_[i].flags.end());
    processes_[i] =
        std::make_unique<ChildProcess>(argv, absl::StrCat(dir_, "/", members_[i].name, ".log"));
  }
  // The member that leads now, as a live member sees it; -1 when none.
  int Leader() const {
    for (size_t i = 0; i < members_.size(); ++i) {
      if (!processes_[i]) continue;
      EtcdClient client({members_[i].client_address}, absl::Seconds(2));
      absl::StatusOr<nlohmann::json> status =
          client.Call("maintenance/status", nlohmann::json::object());
      if (!status.ok()) continue;
      const int64_t leader = EtcdClient::IntField(*status, "leader");
      for (size_t j = 0; j < members_.size(); ++j) {
        if (!processes_[j]) continue;
        EtcdClient other({members_[j].client_address}, absl::Seconds(2));
        absl::StatusOr<nlohmann::json> own =
            other.Call("maintenance/status", nlohmann::json::object());
        if (own.ok() && EtcdClient::IntField((*own)["header"], "member_id") == leader) {
          return static_cast<int>(j);
        }
      }
    }
    return -1;
  }

 private:
  std::string dir_;
  std::vector<EtcdMember> members_;
  std::vector<std::unique_ptr<ChildProcess>> processes_;
};

}  // namespace berth::testing

#endif  // BERTH_TESTS_INTEGRATION_ETCD_CLUSTER_H_
