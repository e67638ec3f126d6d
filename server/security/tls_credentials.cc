#include "server/security/tls_credentials.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpcpp/security/server_credentials.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/log.h"

namespace quark::server {
namespace {

// gRPC's C++ API has no public way to build SSL credentials with a config fetcher, so the C core credentials are
// wrapped here: the server binds its port through AddPortToServer with them.
class CoreServerCredentials final : public grpc::ServerCredentials {
 public:
  explicit CoreServerCredentials(grpc_server_credentials* credentials) : credentials_(credentials) {}
  ~CoreServerCredentials() override { grpc_server_credentials_release(credentials_); }
  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {}

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), credentials_);
  }
  grpc_server_credentials* const credentials_;
};

grpc_ssl_certificate_config_reload_status Fetch(void* user_data, grpc_ssl_server_certificate_config** config) {
  void* out = nullptr;
  int changed = static_cast<ReloadableTlsCredentials*>(user_data)->FetchForGrpc(&out);
  *config = static_cast<grpc_ssl_server_certificate_config*>(out);
  return changed ? GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW : GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
}

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read \"", path, "\""));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
}

X509Ptr FirstCertificate(const std::string& pem) {
  BioPtr bio = MemoryBio(pem);
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, &X509_free);
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || absl::StartsWith(host, "unix:")) return true;
  // 127.0.0.0/8 as an address literal only: a host name such as "127.0.0.1.example.com" resolves anywhere.
  in_addr address{};
  return inet_pton(AF_INET, host.c_str(), &address) == 1 && (ntohl(address.s_addr) >> 24) == 127;
}

absl::StatusOr<std::unique_ptr<ReloadableTlsCredentials>> ReloadableTlsCredentials::Load(const TlsFiles& files) {
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError("tls-cert and tls-key: both required for TLS");
  }
  std::unique_ptr<ReloadableTlsCredentials> tls(new ReloadableTlsCredentials(files));
  absl::Status status = tls->Reload();
  if (!status.ok()) return status;
  return tls;
}

ReloadableTlsCredentials::~ReloadableTlsCredentials() = default;

absl::StatusOr<ReloadableTlsCredentials::Pem> ReloadableTlsCredentials::ReadAndCheck() const {
  Pem pem;
  absl::StatusOr<std::string> cert = ReadPem("tls-cert", files_.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("tls-key", files_.key_file);
  if (!key.ok()) return key.status();
  X509Ptr leaf = FirstCertificate(*cert);
  if (!leaf) return absl::InvalidArgumentError(absl::StrCat("tls-cert: \"", files_.cert_file, "\" holds no PEM certificate"));
  BioPtr key_bio = MemoryBio(*key);
  KeyPtr private_key(key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr) : nullptr,
                     &EVP_PKEY_free);
  if (!private_key) {
    return absl::InvalidArgumentError(absl::StrCat("tls-key: \"", files_.key_file, "\" holds no PEM private key"));
  }
  if (X509_check_private_key(leaf.get(), private_key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("tls-key: \"", files_.key_file, "\" does not match the certificate in \"",
                                                   files_.cert_file, "\""));
  }
  pem.cert_chain = std::move(*cert);
  pem.private_key = std::move(*key);
  if (!files_.client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("tls-client-ca", files_.client_ca_file);
    if (!ca.ok()) return ca.status();
    if (!FirstCertificate(*ca)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tls-client-ca: \"", files_.client_ca_file, "\" holds no PEM certificate"));
    }
    pem.client_ca = std::move(*ca);
  }
  return pem;
}

absl::Status ReloadableTlsCredentials::Reload() {
  absl::StatusOr<Pem> pem = ReadAndCheck();
  if (!pem.ok()) return pem.status();
  int generation;
  {
    absl::MutexLock lock(&mu_);
    current_ = std::move(*pem);
    changed_ = true;
    generation = ++generation_;
  }
  log::Get("tls")->info("job=- certificate {} loaded (generation {}){}", files_.cert_file, generation,
                        files_.client_ca_file.empty() ? "" : "; client certificates required");
  return absl::OkStatus();
}

int ReloadableTlsCredentials::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

int ReloadableTlsCredentials::FetchForGrpc(void** config) {
  absl::MutexLock lock(&mu_);
  if (!changed_) return 0;
  grpc_ssl_pem_key_cert_pair pair{current_.private_key.c_str(), current_.cert_chain.c_str()};
  // gRPC 1.51 asserts that a fetched config has root certificates even when no client certificate is requested;
  // then they are never used, and the server's own chain stands in. The config copies the strings.
  const std::string& roots = current_.client_ca.empty() ? current_.cert_chain : current_.client_ca;
  *config = grpc_ssl_server_certificate_config_create(roots.c_str(), &pair, 1);
  changed_ = false;
  return 1;
}

std::shared_ptr<grpc::ServerCredentials> ReloadableTlsCredentials::Credentials() {
  bool mutual;
  {
    absl::MutexLock lock(&mu_);
    mutual = !current_.client_ca.empty();
  }
  grpc_ssl_server_credentials_options* options = grpc_ssl_server_credentials_create_options_using_config_fetcher(
      mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
      &Fetch, this);
  // Takes ownership of the options.
  return std::make_shared<CoreServerCredentials>(grpc_ssl_server_credentials_create_with_options(options));
}

}  // namespace quark::server
