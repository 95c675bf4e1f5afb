#include "common/http_client.h"

#include <curl/curl.h>
#include <unistd.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace berth {
namespace {

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

}  // namespace

absl::StatusOr<HttpResponse> HttpCall(const HttpRequest& request) {
  // Once per process, before any thread uses libcurl.
  static const bool ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!ready) return absl::InternalError("libcurl failed to initialise");
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return absl::InternalError("curl_easy_init failed");
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers,
                                                                          curl_slist_free_all);
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  if (!request.body.empty() || request.method != "GET") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(request.body.size()));
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(request.timeout)));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  if (!request.ca_file.empty() && access(request.ca_file.c_str(), R_OK) == 0) {
    curl_easy_setopt(c, CURLOPT_CAINFO, request.ca_file.c_str());
  }
  HttpResponse response;
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response.body);
  const CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) {
    return absl::UnavailableError(
        absl::StrCat(request.method, " ", request.url, ": ", curl_easy_strerror(code)));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

}  // namespace berth
