// TLS for the gRPC port, reloadable without a restart: gRPC's SSL server credentials with a certificate config
// fetcher. Reload() (SIGHUP) re-reads and checks the files; the next TLS handshake picks the new pair up while
// established connections keep theirs. A bad file is refused and the previous certificate kept.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace grpc {
class ServerCredentials;
}

namespace quark::server {

struct TlsFiles {
  std::string cert_file;       // PEM certificate chain of the server (leaf first)
  std::string key_file;        // PEM private key of that leaf
  std::string client_ca_file;  // PEM CAs of client certificates; non-empty = mutual TLS, a client cert required
};

/// Thread-safe. Must outlive every gRPC server built with its Credentials().
class ReloadableTlsCredentials {
 public:
  /// Reads and checks the files (the key must match the certificate). INVALID_ARGUMENT naming the flag and file.
  static absl::StatusOr<std::unique_ptr<ReloadableTlsCredentials>> Load(const TlsFiles& files);
  ~ReloadableTlsCredentials();

  /// Re-reads the files; on success new handshakes use them. On error the old ones stay and the error returns.
  absl::Status Reload();
  /// Server credentials whose handshakes take the newest loaded files.
  std::shared_ptr<grpc::ServerCredentials> Credentials();
  /// Successful loads so far (1 after Load).
  int generation() const;

  /// Called by gRPC at each handshake (C callback; public for the trampoline only).
  int FetchForGrpc(void** config);

 private:
  struct Pem {
    std::string cert_chain;
    std::string private_key;
    std::string client_ca;
  };
  explicit ReloadableTlsCredentials(TlsFiles files) : files_(std::move(files)) {}
  absl::StatusOr<Pem> ReadAndCheck() const;

  const TlsFiles files_;
  mutable absl::Mutex mu_;
  Pem current_ ABSL_GUARDED_BY(mu_);
  bool changed_ ABSL_GUARDED_BY(mu_) = true;  // the first fetch must hand out the initial config
  int generation_ ABSL_GUARDED_BY(mu_) = 0;
};

/// True for listen hosts only this machine can reach: 127.0.0.0/8 address literals, ::1, localhost, unix: sockets
/// (a host name that merely starts with "127." is not one).
bool IsLoopbackHost(const std::string& host);

}  // namespace quark::server
