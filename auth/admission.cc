#include "auth/admission.h"

#include "absl/strings/str_cat.h"
#include "auth/cluster_token.h"
#include "google/protobuf/message_lite.h"

namespace berth {
namespace {

using grpc::internal::MethodHandler;
using grpc::internal::RpcServiceMethod;

// The method's handler behind the policy. It owns the method gRPC generated
// (and with it the original handler).
class AdmittingHandler final : public MethodHandler {
 public:
  AdmittingHandler(std::unique_ptr<RpcServiceMethod> method,
                   std::shared_ptr<const AdmissionPolicy> policy)
      : method_(std::move(method)), policy_(std::move(policy)) {
    absl::string_view name = method_->name();
    short_name_ = std::string(name.substr(name.rfind('/') + 1));
  }

  void RunHandler(const HandlerParameter& param) override {
    MethodHandler* handler = method_->handler();
    if (!param.status.ok() || param.server_context == nullptr) return handler->RunHandler(param);
    grpc::Status verdict = policy_->Admit(*param.server_context, short_name_);
    if (verdict.ok()) return handler->RunHandler(param);
    // gRPC's handlers destroy the request only when they run the method.
    if (param.request != nullptr)
      static_cast<google::protobuf::MessageLite*>(param.request)->~MessageLite();
    handler->RunHandler(HandlerParameter(param.call, param.server_context, param.request, verdict,
                                         param.internal_data, param.call_requester));
  }

  void* Deserialize(grpc_call* call, grpc_byte_buffer* request, grpc::Status* status,
                    void** handler_data) override {
    return method_->handler()->Deserialize(call, request, status, handler_data);
  }

 private:
  const std::unique_ptr<RpcServiceMethod> method_;
  const std::shared_ptr<const AdmissionPolicy> policy_;
  std::string short_name_;
};

// grpc::Service keeps its methods private. An explicit instantiation is the
// one place the language does not check access, so this names the member
// there (a friend returns it); everything else goes through gRPC's own
// method and handler types.
using ServiceMethods = std::vector<std::unique_ptr<RpcServiceMethod>>;
struct MethodsOfService {
  using Member = ServiceMethods grpc::Service::*;
  friend Member MethodsMember(MethodsOfService);
};
template <typename Tag, typename Tag::Member kMember>
struct NameMember {
  friend typename Tag::Member MethodsMember(Tag) { return kMember; }
};
template struct NameMember<MethodsOfService, &grpc::Service::methods_>;

}  // namespace

grpc::Status AdmissionPolicy::Admit(const grpc::ServerContextBase& context,
                                    absl::string_view method) const {
  if (gate) {
    if (grpc::Status closed = gate(context); !closed.ok()) return closed;
  }
  if (grpc::Status denied = CheckClusterToken(&context, cluster_token); !denied.ok()) {
    std::optional<std::string> team = teams == nullptr ? std::nullopt : teams->TeamOf(&context);
    if (!team) return denied;
    if (!team_methods.contains(method)) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          absl::StrCat(method, ": team '", *team,
                                       "' credentials may not call it (the cluster admin's may)"));
    }
  }
  std::optional<TlsRole> role = role_of_every_method;
  if (auto it = role_of_method.find(method); it != role_of_method.end()) role = it->second;
  if (!role.has_value()) return grpc::Status::OK;
  return CheckPeerRole(&context, tls, *role, method);
}

void AdmitEveryMethod(grpc::Service* service, AdmissionPolicy policy) {
  auto shared = std::make_shared<const AdmissionPolicy>(std::move(policy));
  for (std::unique_ptr<RpcServiceMethod>& method : service->*MethodsMember(MethodsOfService{})) {
    if (method == nullptr) continue;  // marked generic: not served by this service
    const char* name = method->name();
    const grpc::internal::RpcMethod::RpcType type = method->method_type();
    method = std::make_unique<RpcServiceMethod>(name, type,
                                                new AdmittingHandler(std::move(method), shared));
  }
}

}  // namespace berth
