// What the security tests share: certificates made by the openssl command at run time, tokens files, and gRPC
// channels (plaintext or TLS, with or without a client certificate, with or without a bearer token).
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "quark/v1/service.grpc.pb.h"
#include "quark/v1/worker.grpc.pb.h"
#include "server/security/security_config.h"
#include "tests/server/test_util.h"

namespace quark::server::testing {

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path + ".tmp", std::ios::binary);
  out << text;
  out.close();
  std::rename((path + ".tmp").c_str(), path.c_str());  // readers see the old file or the new one, never half
}

/// Runs a shell command quietly; true on exit status 0.
inline bool Shell(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

/// A CA in `dir`/NAME.pem (+ .key) and certificates it signs: ECDSA P-256, made with the openssl command.
class TestCa {
 public:
  TestCa(std::string dir, std::string name) : dir_(std::move(dir)), name_(std::move(name)) {
    ok_ = Shell("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=" + name_ +
                " -keyout " + Path(name_ + ".key") + " -out " + Path(name_ + ".pem"));
  }
  bool ok() const { return ok_; }
  std::string pem() const { return Path(name_ + ".pem"); }

  /// Issues `leaf`.pem/.key for common name `cn` with subjectAltName `san` ("IP:127.0.0.1,DNS:localhost").
  bool Issue(const std::string& leaf, const std::string& cn, const std::string& san) const {
    WriteText(Path(leaf + ".ext"), "subjectAltName=" + san + "\n");
    return Shell("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" + cn + " -keyout " +
                 Path(leaf + ".key") + " -out " + Path(leaf + ".csr")) &&
           Shell("openssl x509 -req -days 2 -in " + Path(leaf + ".csr") + " -CA " + pem() + " -CAkey " +
                 Path(name_ + ".key") + " -CAcreateserial -extfile " + Path(leaf + ".ext") + " -out " +
                 Path(leaf + ".pem"));
  }
  std::string Path(const std::string& file) const { return dir_ + "/" + file; }

 private:
  std::string dir_;
  std::string name_;
  bool ok_ = false;
};

struct ChannelSpec {
  std::string ca_file;    // "" = plaintext
  std::string cert_file;  // client certificate (mutual TLS)
  std::string key_file;
};

inline std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const ChannelSpec& spec = {}) {
  if (spec.ca_file.empty()) return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadText(spec.ca_file);
  if (!spec.cert_file.empty()) {
    ssl.pem_cert_chain = ReadText(spec.cert_file);
    ssl.pem_private_key = ReadText(spec.key_file);
  }
  // A fresh subchannel per test channel: each one does its own handshake (the certificate reload is visible).
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
}

/// A context with a 5 s deadline and, when `token` is set, "authorization: Bearer <token>".
inline std::unique_ptr<grpc::ClientContext> Call(const std::string& token = "") {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  return context;
}

/// One token entry of a tokens file: {"name", "sha256", "tenant", "role"}.
inline std::string TokenEntry(const std::string& name, const std::string& token, const std::string& tenant,
                              const std::string& role) {
  return "{\"name\": \"" + name + "\", \"sha256\": \"" + Sha256Hex(token) + "\", " +
         (tenant.empty() ? std::string() : "\"tenant\": \"" + tenant + "\", ") + "\"role\": \"" + role + "\"}";
}

}  // namespace quark::server::testing
