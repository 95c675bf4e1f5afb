#include "client/local_etcd.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/http_client.h"
#include "nlohmann/json.hpp"

namespace berth {
namespace {

// A port of `host` nothing listens on now (the kernel's pick for port 0).
absl::StatusOr<int> FreePort(const std::string& host) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", host));
  }
  socklen_t length = sizeof(address);
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                     getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int error = errno;
  close(fd);
  if (!bound) return absl::UnavailableError(absl::StrCat("bind: ", std::strerror(error)));
  return ntohs(address.sin_port);
}

}  // namespace

absl::StatusOr<std::vector<EtcdMember>> PlanLocalEtcd(const std::string& data_dir, int members,
                                                      const std::string& host) {
  std::vector<EtcdMember> plan;
  std::vector<std::string> peers;
  std::vector<std::string> initial_cluster;
  for (int i = 1; i <= members; ++i) {
    absl::StatusOr<int> client = FreePort(host);
    absl::StatusOr<int> peer = FreePort(host);
    if (!client.ok()) return client.status();
    if (!peer.ok()) return peer.status();
    EtcdMember member;
    member.name = absl::StrCat("etcd-", i);
    member.client_address = absl::StrCat(host, ":", *client);
    peers.push_back(absl::StrCat("http://", host, ":", *peer));
    initial_cluster.push_back(absl::StrCat(member.name, "=", peers.back()));
    plan.push_back(std::move(member));
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    const std::string client_url = "http://" + plan[i].client_address;
    plan[i].flags = {"--name",
                     plan[i].name,
                     "--data-dir",
                     absl::StrCat(data_dir, "/", plan[i].name),
                     "--listen-client-urls",
                     client_url,
                     "--advertise-client-urls",
                     client_url,
                     "--listen-peer-urls",
                     peers[i],
                     "--initial-advertise-peer-urls",
                     peers[i],
                     "--initial-cluster",
                     absl::StrJoin(initial_cluster, ","),
                     "--initial-cluster-state",
                     "new",
                     "--initial-cluster-token",
                     "berth-local"};
  }
  return plan;
}

std::string EtcdStoreUrl(const std::vector<EtcdMember>& members) {
  std::vector<std::string> addresses;
  for (const EtcdMember& m : members) addresses.push_back(m.client_address);
  return absl::StrCat("etcd://", absl::StrJoin(addresses, ","));
}

absl::Status WaitForEtcd(const std::vector<EtcdMember>& members,
                         const std::function<absl::Status(size_t)>& exited,
                         absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (size_t i = 0; i < members.size();) {
    if (absl::Status gone = exited(i); !gone.ok()) return gone;
    HttpRequest request;
    request.url = absl::StrCat("http://", members[i].client_address, "/health");
    request.timeout = absl::Seconds(1);
    absl::StatusOr<HttpResponse> response = HttpCall(request);
    if (response.ok() && response->status == 200) {
      const nlohmann::json health = nlohmann::json::parse(response->body, nullptr, false);
      if (health.is_object() && health.value("health", "") == "true") {
        ++i;
        continue;
      }
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(members[i].name, " is not healthy after ", absl::FormatDuration(timeout),
                       response.ok() ? absl::StrCat(": ", response->body)
                                     : absl::StrCat(": ", response.status().message())));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::OkStatus();
}

}  // namespace berth
