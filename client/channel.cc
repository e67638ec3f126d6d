#include "client/channel.h"

#include <grpcpp/support/client_interceptor.h>

#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace quark::client {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Adds "authorization: Bearer TOKEN" to every call. (gRPC's own call credentials refuse plaintext channels, and a
// token over loopback plaintext is what the demo setup uses.)
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : header_("Bearer " + std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&header_);  // gRPC deletes it when the call ends
  }

 private:
  const std::string header_;
};

absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read \"", path, "\""));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(const ChannelFlags& flags) {
  if (flags.tls_ca.empty() && flags.tls_cert.empty() && flags.tls_key.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: give both or neither");
  }
  grpc::SslCredentialsOptions ssl;
  const std::pair<const char*, std::pair<const std::string*, std::string*>> files[] = {
      {"--tls-ca", {&flags.tls_ca, &ssl.pem_root_certs}},
      {"--tls-cert", {&flags.tls_cert, &ssl.pem_cert_chain}},
      {"--tls-key", {&flags.tls_key, &ssl.pem_private_key}}};
  for (const auto& [flag, file] : files) {
    if (file.first->empty()) continue;
    absl::StatusOr<std::string> pem = ReadPem(flag, *file.first);
    if (!pem.ok()) return pem.status();
    *file.second = std::move(*pem);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelFlags& flags) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = Credentials(flags);
  if (!credentials.ok()) return credentials.status();
  if (flags.token.empty()) return grpc::CreateChannel(flags.server, *credentials);
  // The channel owns the factory; calls (and their interceptors) end before the channel does.
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(flags.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(flags.server, *credentials, grpc::ChannelArguments(),
                                                                 std::move(interceptors));
}

}  // namespace quark::client
