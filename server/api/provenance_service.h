// quark.v1.ProvenanceService: serves the public half of quarkd's --signing-key (the key its workers sign
// manifest.json with), to any authenticated caller.
#pragma once

#include <optional>

#include "core/base/ed25519.h"
#include "quark/v1/provenance.grpc.pb.h"
#include "server/api/access_control.h"

namespace quark::server {

class ProvenanceServiceImpl final : public quark::v1::ProvenanceService::CallbackService {
 public:
  /// `key`: std::nullopt when quarkd signs nothing (GetSigningKey answers NOT_FOUND). `access` outlives the server.
  ProvenanceServiceImpl(std::optional<Ed25519PublicKey> key, const AccessControl* access)
      : key_(std::move(key)), access_(access) {}

  grpc::ServerUnaryReactor* GetSigningKey(grpc::CallbackServerContext* context,
                                          const quark::v1::GetSigningKeyRequest* request,
                                          quark::v1::SigningKey* response) override;

 private:
  const std::optional<Ed25519PublicKey> key_;
  const AccessControl* const access_;
};

}  // namespace quark::server
