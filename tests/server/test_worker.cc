// A stand-in for quark-worker in the server's process-level tests: it speaks the real worker protocol over
// gRPC and behaves as told, so the server's fault handling can be exercised without the engine.
//   quark_test_worker --server ADDR --worker-id ID [--mode MODE] [--hang-attempts N]
// MODE (also env QUARK_TEST_WORKER_MODE, and per job the label "test-mode"):
//   succeed            progress "pid=<pid>", then success with one artifact
//   instant            success at once, no progress (the scheduling benchmark)
//   hang               progress, then heartbeats until cancelled (completes as cancelled) or the lease is lost
//   hang-ignore-cancel like hang, but never stops by itself (the server must kill it)
//   crash              progress, then exits with status 3 mid-job
//   fail               completes with an error
//   sleep              progress, then heartbeats for the job label "test-sleep-ms" (default 1000) and succeeds;
//                      a lost lease ends it without Complete, and so does the worker's own count of the lease
//                      timeout when no heartbeat gets through (as quark-worker fences itself: worker/lease_run.h)
// QUARK_TEST_WORKER_RUNS_FILE: every job run appends "start JOB WORKER PID MS" and "end JOB WORKER PID MS OUTCOME"
// lines (one write each, O_APPEND), so a test can see which process ran what when.
// Attempts up to N (flag, env QUARK_TEST_WORKER_HANG_ATTEMPTS, or job label "test-hang-attempts") behave as
// "hang" whatever the mode, so a test can kill the worker on attempt 1 and see attempt 2 succeed.
// Every mode first checks that a file:// model_uri exists and fails the job with a clear error if not.
// QUARK_WORKER_TOKEN (env) is sent as the bearer token; QUARK_TEST_WORKER_CREDENTIALS_DIR: see RecordCredentials.
#include <grpcpp/grpcpp.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "core/base/digest.h"
#include "quark/v1/worker.grpc.pb.h"

namespace {

namespace pb = quark::v1::internal;

struct Options {
  std::string server;
  std::string worker_id;
  std::string mode = "succeed";
  int hang_attempts = 0;
};

std::string Env(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

bool ParseArgs(int argc, char** argv, Options* options) {
  options->mode = Env("QUARK_TEST_WORKER_MODE", options->mode);
  options->hang_attempts = std::atoi(Env("QUARK_TEST_WORKER_HANG_ATTEMPTS", "0").c_str());
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    std::string value = argv[i + 1];
    if (flag == "--server") options->server = value;
    else if (flag == "--worker-id") options->worker_id = value;
    else if (flag == "--mode") options->mode = value;
    else if (flag == "--hang-attempts") options->hang_attempts = std::atoi(value.c_str());
    else return false;
  }
  return !options->server.empty() && !options->worker_id.empty();
}

std::unique_ptr<grpc::ClientContext> Context(int seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  // quarkd hands its local workers a worker token in the environment when authentication is on.
  static const std::string token = Env("QUARK_WORKER_TOKEN", "");
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

class TestWorker {
 public:
  explicit TestWorker(Options options)
      : options_(std::move(options)),
        stub_(pb::WorkerService::NewStub(grpc::CreateChannel(options_.server, grpc::InsecureChannelCredentials()))) {}

  bool Register() {
    for (int i = 0; i < 300; ++i) {
      pb::RegisterRequest request;
      request.set_worker_id(options_.worker_id);
      request.set_hostname("localhost");
      request.set_slots(1);
      request.set_version("test-worker");
      pb::RegisterResponse response;
      if (stub_->Register(Context(5).get(), request, &response).ok()) {
        heartbeat_ms_ = std::max<int64_t>(10, response.heartbeat_interval_ms());
        lease_timeout_ms_ = response.lease_timeout_ms();
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // Runs until the server has been unreachable for a while (it was stopped or killed).
  int Loop() {
    int failures = 0;
    while (failures < 100) {
      pb::LeaseRequest request;
      request.set_worker_id(options_.worker_id);
      request.set_wait_ms(2000);
      pb::LeaseResponse lease;
      grpc::Status status = stub_->Lease(Context(10).get(), request, &lease);
      if (!status.ok()) {
        ++failures;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      failures = 0;
      if (!lease.lease_id().empty()) Run(lease);
    }
    return 0;
  }

 private:
  std::string ModeFor(const pb::LeaseResponse& lease) const {
    const auto& labels = lease.job().spec().labels();
    int hang_attempts = options_.hang_attempts;
    if (auto it = labels.find("test-hang-attempts"); it != labels.end()) hang_attempts = std::atoi(it->second.c_str());
    if (lease.attempt() <= hang_attempts) return "hang";
    auto it = labels.find("test-mode");
    return it != labels.end() ? it->second : options_.mode;
  }

  // Self-fencing as quark-worker does it: quarkd expires a lease lease_timeout after the last renewal it received,
  // so a renewal counts from when it was sent; past the deadline (less a heartbeat of margin) the run stops
  // without Complete. 0 = quarkd announced no timeout.
  int64_t FenceDeadlineMs() const {
    if (lease_timeout_ms_ <= 0) return INT64_MAX;
    return renewed_ms_ + lease_timeout_ms_ - std::min(heartbeat_ms_, lease_timeout_ms_ / 4);
  }
  // A heartbeat (with `fenced`, one that waits no longer than the fence); true when it got through.
  bool Heartbeat(const std::string& lease_id, pb::HeartbeatResponse* response, bool fenced) {
    pb::HeartbeatRequest request;
    request.set_worker_id(options_.worker_id);
    request.set_lease_id(lease_id);
    const int64_t sent = NowMs();
    auto context = Context(5);
    if (fenced && FenceDeadlineMs() != INT64_MAX) {
      const int64_t wait = std::max<int64_t>(1, std::min<int64_t>(5000, FenceDeadlineMs() - sent));
      context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(wait));
    }
    if (!stub_->Heartbeat(context.get(), request, response).ok()) return false;
    renewed_ms_ = std::max(renewed_ms_, sent);
    return true;
  }

  void Progress(const std::string& lease_id, const std::string& phase, double fraction) {
    pb::ReportProgressRequest request;
    request.set_lease_id(lease_id);
    request.mutable_progress()->set_phase(phase);
    request.mutable_progress()->set_fraction(fraction);
    request.mutable_progress()->set_message("pid=" + std::to_string(getpid()) +
                                            " data_dir=" + Env("QUARK_WORKER_DATA_DIR", "-"));
    pb::ReportProgressResponse response;
    const int64_t sent = NowMs();
    if (stub_->ReportProgress(Context(5).get(), request, &response).ok()) renewed_ms_ = std::max(renewed_ms_, sent);
  }

  // True when quarkd took the completion.
  // A success reports one artifact, `artifact_uri` (under the job's output prefix, as quarkd requires). A file://
  // artifact in an output folder that exists is written for real, with a manifest.json beside it, and both are reported with their SHA-256 as
  // quark-worker does, so quarkd's verified dedup (#29) can re-check them.
  bool Complete(const std::string& lease_id, bool success, bool cancelled, const std::string& error,
                const std::string& artifact_uri = "") {
    pb::CompleteRequest request;
    request.set_lease_id(lease_id);
    request.set_success(success);
    request.set_cancelled(cancelled);
    request.set_error(error);
    if (success) {
      quark::v1::Artifact* artifact = request.mutable_result()->add_artifacts();
      artifact->set_uri(artifact_uri);
      artifact->set_size_bytes(1234);
      Publish(request.mutable_result());
      request.mutable_result()->mutable_metrics()->insert({"seconds_total", 0.01});
    }
    pb::CompleteResponse response;
    return stub_->Complete(Context(5).get(), request, &response).ok();
  }

  // Writes the (single) file:// artifact of `result` and a manifest.json beside it; records their digests.
  static void Publish(quark::v1::JobResult* result) {
    quark::v1::Artifact* artifact = result->mutable_artifacts(0);
    if (artifact->uri().rfind("file://", 0) != 0) return;
    const std::filesystem::path path = artifact->uri().substr(7);
    std::error_code error;
    if (!std::filesystem::is_directory(path.parent_path().parent_path(), error)) return;  // the output folder
    std::filesystem::create_directories(path.parent_path(), error);
    const std::string bytes = "test artifact of " + path.parent_path().filename().string() + "\n";
    const std::string manifest = "{\"files\": [{\"path\": \"" + path.filename().string() + "\", \"sha256\": \"" +
                                 quark::Sha256Hex(bytes) + "\"}]}\n";
    std::ofstream(path, std::ios::binary) << bytes;
    std::ofstream(path.parent_path() / "manifest.json", std::ios::binary) << manifest;
    artifact->set_size_bytes(static_cast<int64_t>(bytes.size()));
    artifact->set_sha256(quark::Sha256Hex(bytes));
    result->set_manifest_uri("file://" + (path.parent_path() / "manifest.json").string());
    result->set_manifest_sha256(quark::Sha256Hex(manifest));
  }

  // Heartbeats until cancelled or lost; with ignore_cancel it keeps going until killed.
  void Hang(const std::string& lease_id, bool ignore_cancel) {
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(heartbeat_ms_));
      pb::HeartbeatResponse response;
      if (!Heartbeat(lease_id, &response, /*fenced=*/false)) continue;  // hang modes wait for quarkd's word
      if (response.lease_lost()) return;
      if (response.cancel() && !ignore_cancel) {
        Complete(lease_id, false, true, "");
        return;
      }
    }
  }

  static int64_t NowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  void RecordRun(const std::string& what, const pb::LeaseResponse& lease, const std::string& outcome = "") const {
    static const std::string path = Env("QUARK_TEST_WORKER_RUNS_FILE", "");
    if (path.empty()) return;
    std::string line = what + " " + lease.job().id() + " " + options_.worker_id + " " + std::to_string(getpid()) +
                       " " + std::to_string(NowMs()) + (outcome.empty() ? "" : " " + outcome) + "\n";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    ssize_t written = write(fd, line.data(), line.size());
    (void)written;
    close(fd);
  }

  // Heartbeats for `ms`, then succeeds; returns without Complete when the lease is lost.
  void Sleep(const pb::LeaseResponse& lease, int64_t ms) {
    int64_t end = NowMs() + ms;
    while (NowMs() < end) {
      const int64_t wake = std::min({NowMs() + heartbeat_ms_, end + 1, FenceDeadlineMs()});
      std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(0, wake - NowMs())));
      if (NowMs() >= FenceDeadlineMs()) return RecordRun("end", lease, "fenced");
      pb::HeartbeatResponse response;
      if (!Heartbeat(lease.lease_id(), &response, /*fenced=*/true)) continue;
      if (response.lease_lost()) return RecordRun("end", lease, "lost");
    }
    if (NowMs() >= FenceDeadlineMs()) return RecordRun("end", lease, "fenced");
    Progress(lease.lease_id(), "upload", 0.9);
    RecordRun("end", lease, Complete(lease.lease_id(), true, false, "", ArtifactUri(lease)) ? "succeeded" : "refused");
  }

  void Run(const pb::LeaseResponse& lease) {
    renewed_ms_ = NowMs();  // the lease began when quarkd granted it, a little before it arrived: the margin covers it
    const std::string& id = lease.lease_id();
    const std::string& model = lease.job().spec().model_uri();
    if (model.rfind("file://", 0) == 0 && !std::filesystem::exists(model.substr(7))) {
      Complete(id, false, false, "model_uri: \"" + model + "\" does not exist (no such directory)");
      return;
    }
    RecordCredentials(lease);
    std::string mode = ModeFor(lease);
    if (mode == "instant") {
      Complete(id, true, false, "", ArtifactUri(lease));
      return;
    }
    Progress(id, "quantize", 0.5);
    if (mode == "hang" || mode == "hang-ignore-cancel") return Hang(id, mode == "hang-ignore-cancel");
    if (mode == "crash") _exit(3);
    if (mode == "fail") {
      Complete(id, false, false, "test worker: failing as asked");
      return;
    }
    if (mode == "sleep") {
      RecordRun("start", lease);
      auto it = lease.job().spec().labels().find("test-sleep-ms");
      return Sleep(lease, it != lease.job().spec().labels().end() ? std::atoll(it->second.c_str()) : 1000);
    }
    Progress(id, "upload", 0.9);
    Complete(id, true, false, "", ArtifactUri(lease));
  }

  // Where the engine would have put the model: <spec.output_uri>/<job id>/model.safetensors.
  static std::string ArtifactUri(const pb::LeaseResponse& lease) {
    std::string output = lease.job().spec().output_uri();
    while (!output.empty() && output.back() == '/') output.pop_back();
    return output + "/" + lease.job().id() + "/model.safetensors";
  }

  // With QUARK_TEST_WORKER_CREDENTIALS_DIR set, the access key id a lease carried lands in <dir>/<job id>
  // ("-" for none), so tests can see which worker got which tenant's storage credentials.
  void RecordCredentials(const pb::LeaseResponse& lease) const {
    std::string dir = Env("QUARK_TEST_WORKER_CREDENTIALS_DIR", "");
    if (dir.empty()) return;
    std::ofstream out(dir + "/" + lease.job().id());
    out << (lease.has_storage_credentials() ? lease.storage_credentials().access_key_id() : "-") << "\n";
  }

  Options options_;
  std::unique_ptr<pb::WorkerService::Stub> stub_;
  int64_t heartbeat_ms_ = 1000;
  int64_t lease_timeout_ms_ = 0;
  int64_t renewed_ms_ = 0;  // when the last heartbeat or progress that got through was sent
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, &options)) {
    std::cerr << "usage: quark_test_worker --server ADDR --worker-id ID [--mode MODE] [--hang-attempts N]\n";
    return 2;
  }
  TestWorker worker(options);
  if (!worker.Register()) return 1;
  return worker.Loop();
}
