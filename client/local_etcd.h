// LocalEtcd: the etcd cluster that `berth up --state-store etcd` runs on
// this machine: three members on loopback ports, data under one folder,
// for heads that keep their state in etcd as heads on several machines
// would (the rehearsal of that setup; docs/operations.md).
//
// Promises: PlanLocalEtcd picks ports that were free when it ran (bound and
// released: another process may take one before etcd does, then etcd
// exits and WaitForEtcd says so); nothing is started here, the caller
// spawns and records the members.
#ifndef BERTH_CLIENT_LOCAL_ETCD_H_
#define BERTH_CLIENT_LOCAL_ETCD_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth {

struct EtcdMember {
  std::string name;                // etcd-1, ...
  std::string client_address;      // 127.0.0.1:PORT
  std::vector<std::string> flags;  // etcd's command line, without the binary
};

// `host`: the address every member listens on (the client and peer ports).
absl::StatusOr<std::vector<EtcdMember>> PlanLocalEtcd(const std::string& data_dir, int members,
                                                      const std::string& host = "127.0.0.1");

// The --state-store of heads that use these members.
std::string EtcdStoreUrl(const std::vector<EtcdMember>& members);

// Waits until every member reports itself healthy (a leader is elected);
// `exited(i)` says whether member i's process has ended (then its log
// tells why).
absl::Status WaitForEtcd(const std::vector<EtcdMember>& members,
                         const std::function<absl::Status(size_t)>& exited, absl::Duration timeout);

}  // namespace berth

#endif  // BERTH_CLIENT_LOCAL_ETCD_H_
