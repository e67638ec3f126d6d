#include "server/api/provenance_service.h"

#include "server/api/status_util.h"

namespace quark::server {

grpc::ServerUnaryReactor* ProvenanceServiceImpl::GetSigningKey(grpc::CallbackServerContext* context,
                                                               const quark::v1::GetSigningKeyRequest* /*request*/,
                                                               quark::v1::SigningKey* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kViewer, "GetSigningKey");
  if (!principal.ok()) {
    reactor->Finish(ToGrpcStatus(principal.status()));
  } else if (!key_.has_value()) {
    reactor->Finish(ToGrpcStatus(absl::NotFoundError(
        "signing key: quarkd was started without --signing-key; its manifests are not signed")));
  } else {
    response->set_key_id(key_->key_id());
    response->set_algorithm("ed25519");
    response->set_public_key(key_->base64());
    response->set_public_key_pem(key_->pem());
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

}  // namespace quark::server
