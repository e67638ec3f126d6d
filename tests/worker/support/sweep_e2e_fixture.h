// The fixture of the #36 sweep tests through the whole house (sweep_e2e_test.cc, sweep_split_e2e_test.cc): a real
// quarkd over loopback gRPC with pool quark-workers, remote quark-workers started here, and the requests and waits the
// tests share.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/digest.h"
#include "quark/v1/service.grpc.pb.h"
#include "tests/storage/support/subprocess.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"

namespace quark::worker::sweep_e2e {

namespace fs = std::filesystem;
using quark::testing::Subprocess;

inline std::string Fixtures() {
  return quark::testing::EnvOr("QUARK_SHARED_DIR", QUARK_TEST_SOURCE_DIR "/../shared") + "/fixtures";
}

class SweepE2eTest : public ::testing::Test {
 protected:
  void Start(int local_workers, const std::string& test_mode, const std::string& worker_binary,
             const std::vector<std::string>& extra_args = {}) {
    quark::testing::QuarkdOptions options;
    options.extra_args = extra_args;
    options.workers = local_workers;
    options.test_mode = test_mode;
    options.worker_binary = worker_binary;
    options.extra_roots = {Fixtures()};
    options.env = {"QUARK_THREADS=1", "OMP_NUM_THREADS=1"};
    auto quarkd = quark::testing::Quarkd::Start(options);
    ASSERT_TRUE(quarkd.ok()) << quarkd.status();
    quarkd_ = *std::move(quarkd);
    stub_ = quark::v1::QuantizationService::NewStub(
        grpc::CreateChannel(quarkd_->address(), grpc::InsecureChannelCredentials()));
  }

  // A quark-worker of its own (not quarkd's pool), connecting to quarkd as a remote machine's would.
  std::unique_ptr<Subprocess> StartRemoteWorker(const std::string& name) {
    std::vector<std::string> argv = {quark::testing::BuiltBinary("worker/quark-worker"),
                                     "--server", quarkd_->address(),
                                     "--worker-id", name,
                                     "--data-dir", (quarkd_->root() / name).string(),
                                     "--allowed-roots", quarkd_->root().string() + "," + Fixtures(),
                                     "--skip-throughput-probe",
                                     "--lease-wait-ms", "500"};
    absl::StatusOr<std::unique_ptr<Subprocess>> worker = Subprocess::Start(
        argv, {"QUARK_THREADS=1", "OMP_NUM_THREADS=1"}, quarkd_->root() / (name + ".log"));
    EXPECT_TRUE(worker.ok()) << worker.status();
    return worker.ok() ? *std::move(worker) : nullptr;
  }

  // quarkd with one pool quark-worker, and a remote one ("remote-1") registered with it; null when it did not start.
  std::unique_ptr<Subprocess> StartPoolAndRemoteWorker() {
    Start(1, "", "worker/quark-worker");
    if (quarkd_ == nullptr) return nullptr;
    std::unique_ptr<Subprocess> remote = StartRemoteWorker("remote-1");
    if (remote == nullptr) return nullptr;
    const bool registered =
        quarkd_->process().WaitForLine(std::regex("worker=remote-1 registered"), std::chrono::seconds(60)).ok();
    return registered ? std::move(remote) : nullptr;
  }

  // The evaluation quarkctl has no flags for (2 windows of 128 tokens, KLD) in a job file.
  std::string JobFile() const {
    const fs::path path = quarkd_->root() / "sweep.json";
    std::ofstream(path) << R"({"model_uri": "file://)" << Fixtures() << R"(/stories260K", "output_uri": "file://)"
                        << (quarkd_->root() / "out").string() << R"(", "max_attempts": 1, "evaluation": {"uri": "file://)"
                        << Fixtures() << R"(/eval/tinystories_validation_prefix.txt", "seq_len": 128, "max_windows": 2,
                        "kld": true}})";
    return path.string();
  }

  quark::v1::SubmitJobRequest SweepRequest(const std::vector<std::string>& schemes) const {
    quark::v1::SubmitJobRequest request;
    quark::v1::JobSpec* spec = request.mutable_spec();
    spec->set_model_uri("file://" + Fixtures() + "/stories260K");
    spec->set_output_uri("file://" + (quarkd_->root() / "out").string());
    spec->mutable_evaluation()->set_uri("file://" + Fixtures() + "/eval/tinystories_validation_prefix.txt");
    for (const std::string& scheme : schemes) spec->add_sweep(scheme);
    return request;
  }

  // `request` with other candidates.
  static quark::v1::SubmitJobRequest SweepRequestLike(quark::v1::SubmitJobRequest request,
                                                      const std::vector<std::string>& schemes) {
    request.mutable_spec()->clear_sweep();
    for (const std::string& scheme : schemes) request.mutable_spec()->add_sweep(scheme);
    return request;
  }

  grpc::Status Submit(const quark::v1::SubmitJobRequest& request, quark::v1::Job* job) {
    grpc::ClientContext context;
    return stub_->SubmitJob(&context, request, job);
  }

  quark::v1::Job Get(const std::string& id) { return quark::testing::GetJob(*stub_, id); }

  // Submits `request`, expects INVALID_ARGUMENT and returns the message (which names the field).
  std::string Refusal(const quark::v1::SubmitJobRequest& request) {
    quark::v1::Job job;
    grpc::Status status = Submit(request, &job);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    return status.error_message();
  }

  // The finished job's log lines, replayed from quarkd's durable event log.
  std::vector<std::string> Logs(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    quark::v1::WatchJobRequest watch;
    watch.set_id(id);
    auto reader = stub_->WatchJob(&context, watch);
    std::vector<std::string> logs;
    quark::v1::JobEvent event;
    while (reader->Read(&event)) {
      if (event.event_case() == quark::v1::JobEvent::kLog) logs.push_back(event.log());
    }
    EXPECT_TRUE(reader->Finish().ok());
    return logs;
  }

  // Submits `request` and waits for its end.
  quark::v1::Job RunToEnd(const quark::v1::SubmitJobRequest& request) {
    quark::v1::Job job;
    grpc::Status status = Submit(request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(quark::testing::WaitUntil(
        [&] {
          const quark::v1::JobState s = Get(job.id()).state();
          return s != quark::v1::JOB_STATE_RUNNING && s != quark::v1::JOB_STATE_QUEUED;
        },
        std::chrono::seconds(400)))
        << quarkd_->Log();
    return Get(job.id());
  }

  // #36 item 1: the ended parent's own manifest, <output_uri>/<id>/manifest.json, checked against GetJob's table
  // and each child's published manifest: every row's figures bit for bit, the child's manifest URI and the SHA-256
  // of its bytes, a child's measured figures in its own manifest, the failed rows with their errors, and the parent's
  // log naming the file with the SHA-256 of its bytes. Returns the document (null when a check could not start).
  nlohmann::json CheckParentManifest(const quark::v1::Job& parent) {
    const std::string path = (quarkd_->root() / "out" / parent.id() / "manifest.json").string();
    const std::string bytes = ReadAll(path);
    EXPECT_FALSE(bytes.empty()) << path << " was not written\n" << quarkd_->Log();
    nlohmann::json doc = nlohmann::json::parse(bytes, nullptr, false);
    if (bytes.empty() || doc.is_discarded()) return nullptr;
    EXPECT_EQ(doc["format_version"], 1);
    EXPECT_EQ(doc["job_id"], parent.id());
    EXPECT_EQ(doc["state"], quark::v1::JobState_Name(parent.state()));
    EXPECT_EQ(doc["float"]["ppl"].get<double>(), parent.sweep().ppl_float());
    for (const auto& [name, value] : parent.result().metrics()) EXPECT_EQ(doc["metrics"][name].get<double>(), value);
    const nlohmann::json& table = doc["table"];
    EXPECT_EQ(table.size(), static_cast<size_t>(parent.sweep().candidates_size()));
    size_t failed = 0;
    for (int i = 0; i < parent.sweep().candidates_size() && i < static_cast<int>(table.size()); ++i) {
      const quark::v1::SweepCandidate& row = parent.sweep().candidates(i);
      const nlohmann::json& written = table[i];
      SCOPED_TRACE(row.scheme());
      EXPECT_EQ(written["scheme"], row.scheme());
      EXPECT_EQ(written["job_id"], row.job_id());
      EXPECT_EQ(written["state"], quark::v1::JobState_Name(row.state()));
      EXPECT_EQ(written["size_bytes"].get<int64_t>(), row.size_bytes());
      EXPECT_EQ(written["bits_per_weight"].get<double>(), row.bits_per_weight());
      EXPECT_EQ(written["ppl"].get<double>(), row.ppl());
      EXPECT_EQ(written["kld"].get<double>(), row.kld());
      EXPECT_EQ(written["seconds"].get<double>(), row.seconds());
      for (const auto& [task, score] : row.task_scores()) EXPECT_EQ(written["task_scores"][task].get<double>(), score);
      if (row.state() != quark::v1::JOB_STATE_SUCCEEDED) {
        ++failed;
        EXPECT_EQ(written["error"], row.error());
        continue;
      }
      const quark::v1::Job child = Get(row.job_id());
      if (child.result().manifest_uri().empty()) {  // a child that publishes nothing (none of these tests' kinds)
        EXPECT_FALSE(written.contains("manifest_uri"));
        continue;
      }
      EXPECT_EQ(written["manifest_uri"], child.result().manifest_uri());
      EXPECT_EQ(written["manifest_sha256"], child.result().manifest_sha256());
      const std::string child_bytes = ReadAll(child.result().manifest_uri().substr(std::string("file://").size()));
      EXPECT_EQ(quark::Sha256Hex(child_bytes), written["manifest_sha256"].get<std::string>());
      const nlohmann::json child_doc = nlohmann::json::parse(child_bytes, nullptr, false);
      EXPECT_EQ(child_doc["job_id"], child.deduplicated_from().empty() ? child.id() : child.deduplicated_from());
      const nlohmann::json& metrics = child_doc["metrics"];
      if (metrics.contains("ppl_reloaded")) EXPECT_EQ(metrics["ppl_reloaded"].get<double>(), row.ppl());
      if (metrics.contains("kld_mean_reloaded")) EXPECT_EQ(metrics["kld_mean_reloaded"].get<double>(), row.kld());
      if (metrics.contains("seconds_total")) EXPECT_EQ(metrics["seconds_total"].get<double>(), row.seconds());
    }
    EXPECT_EQ(doc["failed"].size(), failed);
    const std::string line = "manifest: file://" + path + " (sha256 " + quark::Sha256Hex(bytes) + ")";
    const std::vector<std::string> logs = Logs(parent.id());
    EXPECT_NE(std::find(logs.begin(), logs.end(), line), logs.end()) << line;
    return doc;
  }

  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  std::unique_ptr<quark::testing::Quarkd> quarkd_;
  std::unique_ptr<quark::v1::QuantizationService::Stub> stub_;
};

inline std::string JobIdIn(const std::string& text) {
  std::smatch match;
  return std::regex_search(text, match, std::regex("(job-[0-9a-f]{32})")) ? match[1].str() : "";
}

}  // namespace quark::worker::sweep_e2e
