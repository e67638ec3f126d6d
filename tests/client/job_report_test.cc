// quarkctl report's tables and plot from a job's metrics and manifest (client/job_report.h).
#include "client/job_report.h"

#include <gtest/gtest.h>

namespace quark::client {
namespace {

quark::v1::Job EvaluatedJob() {
  quark::v1::Job job;
  job.set_id("j1");
  job.set_state(quark::v1::JOB_STATE_SUCCEEDED);
  job.mutable_spec()->set_model_uri("file:///m");
  job.mutable_spec()->mutable_evaluation()->add_tasks("arc_easy");
  job.mutable_spec()->mutable_evaluation()->add_tasks("lambada_openai");
  auto& m = *job.mutable_result()->mutable_metrics();
  m["ppl_before"] = 10;
  m["ppl_after"] = 10.5;
  m["ppl_reloaded"] = 10.6;
  m["arc_easy_acc_float"] = 0.5;
  m["arc_easy_acc_reloaded"] = 0.25;
  m["arc_easy_acc_norm_stderr_float"] = 0.1;
  m["lambada_openai_perplexity_float"] = 30;
  m["lambada_openai_perplexity_reloaded"] = 33;
  m["kld_mean_reloaded"] = 0.0123;
  m["kld_mean_stderr_reloaded"] = 0.001;
  m["kld_same_top_reloaded"] = 0.9;
  m["seconds_eval_kld"] = 2.5;
  auto* a = job.mutable_result()->add_artifacts();
  a->set_uri("file:///out/j1/model.safetensors");
  a->set_size_bytes(1000);
  return job;
}

TEST(JobReportTest, MetricsBecomeTablesPerModel) {
  const nlohmann::json manifest = {
      {"gate", {{"passed", true}, {"failure", ""}}},
      {"evaluation",
       {{"kld", {{"reloaded", {{"delta_p_histogram", {{"lo", -1}, {"hi", 1}, {"counts", {0, 3, 1, 0}}}}}}}}}}};
  const nlohmann::json r = BuildJobReport(EvaluatedJob(), manifest);
  EXPECT_EQ(r["models"], nlohmann::json({"float", "fake_quant", "reloaded"}));
  EXPECT_EQ(r["perplexity"]["fake_quant"], 10.5);
  EXPECT_EQ(r["tasks"]["arc_easy"]["acc"]["reloaded"], 0.25);
  EXPECT_EQ(r["tasks"]["arc_easy"]["acc_norm_stderr"]["float"], 0.1);
  EXPECT_EQ(r["tasks"]["lambada_openai"]["perplexity"]["reloaded"], 33);
  EXPECT_EQ(r["kld"]["reloaded"]["mean"], 0.0123);
  EXPECT_EQ(r["kld"]["reloaded"]["mean_stderr"], 0.001);
  EXPECT_EQ(r["size_bytes"], 1000);
  EXPECT_EQ(r["seconds"]["eval_kld"], 2.5);
  EXPECT_EQ(r["delta_p_histogram"]["reloaded"]["counts"], nlohmann::json({0, 3, 1, 0}));

  const std::string text = ReportText(r);
  EXPECT_NE(text.find("arc_easy        acc              0.5    0.25      0.25"), std::string::npos) << text;
  EXPECT_NE(text.find("0.25"), std::string::npos) << text;
  EXPECT_NE(text.find("gate: passed"), std::string::npos) << text;
  EXPECT_NE(text.find("[-0.50,+0.00) ######################################## 3"), std::string::npos) << text;
  const std::string markdown = ReportMarkdown(r);
  EXPECT_NE(markdown.find("| task | metric | float | reloaded | worst drop |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| arc_easy | acc | 0.5 | 0.25 | 0.25 |"), std::string::npos) << markdown;
  const std::string svg = ReportSvg(r);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("<title>arc_easy reloaded 0.2500</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("Δp histogram, reloaded"), std::string::npos);
}

// #30 item 2: a compressed-tensors export read back is a model of the report like the HF-quark one.
TEST(JobReportTest, TheCompressedTensorsExportIsAModelOfItsOwn) {
  quark::v1::Job job = EvaluatedJob();
  auto& m = *job.mutable_result()->mutable_metrics();
  m["ppl_compressed_tensors"] = 10.7;
  m["arc_easy_acc_compressed_tensors"] = 0.75;
  m["kld_mean_compressed_tensors"] = 0.0125;
  m["kld_mean_stderr_compressed_tensors"] = 0.002;
  const nlohmann::json r = BuildJobReport(job, nlohmann::json());
  EXPECT_EQ(r["models"], nlohmann::json({"float", "fake_quant", "reloaded", "compressed_tensors"}));
  EXPECT_EQ(r["perplexity"]["compressed_tensors"], 10.7);
  EXPECT_EQ(r["tasks"]["arc_easy"]["acc"]["compressed_tensors"], 0.75);
  EXPECT_EQ(r["kld"]["compressed_tensors"]["mean"], 0.0125);
  EXPECT_EQ(r["kld"]["compressed_tensors"]["mean_stderr"], 0.002);
  EXPECT_NE(ReportMarkdown(r).find("| float | reloaded | compressed_tensors |"), std::string::npos) << ReportMarkdown(r);
}

TEST(JobReportTest, AFailedGateWithoutAManifestComesFromTheError) {
  quark::v1::Job job = EvaluatedJob();
  job.set_state(quark::v1::JOB_STATE_FAILED);
  job.set_error("FAILED_PRECONDITION: evaluation gate: max_kld 0.01 < kld_mean_reloaded 0.0123");
  const nlohmann::json r = BuildJobReport(job, nullptr);
  EXPECT_EQ(r["gate"]["passed"], false);
  EXPECT_NE(ReportText(r).find("gate: FAILED: FAILED_PRECONDITION: evaluation gate: max_kld"), std::string::npos);
  EXPECT_FALSE(r.contains("delta_p_histogram"));
}

}  // namespace
}  // namespace quark::client
