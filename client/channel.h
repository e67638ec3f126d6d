// quarkctl's connection to quarkd: plaintext or TLS (optionally with a client certificate), and a bearer token
// added to every call by a client interceptor.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace quark::client {

struct ChannelFlags {
  std::string server;    // HOST:PORT
  std::string token;     // --token / $QUARK_TOKEN; "" = none
  std::string tls_ca;    // PEM CAs of quarkd's certificate; any tls_* set = TLS
  std::string tls_cert;  // client certificate for mutual TLS (with tls_key)
  std::string tls_key;
};

/// INVALID_ARGUMENT naming the flag when a PEM file cannot be read or only one of --tls-cert/--tls-key is set.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelFlags& flags);

}  // namespace quark::client
