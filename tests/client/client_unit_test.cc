// quarkctl without a server: job files, flag handling, output formats and usage errors.
#include <gtest/gtest.h>

#include <fstream>

#include <sstream>

#include "client/job_file.h"
#include "client/output.h"
#include "client/quarkctl_app.h"
#include "client/submit_spec.h"
#include "tests/storage/support/subprocess.h"

namespace quark::client {
namespace {

int RunCtl(std::vector<const char*> args, std::string* out, std::string* err) {
  args.insert(args.begin(), "quarkctl");
  std::ostringstream o;
  std::ostringstream e;
  int code = RunQuarkctl(static_cast<int>(args.size()), args.data(), o, e, false);
  *out = o.str();
  *err = e.str();
  return code;
}

TEST(JobFileTest, YamlBecomesJson) {
  absl::StatusOr<std::string> json = YamlToJson("a: 1\nb: [x, 'y', 2.5, true, null]\nc: {d: \"007\"}\n");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, R"({"a":1,"b":["x","y",2.5,true,null],"c":{"d":"007"}})");
  absl::StatusOr<std::string> bad = YamlToJson("a: [1, 2\n");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("line"), std::string::npos);
}

// Found by job_file_fuzz (tests/fuzz/corpus/job_file_fuzz/crash_invalid_utf8_key): a byte that is not UTF-8, in a
// key or a value, is an error, not an exception out of nlohmann::json::dump that aborts quarkctl.
TEST(JobFileTest, TextThatIsNotUtf8IsAnError) {
  for (const char* yaml : {"symmetri\x9e: ~\n", "model_uri: file:///m\xff\n", "- [a, \"\xc3\"]\n"}) {
    absl::StatusOr<std::string> json = YamlToJson(yaml);
    EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument) << yaml;
    EXPECT_NE(json.status().message().find("UTF-8"), std::string::npos) << json.status();
    quark::v1::JobSpec spec;
    EXPECT_EQ(ParseMessageText(yaml, "job.yaml", spec).code(), absl::StatusCode::kInvalidArgument) << yaml;
  }
}

TEST(JobFileTest, LoadsYamlAndJsonJobFiles) {
  quark::testing::TempDir dir;
  quark::testing::WriteFile(dir.path() / "job.yaml",
                            "model_uri: file:///m\npreset: fp8\noutput_uri: s3://b/out\n"
                            "calibration: {num_samples: 64, seq_len: 256}\nlabels: {team: ml}\n"
                            "export_formats: [EXPORT_FORMAT_HF_QUARK]\n");
  absl::StatusOr<quark::v1::JobSpec> spec = LoadJobSpecFile((dir.path() / "job.yaml").string());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->preset(), "fp8");
  EXPECT_EQ(spec->calibration().num_samples(), 64);
  EXPECT_EQ(spec->labels().at("team"), "ml");
  EXPECT_EQ(spec->export_formats(0), quark::v1::EXPORT_FORMAT_HF_QUARK);

  quark::testing::WriteFile(dir.path() / "job.json", R"({"modelUri": "file:///m", "preset": "x", "bogus": 1})");
  absl::StatusOr<quark::v1::JobSpec> bad = LoadJobSpecFile((dir.path() / "job.json").string());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bogus"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("job.json"), std::string::npos);
}

TEST(SubmitSpecTest, FlagsOverrideJobFile) {
  quark::testing::TempDir dir;
  quark::testing::WriteFile(dir.path() / "job.yaml", "model_uri: file:///m\npreset: fp8\noutput_uri: file:///o\n");
  SubmitFlags flags;
  flags.job_file = (dir.path() / "job.yaml").string();
  flags.model = "s3://b/model";
  flags.kv_cache_dtype = "fp8";
  flags.num_calib_samples = 32;
  flags.seq_len = 128;
  flags.labels = {"a=b=c"};
  flags.exports = {"gguf", "HF-Quark", "compressed-tensors"};
  flags.exclude = {"lm_head"};
  absl::StatusOr<quark::v1::JobSpec> spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model_uri(), "s3://b/model");
  EXPECT_EQ(spec->output_uri(), "file:///o");
  EXPECT_EQ(spec->preset(), "fp8");
  EXPECT_EQ(spec->kv_cache_dtype(), "fp8");
  EXPECT_EQ(spec->calibration().num_samples(), 32);
  EXPECT_EQ(spec->labels().at("a"), "b=c");
  ASSERT_EQ(spec->export_formats_size(), 3);
  EXPECT_EQ(spec->export_formats(1), quark::v1::EXPORT_FORMAT_HF_QUARK);
  EXPECT_EQ(spec->export_formats(2), quark::v1::EXPORT_FORMAT_COMPRESSED_TENSORS);
}

TEST(SubmitSpecTest, DeadlineAndForceFromFlagsAndJobFiles) {
  quark::testing::TempDir dir;
  quark::testing::WriteFile(dir.path() / "job.yaml",
                            "model_uri: file:///m\npreset: fp8\noutput_uri: file:///o\ndeadline_seconds: 600\n"
                            "force: true\n");
  absl::StatusOr<quark::v1::JobSpec> file = LoadJobSpecFile((dir.path() / "job.yaml").string());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->deadline_seconds(), 600);
  EXPECT_TRUE(file->force());

  SubmitFlags flags;
  flags.job_file = (dir.path() / "job.yaml").string();
  flags.deadline_seconds = 90;
  absl::StatusOr<quark::v1::JobSpec> spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->deadline_seconds(), 90);
  EXPECT_TRUE(spec->force());
  flags.job_file.clear();
  flags.model = "file:///m";
  flags.output = "file:///o";
  flags.scheme = "fp8";
  flags.deadline_seconds.reset();
  flags.force = true;
  spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->deadline_seconds(), 0);
  EXPECT_TRUE(spec->force());
  flags.deadline_seconds = 0;
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--deadline: 0 is not >= 1"), std::string::npos);
}

TEST(SubmitSpecTest, ConfigFile) {
  quark::testing::TempDir dir;
  quark::testing::WriteFile(dir.path() / "c.yaml",
                            "global_quant_config:\n  weight: {dtype: DATA_TYPE_INT4, qscheme: QSCHEME_PER_GROUP}\n");
  SubmitFlags flags;
  flags.model = "file:///m";
  flags.output = "file:///o";
  flags.config = (dir.path() / "c.yaml").string();
  absl::StatusOr<quark::v1::JobSpec> spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->has_config());
  EXPECT_EQ(spec->config().global_quant_config().weight().dtype(), quark::v1::DATA_TYPE_INT4);
}

TEST(SubmitSpecTest, QuantAlgoAddsAlgorithmsInOrder) {
  SubmitFlags flags;
  flags.model = "file:///m";
  flags.output = "file:///o";
  flags.scheme = "uint4_wo_128";
  flags.quant_algo = {"gptq", "smoothquant,awq"};
  absl::StatusOr<quark::v1::JobSpec> spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->algo_config_size(), 3);
  EXPECT_TRUE(spec->algo_config(0).has_gptq());
  EXPECT_TRUE(spec->algo_config(1).has_smoothquant());
  EXPECT_TRUE(spec->algo_config(2).has_awq());
  EXPECT_EQ(spec->preset(), "uint4_wo_128");
  flags.quant_algo = {"gptq,bogus"};
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--quant-algo: unknown algorithm \"bogus\""), std::string::npos);

  // Quark's algo_config file: the named algorithm takes the file's settings.
  const std::string file = ::testing::TempDir() + "/algo.json";
  std::ofstream(file) << R"({"name": "gptq", "damp_percent": 0.05, "desc_act": false, "block_size": 64})";
  flags.quant_algo = {"gptq"};
  flags.quant_algo_config_file = file;
  spec = BuildJobSpec(flags);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->algo_config_size(), 1);
  EXPECT_FLOAT_EQ(spec->algo_config(0).gptq().damp_percent(), 0.05f);
  EXPECT_FALSE(spec->algo_config(0).gptq().desc_act());
  EXPECT_EQ(spec->algo_config(0).gptq().block_size(), 64);
  std::ofstream(file) << R"([{"name": "gptq", "damp": 0.05}])";
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--quant-algo-config-file"), std::string::npos);
  std::ofstream(file) << R"({"name": "quarot"})";
  EXPECT_EQ(BuildJobSpec(flags).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(SubmitSpecTest, ErrorsNameTheFlag) {
  SubmitFlags flags;
  flags.model = "file:///m";
  flags.output = "file:///o";
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--scheme or --config"), std::string::npos);
  flags.scheme = "fp8";
  flags.config = "/x.yaml";
  EXPECT_NE(BuildJobSpec(flags).status().message().find("not both"), std::string::npos);
  flags.config.clear();
  flags.output.clear();
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--output"), std::string::npos);
  flags.output = "file:///o";
  flags.labels = {"novalue"};
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--label"), std::string::npos);
  flags.labels.clear();
  flags.exports = {"tflite"};
  EXPECT_NE(BuildJobSpec(flags).status().message().find("tflite"), std::string::npos);
  flags.exports.clear();
  flags.num_calib_samples = 0;
  EXPECT_NE(BuildJobSpec(flags).status().message().find("--num-calib-samples"), std::string::npos);
}

TEST(SubmitSpecTest, ParsesStates) {
  EXPECT_EQ(*ParseJobState("running"), quark::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(*ParseJobState("JOB_STATE_FAILED"), quark::v1::JOB_STATE_FAILED);
  EXPECT_EQ(*ParseJobState("Cancelled"), quark::v1::JOB_STATE_CANCELLED);
  EXPECT_FALSE(ParseJobState("done").ok());
}

TEST(OutputTest, FormatsJobs) {
  quark::v1::Job job;
  job.set_id("j1");
  job.set_state(quark::v1::JOB_STATE_SUCCEEDED);
  job.mutable_spec()->set_model_uri("file:///m");
  job.mutable_result()->set_manifest_uri("s3://b/o/j1/manifest.json");
  (*job.mutable_result()->mutable_metrics())["ppl_after"] = 9.5;
  EXPECT_EQ(ToJsonLine(job).find('\n'), std::string::npos);
  EXPECT_NE(ToJsonLine(job).find(R"("state":"JOB_STATE_SUCCEEDED")"), std::string::npos) << ToJsonLine(job);
  EXPECT_NE(ToJsonLine(job).find(R"("manifest_uri":"s3://b/o/j1/manifest.json")"), std::string::npos);
  std::string table = JobTable(job);
  EXPECT_NE(table.find("state:     SUCCEEDED"), std::string::npos) << table;
  EXPECT_NE(table.find("ppl_after=9.5"), std::string::npos) << table;
  EXPECT_NE(JobListTable({job}).find("j1"), std::string::npos);
  EXPECT_EQ(ExitCodeForState(quark::v1::JOB_STATE_SUCCEEDED), kExitOk);
  EXPECT_EQ(ExitCodeForState(quark::v1::JOB_STATE_FAILED), kExitJobFailed);
  EXPECT_EQ(ExitCodeForState(quark::v1::JOB_STATE_CANCELLED), kExitCancelled);
}

TEST(OutputTest, ShowsDeduplicatedFromAndDeadline) {
  quark::v1::Job job;
  job.set_id("j2");
  job.set_state(quark::v1::JOB_STATE_SUCCEEDED);
  job.set_deduplicated_from("j1");
  job.mutable_spec()->set_deadline_seconds(60);
  std::string table = JobTable(job);
  EXPECT_NE(table.find("dedup:     deduplicated from job j1"), std::string::npos) << table;
  EXPECT_NE(table.find("deadline:  60 s"), std::string::npos) << table;
  EXPECT_NE(ToJsonLine(job).find(R"("deduplicated_from":"j1")"), std::string::npos) << ToJsonLine(job);
  quark::v1::JobEvent event;
  event.set_sequence(2);
  event.set_state(quark::v1::JOB_STATE_SUCCEEDED);
  *event.mutable_job() = job;
  EXPECT_EQ(EventLine(event), "#2 SUCCEEDED (deduplicated from job j1)");
}

TEST(OutputTest, ShowsTheMemoryAJobNeedsOnlyWhenKnown) {
  quark::v1::Job job;
  job.set_id("j3");
  job.set_state(quark::v1::JOB_STATE_QUEUED);
  EXPECT_EQ(JobTable(job).find("needs:"), std::string::npos) << JobTable(job);
  job.set_needs_host_memory_bytes(int64_t{60} << 30);
  EXPECT_NE(JobTable(job).find("needs:     60.0 GiB host memory\n"), std::string::npos) << JobTable(job);
  job.set_needs_gpu_memory_bytes(int64_t{3} << 29);
  EXPECT_NE(JobTable(job).find("needs:     60.0 GiB host memory, 1.5 GiB GPU memory\n"), std::string::npos)
      << JobTable(job);
}

TEST(OutputTest, ValidateTablePrintsEachEstimate) {
  quark::v1::ValidateConfigResponse response;
  response.set_valid(true);
  quark::v1::Estimate* e = response.add_estimates();
  e->set_worker_kind("cpu, 2 threads, 95 GFLOP/s GEMM, 0.1 GiB memory");
  e->add_worker_ids("w1");
  quark::v1::PhaseEstimate* gptq = e->add_phases();
  gptq->set_phase("gptq");
  gptq->set_seconds(33.3);
  gptq->set_peak_host_bytes(int64_t{3} << 30);
  e->set_total_seconds(40);
  e->set_peak_host_bytes(int64_t{3} << 30);
  quark::v1::ArtifactEstimate* artifact = e->add_artifacts();
  artifact->set_format(quark::v1::EXPORT_FORMAT_GGUF);
  artifact->set_bytes(3890000000);
  e->set_does_not_fit("needs 3.0 GiB host memory at phase gptq; the worker has 0.1 GiB");
  const std::string table = ValidateTable(response);
  EXPECT_NE(table.find("estimate on cpu, 2 threads, 95 GFLOP/s GEMM, 0.1 GiB memory (w1)"), std::string::npos) << table;
  EXPECT_NE(table.find("gptq              33.3 s      3.00 GiB"), std::string::npos) << table;
  EXPECT_NE(table.find("total             40.0 s"), std::string::npos) << table;
  EXPECT_NE(table.find("artifact gguf: 3.890 GB (3890000000 bytes)"), std::string::npos) << table;
  EXPECT_NE(table.find("does not fit: needs 3.0 GiB"), std::string::npos) << table;
}

TEST(OutputTest, ProgressBar) {
  quark::v1::Progress p;
  p.set_phase("quantize");
  p.set_layer(3);
  p.set_num_layers(12);
  p.set_fraction(0.25);
  p.set_eta_seconds(75);
  EXPECT_EQ(ProgressBar(p, 8), "[==>     ] 25% quantize 3/12 eta 1m15s");
  p.set_fraction(1.0);
  p.set_eta_seconds(0);
  EXPECT_EQ(ProgressBar(p, 4), "[====] 100% quantize 3/12");
}

TEST(QuarkctlTest, UsageErrorsExitWith2) {
  std::string out;
  std::string err;
  EXPECT_EQ(RunCtl({}, &out, &err), kExitUsage);
  EXPECT_EQ(RunCtl({"frobnicate"}, &out, &err), kExitUsage);
  EXPECT_EQ(RunCtl({"-o", "xml", "presets"}, &out, &err), kExitUsage);
  EXPECT_EQ(RunCtl({"submit", "--model", "file:///m", "--output", "file:///o"}, &out, &err), kExitUsage);
  EXPECT_NE(err.find("--scheme or --config"), std::string::npos) << err;
  EXPECT_EQ(RunCtl({"submit", "--num-calib-samples", "many"}, &out, &err), kExitUsage);
  EXPECT_EQ(RunCtl({"get"}, &out, &err), kExitUsage);
  EXPECT_EQ(RunCtl({"presets", "-o", "xml"}, &out, &err), kExitUsage) << "global flags also after the command";
  EXPECT_NE(err.find("xml"), std::string::npos) << err;
  EXPECT_EQ(RunCtl({"--help"}, &out, &err), kExitOk);
  EXPECT_NE(out.find("submit"), std::string::npos);
}

TEST(QuarkctlTest, UnreachableServerExitsWith4) {
  std::string out;
  std::string err;
  EXPECT_EQ(RunCtl({"--server", "127.0.0.1:1", "--timeout", "2", "get", "x"}, &out, &err), kExitRpcError);
  EXPECT_NE(err.find("UNAVAILABLE"), std::string::npos) << err;
  EXPECT_NE(err.find("127.0.0.1:1"), std::string::npos) << err;
}

// #31 item 2: --num-fewshot goes to EvaluationSpec.num_fewshot (unset when not given: each task's default).
TEST(SubmitSpecTest, NumFewshotIsSetOnlyWhenGiven) {
  SubmitFlags flags;
  flags.tasks = {"gsm8k,mmlu"};
  quark::v1::EvaluationSpec evaluation;
  ASSERT_TRUE(ApplyEvaluation(flags, evaluation).ok());
  EXPECT_FALSE(evaluation.has_num_fewshot());
  EXPECT_EQ(evaluation.tasks_size(), 2);
  flags.num_fewshot = 0;
  ASSERT_TRUE(ApplyEvaluation(flags, evaluation).ok());
  EXPECT_TRUE(evaluation.has_num_fewshot());
  EXPECT_EQ(evaluation.num_fewshot(), 0);
  flags.num_fewshot = -1;
  const absl::Status bad = ApplyEvaluation(flags, evaluation);
  EXPECT_EQ(bad.message(), "--num-fewshot: -1 is negative");
}

}  // namespace
}  // namespace quark::client
