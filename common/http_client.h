// HttpCall: one HTTP request through libcurl, for the daemons that talk to
// an HTTP API (the autoscaler to Kubernetes, the head to etcd's v3 JSON
// gateway). Synchronous; every call has a deadline.
//
// Promises: returns the status code and body of any answer the server gave
// (a 4xx or 5xx is a response, not an error: the caller knows what the API
// means by it); UNAVAILABLE naming the URL when no answer came (refused,
// reset, the deadline passed). Thread-safe.
#ifndef BERTH_COMMON_HTTP_CLIENT_H_
#define BERTH_COMMON_HTTP_CLIENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  absl::Duration timeout = absl::Seconds(5);
  std::string ca_file;  // verify https against this CA (empty: the system's)
};

struct HttpResponse {
  long status = 0;
  std::string body;
};

absl::StatusOr<HttpResponse> HttpCall(const HttpRequest& request);

}  // namespace berth

#endif  // BERTH_COMMON_HTTP_CLIENT_H_
