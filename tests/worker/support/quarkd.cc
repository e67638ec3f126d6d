#include "tests/worker/support/quarkd.h"

#include <thread>

#include <nlohmann/json.hpp>

#include "worker/storage/strings.h"

namespace quark::testing {
namespace fs = std::filesystem;

std::string BuiltBinary(const std::string& relative) {
  return (fs::path(EnvOr("QUARK_BINARY_DIR", QUARK_TEST_BINARY_DIR)) / relative).string();
}

absl::StatusOr<std::unique_ptr<Quarkd>> Quarkd::Start(const QuarkdOptions& options) {
  auto server = std::unique_ptr<Quarkd>(new Quarkd());
  fs::path data = server->dir_.path() / "quarkd";
  fs::path ready = server->dir_.path() / "ready.json";
  std::vector<std::string> roots_list = {server->dir_.path().string()};
  roots_list.insert(roots_list.end(), options.extra_roots.begin(), options.extra_roots.end());
  std::string roots = str::Join(roots_list, ",");
  std::vector<std::string> argv = {BuiltBinary("server/quarkd"),
                                   "--data-dir", data.string(),
                                   "--listen", "127.0.0.1:0",
                                   "--metrics-listen", "",
                                   "--workers", str::Cat(options.workers),
                                   "--worker-binary", BuiltBinary(options.worker_binary),
                                   "--worker-arg=--lease-wait-ms=1000",
                                   "--worker-arg=--data-dir=" + (server->dir_.path() / "worker").string(),
                                   "--worker-arg=--allowed-roots=" + roots,
                                   "--allowed-roots", roots,
                                   "--heartbeat-interval-ms", "200",
                                   "--ready-file", ready.string()};
  if (!options.test_mode.empty()) argv.push_back("--worker-arg=--test-mode=" + options.test_mode);
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  absl::StatusOr<std::unique_ptr<Subprocess>> process =
      Subprocess::Start(argv, options.env, server->dir_.path() / "quarkd.log");
  if (!process.ok()) return process.status();
  server->process_ = std::move(*process);
  for (int i = 0; i < 1500 && !fs::exists(ready); ++i) {  // up to 30 s
    absl::StatusOr<int> exited = server->process_->Wait(std::chrono::milliseconds(20));
    if (exited.ok()) {
      return absl::UnavailableError(str::Cat("quarkd exited with ", *exited, ":\n", server->process_->Log()));
    }
  }
  if (!fs::exists(ready)) return absl::DeadlineExceededError("quarkd wrote no ready file:\n" + server->Log());
  nlohmann::json doc = nlohmann::json::parse(ReadFile(ready), nullptr, false);
  if (!doc.is_object() || !doc.contains("grpc_port")) return absl::InternalError("bad ready file: " + ReadFile(ready));
  server->address_ = str::Cat("127.0.0.1:", doc["grpc_port"].get<int>());
  return server;
}

}  // namespace quark::testing
