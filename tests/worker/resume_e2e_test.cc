// Resume through the whole house (#17): quarkd's real quark-worker is killed with SIGKILL in the middle of a job,
// once its checkpoint names k finished decoder layers; quarkd restarts the worker, the lost lease is requeued and the
// second attempt, on the same worker data folder, resumes at layer k ("resumed at layer k of 4" in the job's events)
// and publishes an artifact byte-identical to an uninterrupted job's. For RTN (static int8 activations), GPTQ, AWQ.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "quark/v1/service.grpc.pb.h"
#include "tests/worker/support/quarkd.h"
#include "tests/worker/support/run_job.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;

std::string Fixtures() {
  const char* shared = std::getenv("QUARK_SHARED_DIR");
  return std::string(shared != nullptr ? shared : QUARK_TEST_SOURCE_DIR "/../shared") + "/fixtures";
}

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The published files but the manifest (which names the job and its timings), relative path -> bytes.
std::map<std::string, std::string> Artifact(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().filename() == "manifest.json") continue;
    files[fs::relative(entry.path(), dir).string()] = ReadBytes(entry.path());
  }
  return files;
}

// The pids of quark-worker processes whose command line names `data_dir`.
std::vector<pid_t> WorkerPids(const std::string& data_dir) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadBytes(entry.path() / "cmdline");
    // argv[0] is the program (quarkd's own command line names quark-worker and its data folder too).
    const std::string program = fs::path(cmdline.substr(0, cmdline.find('\0'))).filename();
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (program == "quark-worker" && cmdline.find(data_dir) != std::string::npos) {
      pids.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return pids;
}

int64_t FinishedLayers(const fs::path& state) {
  const nlohmann::json json = nlohmann::json::parse(ReadBytes(state), nullptr, false);
  return json.is_object() && json.contains("finished_layers") ? json["finished_layers"].get<int64_t>() : -1;
}

struct Algorithm {
  std::string name;
  std::string preset;
  std::string algo;  // "", "gptq", "awq"
};

class ResumeE2eTest : public ::testing::TestWithParam<Algorithm> {
 protected:
  quark::v1::SubmitJobRequest Request(const std::string& output_uri) const {
    const std::string fixtures = Fixtures();
    quark::v1::SubmitJobRequest request;
    quark::v1::JobSpec* spec = request.mutable_spec();
    spec->set_model_uri("file://" + fixtures + "/tinyllama-a");
    spec->set_preset(GetParam().preset);
    if (GetParam().algo == "gptq") spec->add_algo_config()->mutable_gptq()->set_damp_percent(0.01f);
    if (GetParam().algo == "awq") spec->add_algo_config()->mutable_awq();
    spec->set_output_uri(output_uri);
    spec->set_max_attempts(3);
    spec->set_force(true);  // the same job twice: run it, do not return the first one's artifact
    // Enough calibration for each layer to take a moment, so that the kill lands between layers.
    spec->mutable_calibration()->set_uri("file://" + fixtures + "/eval/tinystories_train_split.txt");
    spec->mutable_calibration()->set_num_samples(32);
    spec->mutable_calibration()->set_seq_len(256);
    return request;
  }

  static quark::v1::Job Submit(quark::v1::QuantizationService::Stub& stub, const quark::v1::SubmitJobRequest& request) {
    quark::v1::Job job;
    grpc::ClientContext context;
    const grpc::Status status = stub.SubmitJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  // Follows the job to its end; returns it, with every event's log line in `logs`.
  static quark::v1::Job Wait(quark::v1::QuantizationService::Stub& stub, const std::string& id,
                             std::vector<std::string>& logs) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(240));
    quark::v1::WatchJobRequest watch;
    watch.set_id(id);
    auto reader = stub.WatchJob(&context, watch);
    quark::v1::JobEvent event;
    while (reader->Read(&event)) {
      if (!event.log().empty()) logs.push_back(event.log());
      if (event.has_state() && event.state() >= quark::v1::JOB_STATE_SUCCEEDED) break;
    }
    context.TryCancel();
    reader->Finish();
    quark::v1::GetJobRequest get;
    get.set_id(id);
    quark::v1::Job done;
    grpc::ClientContext get_context;
    EXPECT_TRUE(stub.GetJob(&get_context, get, &done).ok());
    return done;
  }
};

TEST_P(ResumeE2eTest, KilledWorkerResumesAtItsLastFinishedLayer) {
  quark::testing::QuarkdOptions options;
  options.workers = 1;
  options.test_mode = "";
  options.worker_binary = "worker/quark-worker";
  options.extra_roots = {Fixtures()};
  options.env = {"QUARK_THREADS=1", "OMP_NUM_THREADS=1"};
  // A killed worker's lease is given up after 2 s instead of the default.
  options.extra_args = {"--lease-timeout-ms", "2000"};
  auto quarkd = quark::testing::Quarkd::Start(options);
  ASSERT_TRUE(quarkd.ok()) << quarkd.status();
  auto stub = quark::v1::QuantizationService::NewStub(
      grpc::CreateChannel((*quarkd)->address(), grpc::InsecureChannelCredentials()));
  const fs::path root = (*quarkd)->root();
  const std::string output_uri = "file://" + (root / "out").string();

  // The uninterrupted run.
  std::vector<std::string> logs;
  const quark::v1::Job first = Wait(*stub, Submit(*stub, Request(output_uri)).id(), logs);
  ASSERT_EQ(first.state(), quark::v1::JOB_STATE_SUCCEEDED) << first.DebugString() << (*quarkd)->Log();
  const auto expected = Artifact(quark::testing::AttemptFolder(root / "out", first));
  ASSERT_FALSE(expected.empty());
  EXPECT_FALSE(fs::exists(root / "worker" / "checkpoints" / first.id())) << "removed once published";

  // The same job again, its worker killed once two layers are checkpointed.
  const quark::v1::Job job = Submit(*stub, Request(output_uri));
  const fs::path state = root / "worker" / "checkpoints" / job.id() / "state.json";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  while (std::chrono::steady_clock::now() < give_up && !(fs::exists(state) && FinishedLayers(state) >= 2)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::vector<pid_t> pids = WorkerPids((root / "worker").string());
  ASSERT_EQ(pids.size(), 1u);
  ASSERT_EQ(::kill(pids[0], SIGKILL), 0);
  const int64_t killed_at = FinishedLayers(state);  // what the dead worker left: where the next attempt starts
  ASSERT_GE(killed_at, 2);
  ASSERT_LT(killed_at, 4) << "the job finished before the kill; nothing to resume";

  logs.clear();
  const quark::v1::Job done = Wait(*stub, job.id(), logs);
  ASSERT_EQ(done.state(), quark::v1::JOB_STATE_SUCCEEDED) << done.DebugString() << (*quarkd)->Log();
  EXPECT_EQ(done.attempts_size(), 2) << done.DebugString();
  const std::string resumed = "resumed at layer " + std::to_string(killed_at) + " of 4";
  EXPECT_TRUE(std::any_of(logs.begin(), logs.end(),
                          [&](const std::string& line) { return line.find(resumed) != std::string::npos; }))
      << "no event says \"" << resumed << "\"";
  EXPECT_EQ(done.result().metrics().at("resumed_at_layer"), static_cast<double>(killed_at));
  const auto artifact = Artifact(quark::testing::AttemptFolder(root / "out", done));
  ASSERT_EQ(artifact.size(), expected.size());
  for (const auto& [file, bytes] : expected) {
    ASSERT_TRUE(artifact.count(file)) << file;
    EXPECT_TRUE(artifact.at(file) == bytes) << file << " differs from the uninterrupted job's";
  }
  EXPECT_FALSE(fs::exists(state.parent_path())) << "removed once published";
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ResumeE2eTest,
                         ::testing::Values(Algorithm{"rtn_int8_static", "int8", ""},
                                           Algorithm{"gptq", "uint4_wo_128", "gptq"},
                                           Algorithm{"awq", "uint4_wo_128", "awq"}),
                         [](const ::testing::TestParamInfo<Algorithm>& info) { return info.param.name; });

}  // namespace
}  // namespace quark::worker
