// ValidateConfig --estimate and SubmitJob's fit check through the real quarkd: workers registering their measured
// throughputs over the real worker protocol (a plain gRPC client here: the engine's probe is exercised by
// quark-worker itself), estimates per kind of worker, a job refused RESOURCE_EXHAUSTED with the numbers when it
// fits none of them, a GPU job no worker can ever run refused FAILED_PRECONDITION (or left waiting, with an event,
// when GPU workers can still come), and a config.json claiming billions of layers refused at once.
#include <grpcpp/grpcpp.h>

#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/config/presets.h"
#include "core/estimate/job_estimate.h"
#include "quark/v1/service.grpc.pb.h"
#include "quark/v1/worker.grpc.pb.h"
#include "tests/estimate/synthetic_model.h"
#include "tests/server/quarkd_process.h"
#include "tests/server/test_util.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;
namespace ipb = quark::v1::internal;
using testing::QuarkdProcess;

class EstimateProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.File("models/m"));
    estimate::testing::WriteBf16Llama(dir_.File("models/m"), 256, 768, 2);
    StartQuarkd({});
  }

  // (Re)starts quarkd with no local worker and `extra` flags; with `address_space_bytes`, under that RLIMIT_AS.
  void StartQuarkd(const std::vector<std::string>& extra, int64_t address_space_bytes = 0) {
    quarkd_.Stop();
    std::vector<std::string> args = {"--data-dir", dir_.File("data"), "--listen", "127.0.0.1:0", "--metrics-listen",
                                     "", "--workers", "0", "--allowed-roots",
                                     dir_.File("models") + "," + dir_.File("out")};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string binary = QUARKD_BINARY;
    if (address_space_bytes > 0) {
      args.insert(args.begin(), {absl::StrCat("--as=", address_space_bytes), binary});
      binary = "/usr/bin/prlimit";
    }
    ASSERT_TRUE(quarkd_.Start(binary, args, dir_.File("ready.json"), dir_.File("quarkd.log")));
    auto channel = grpc::CreateChannel(quarkd_.address(), grpc::InsecureChannelCredentials());
    stub_ = pb::QuantizationService::NewStub(channel);
    workers_ = ipb::WorkerService::NewStub(channel);
  }

  grpc::Status Register(const std::string& id, double gemm_gflops, int64_t host_memory, int64_t gpu_memory = 0) {
    ipb::RegisterRequest request;
    request.set_worker_id(id);
    request.set_slots(1);
    request.add_devices("cpu");
    if (gpu_memory > 0) request.add_devices("cuda:0");  // a GPU device, as the scheduler counts GPUs
    ipb::WorkerThroughput* t = request.mutable_throughput();
    t->set_threads(2);
    t->set_gemm_gflops(gemm_gflops);
    t->set_cholesky_gflops(gemm_gflops / 3);
    t->set_fake_quant_bytes_per_s(2e9);
    t->set_disk_write_bytes_per_s(500e6);
    t->set_disk_read_bytes_per_s(2e9);
    t->set_host_memory_bytes(host_memory);
    t->set_gpu_memory_bytes(gpu_memory);
    t->set_device(gpu_memory > 0 ? "cuda" : "cpu");
    grpc::ClientContext context;
    ipb::RegisterResponse response;
    return workers_->Register(&context, request, &response);
  }

  pb::ValidateConfigResponse Validate() {
    pb::ValidateConfigRequest request;
    request.set_model_uri("file://" + dir_.File("models/m"));
    request.set_preset("uint4_wo_128");
    request.set_estimate(true);
    pb::AlgoConfig* gptq = request.add_algo_config();
    gptq->mutable_gptq();
    request.mutable_calibration()->set_num_samples(4);
    request.mutable_calibration()->set_seq_len(64);
    grpc::ClientContext context;
    pb::ValidateConfigResponse response;
    grpc::Status status = stub_->ValidateConfig(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // The worker's Lease, answered at once: the job id leased ("" when none).
  std::string LeaseNow(const std::string& worker_id) {
    ipb::LeaseRequest request;
    request.set_worker_id(worker_id);
    request.set_wait_ms(0);
    grpc::ClientContext context;
    ipb::LeaseResponse response;
    grpc::Status status = workers_->Lease(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.job().id();
  }

  grpc::Status Submit(int gpus = 0, pb::Job* submitted = nullptr) {
    pb::SubmitJobRequest request;
    request.mutable_spec()->set_model_uri("file://" + dir_.File("models/m"));
    request.mutable_spec()->set_output_uri("file://" + dir_.File("out"));
    request.mutable_spec()->set_preset("uint4_wo_128");
    request.mutable_spec()->add_algo_config()->mutable_gptq();
    request.mutable_spec()->mutable_resources()->set_gpus(gpus);
    request.mutable_spec()->mutable_calibration()->set_num_samples(4);  // as Validate() and Expected()
    request.mutable_spec()->mutable_calibration()->set_seq_len(64);
    grpc::ClientContext context;
    pb::Job job;
    return stub_->SubmitJob(&context, request, submitted != nullptr ? submitted : &job);
  }

  // The estimate the library gives for the same job on the reference rates.
  estimate::JobEstimate Expected() {
    absl::StatusOr<estimate::ModelShape> model = estimate::ReadModelShape(dir_.File("models/m"));
    EXPECT_TRUE(model.ok()) << model.status();
    estimate::JobInputs job;
    job.config = *PresetConfig("uint4_wo_128");
    job.config.algo_config.push_back(GptqAlgo{});
    job.calibration_samples = 4;
    job.calibration_seq_len = 64;
    absl::StatusOr<estimate::JobEstimate> e = estimate::EstimateJob(*model, job, estimate::ReferenceThroughput());
    EXPECT_TRUE(e.ok()) << e.status();
    return *e;
  }

  // The log events of `id` until one contains `text` (or 10 s pass): the job stays queued, so the stream is cut.
  std::vector<std::string> LogsUntil(const std::string& id, const std::string& text) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::WatchJobRequest request;
    request.set_id(id);
    auto reader = stub_->WatchJob(&context, request);
    std::vector<std::string> logs;
    pb::JobEvent event;
    while (reader->Read(&event)) {
      if (!event.has_log()) continue;
      logs.push_back(event.log());
      if (event.log().find(text) != std::string::npos) break;
    }
    context.TryCancel();
    reader->Finish().IgnoreError();
    return logs;
  }

  testing::TempDir dir_;
  QuarkdProcess quarkd_;
  std::unique_ptr<pb::QuantizationService::Stub> stub_;
  std::unique_ptr<ipb::WorkerService::Stub> workers_;
};

TEST_F(EstimateProcessTest, WithoutWorkersTheReferenceEstimateComesWithAWarning) {
  pb::ValidateConfigResponse response = Validate();
  ASSERT_TRUE(response.valid()) << response.DebugString();
  ASSERT_EQ(response.estimates_size(), 1);
  const pb::Estimate& e = response.estimates(0);
  EXPECT_NE(e.worker_kind().find("reference"), std::string::npos) << e.worker_kind();
  bool warned = false;
  for (const std::string& w : response.warnings()) warned |= w.find("no worker is registered") != std::string::npos;
  EXPECT_TRUE(warned) << response.DebugString();
  const estimate::JobEstimate expected = Expected();
  ASSERT_EQ(e.phases_size(), static_cast<int>(expected.phases.size()));
  std::vector<std::string> phases;
  for (const auto& p : e.phases()) phases.push_back(p.phase());
  EXPECT_EQ(phases, (std::vector<std::string>{"load", "calibrate", "gptq", "quantize_export"}));
  EXPECT_EQ(e.peak_host_bytes(), static_cast<int64_t>(expected.peak_host_bytes));
  ASSERT_EQ(e.artifacts_size(), 1);
  EXPECT_EQ(e.artifacts(0).format(), pb::EXPORT_FORMAT_HF_QUARK);
  EXPECT_EQ(e.artifacts(0).bytes(), static_cast<int64_t>(expected.artifacts[0].bytes));
  EXPECT_GT(e.total_seconds(), 0);
  // Without workers nothing is refused: the job queues as before.
  EXPECT_TRUE(Submit().ok());
}

TEST_F(EstimateProcessTest, IdenticalWorkersShareAnEstimateAndAJobThatFitsNoneIsRefused) {
  ASSERT_TRUE(Register("small-a", 50, 64ll << 20).ok());
  ASSERT_TRUE(Register("small-b", 50, 64ll << 20).ok());
  pb::ValidateConfigResponse response = Validate();
  ASSERT_EQ(response.estimates_size(), 1) << response.DebugString();
  EXPECT_EQ(response.estimates(0).worker_ids_size(), 2);
  EXPECT_EQ(response.estimates(0).host_memory_bytes(), 64ll << 20);
  EXPECT_NE(response.estimates(0).does_not_fit().find("host memory at phase"), std::string::npos)
      << response.estimates(0).does_not_fit();

  grpc::Status refused = Submit();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  const std::string expected_peak = absl::StrFormat("needs %.1f GiB host memory at phase %s",
                                                    Expected().peak_host_bytes / double(1ull << 30),
                                                    Expected().peak_host_phase);
  EXPECT_NE(refused.error_message().find(expected_peak), std::string::npos) << refused.error_message();
  EXPECT_NE(refused.error_message().find("the largest worker has 0.1 GiB"), std::string::npos)
      << refused.error_message();

  // A worker with the memory (and twice the speed) arrives: two kinds, the faster one quicker, and the job queues.
  ASSERT_TRUE(Register("big", 100, 64ll << 30).ok());
  response = Validate();
  ASSERT_EQ(response.estimates_size(), 2) << response.DebugString();
  const pb::Estimate* big = nullptr;
  const pb::Estimate* small = nullptr;
  for (const pb::Estimate& e : response.estimates()) (e.worker_ids(0) == "big" ? big : small) = &e;
  ASSERT_TRUE(big != nullptr && small != nullptr);
  EXPECT_TRUE(big->does_not_fit().empty()) << big->does_not_fit();
  EXPECT_LT(big->total_seconds(), small->total_seconds());
  EXPECT_EQ(big->peak_host_bytes(), small->peak_host_bytes());
  EXPECT_TRUE(Submit().ok());
}

TEST_F(EstimateProcessTest, AJobAskingForAGpuIsRefusedWhenNoWorkerHasOne) {
  // No worker at all and no executor that starts one: refused at once, not queued forever.
  grpc::Status refused = Submit(/*gpus=*/2);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
  EXPECT_NE(refused.error_message().find("spec.resources.gpus"), std::string::npos) << refused.error_message();
  EXPECT_NE(refused.error_message().find("none of the 0 registered workers"), std::string::npos)
      << refused.error_message();
  ASSERT_TRUE(Register("cpu-only", 50, 64ll << 30).ok());
  refused = Submit(/*gpus=*/1);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
  EXPECT_NE(refused.error_message().find("spec.resources.gpus: the job asks for a GPU"), std::string::npos)
      << refused.error_message();
  ASSERT_TRUE(Register("gpu", 50, 64ll << 30, 80ll << 30).ok());
  pb::Job job;
  EXPECT_TRUE(Submit(/*gpus=*/1, &job).ok());
  // Host memory as on a CPU kind (the engine is LibTorch's CPU build, GPU jobs included); GPU memory as on a CUDA one.
  EXPECT_EQ(job.needs_host_memory_bytes(), static_cast<int64_t>(Expected().peak_host_bytes));
  EXPECT_GT(job.needs_gpu_memory_bytes(), 0);
  // A worker with one GPU can never run a job asking for two.
  refused = Submit(/*gpus=*/2);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
  EXPECT_NE(refused.error_message().find("at most 1"), std::string::npos) << refused.error_message();
}

// When GPU workers can still come (here: --expect-gpu-workers; the Slurm executor likewise), the job queues and its
// events say what it waits for.
TEST_F(EstimateProcessTest, AGpuJobThatCanBeServedLaterWaitsWithAnEventSayingForWhat) {
  StartQuarkd({"--expect-gpu-workers"});
  ASSERT_TRUE(Register("cpu-only", 50, 64ll << 30).ok());
  pb::Job job;
  grpc::Status submitted = Submit(/*gpus=*/2, &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  EXPECT_EQ(job.state(), pb::JOB_STATE_QUEUED);
  std::vector<std::string> logs = LogsUntil(job.id(), "waiting for a worker with 2 GPUs");
  ASSERT_FALSE(logs.empty());
  EXPECT_EQ(logs.back(), "waiting for a worker with 2 GPUs (no registered worker has that many; GPU workers are "
                         "expected to join)");
  EXPECT_EQ(LeaseNow("cpu-only"), "") << "a CPU worker is not handed a GPU job";
}

// SubmitJob records the job's estimated peak host memory in the job (GetJob shows it); at lease time a worker that
// announced less is not handed it, a worker with enough is.
TEST_F(EstimateProcessTest, TheEstimatedNeedIsRecordedAndOnlyAWorkerWithTheMemoryLeasesTheJob) {
  ASSERT_TRUE(Register("small", 50, 64ll << 20).ok());
  ASSERT_TRUE(Register("big", 50, 64ll << 30).ok());
  pb::Job job;
  ASSERT_TRUE(Submit(0, &job).ok());
  EXPECT_EQ(job.needs_host_memory_bytes(), static_cast<int64_t>(Expected().peak_host_bytes));
  EXPECT_EQ(job.needs_gpu_memory_bytes(), 0) << "a CPU job records no GPU need";
  pb::GetJobRequest get;
  get.set_id(job.id());
  grpc::ClientContext context;
  pb::Job got;
  ASSERT_TRUE(stub_->GetJob(&context, get, &got).ok());
  EXPECT_EQ(got.needs_host_memory_bytes(), job.needs_host_memory_bytes());
  EXPECT_EQ(LeaseNow("small"), "") << "64 MiB announced, " << job.needs_host_memory_bytes() << " bytes needed";
  EXPECT_EQ(LeaseNow("big"), job.id());
}

// The memory bomb: a config.json in the caller's own root claiming 2^31 - 1 layers (or experts). Before, a viewer's
// ValidateConfig with estimate made quarkd allocate until the OOM killer came (under an address-space cap: a bare
// UNIMPLEMENTED after 11-13 s). Now the sizes are bounded before anything is sized by them: an answer at once naming
// the field, under a 4 GiB cap, and quarkd still serves.
TEST_F(EstimateProcessTest, AConfigJsonClaimingBillionsOfLayersIsRefusedAtOnceNamingTheField) {
  StartQuarkd({}, int64_t{4} << 30);
  std::filesystem::create_directories(dir_.File("models/bomb"));
  std::filesystem::copy_file(dir_.File("models/m/model.safetensors"), dir_.File("models/bomb/model.safetensors"));
  for (const auto& [field, model_type, extra] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"num_hidden_layers", "llama", ""},
           {"num_local_experts", "mixtral", R"(, "num_experts_per_tok": 2)"}}) {
    const std::string layers = field == "num_hidden_layers" ? "2147483647" : "2";
    const std::string experts = field == "num_local_experts" ? R"(, "num_local_experts": 2147483647)" : "";
    std::ofstream(dir_.File("models/bomb/config.json"))
        << R"({"model_type": ")" << model_type << R"(", "hidden_size": 256, "intermediate_size": 768, )"
        << R"("num_attention_heads": 4, "vocab_size": 1000, "num_hidden_layers": )" << layers << experts << extra
        << "}";
    pb::ValidateConfigRequest request;
    request.set_model_uri("file://" + dir_.File("models/bomb"));
    request.set_preset("uint4_wo_128");
    request.set_estimate(true);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pb::ValidateConfigResponse response;
    grpc::Status status = stub_->ValidateConfig(&context, request, &response);
    ASSERT_TRUE(status.ok()) << field << ": " << status.error_code() << " " << status.error_message();
    EXPECT_FALSE(response.valid());
    ASSERT_GT(response.errors_size(), 0) << response.DebugString();
    EXPECT_NE(response.errors(0).find("field \"" + field + "\" = 2147483647 is above the limit"), std::string::npos)
        << response.errors(0);
  }
  // The same model submitted: answered at once too (the estimate of its needs stops at the same check).
  pb::SubmitJobRequest submit;
  submit.mutable_spec()->set_model_uri("file://" + dir_.File("models/bomb"));
  submit.mutable_spec()->set_output_uri("file://" + dir_.File("out"));
  submit.mutable_spec()->set_preset("uint4_wo_128");
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  pb::Job job;
  grpc::Status submitted = stub_->SubmitJob(&context, submit, &job);
  EXPECT_NE(submitted.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << submitted.error_message();
  EXPECT_NE(submitted.error_code(), grpc::StatusCode::UNAVAILABLE) << submitted.error_message();
  EXPECT_EQ(kill(quarkd_.pid(), 0), 0) << "quarkd died";
  EXPECT_TRUE(Validate().valid()) << "quarkd still serves";
}

TEST_F(EstimateProcessTest, ThroughputThatIsNotAFiniteNonNegativeNumberIsRefused) {
  grpc::Status status = Register("bad", -1, 64ll << 30);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("throughput.gemm_gflops"), std::string::npos) << status.error_message();
}

}  // namespace
}  // namespace quark::server
