// gpt-oss (#32) through the streamed pipeline every family uses: ModelConfig (family kGptOss), TransformerModel and the
// LayerStreamer, one decoder layer at a time. The streamed logits equal the family's own forward (GptOssLogits) and
// Hugging Face's modeling_gpt_oss.py (tests/runtime/data, within gpt_oss_test's bound); QuantizeModel runs fp8, uint4
// RTN and GPTQ on the tiny model (the fused experts split into per-expert linears, every expert calibrated through the
// top-up, router, its bias and the sinks float) and exports HF-quark per expert as vLLM's gpt_oss loader reads it;
// the export reads back to the fake-quantized weights bit for bit. Refusals name the field or module.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/export/hf_quark_checker.h"
#include "core/export/hf_quark_moe_rules.h"
#include "core/export/hf_quark_source.h"
#include "core/export/scale_dtype.h"
#include "core/numerics/fake_quant.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/full_model.h"
#include "core/runtime/gpt_oss_model.h"
#include "core/runtime/layer_streamer.h"
#include "tests/runtime/gpt_oss_mxfp4_twin.h"
#include "tests/runtime/gpt_oss_reference.h"
#include "tests/quantize/tiny_pipeline_fixture.h"
#include "tests/runtime/gpt_oss_test_models.h"
#include "tests/runtime/test_paths.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using runtime::testing::GptOssReferenceIds;
using runtime::testing::GptOssReferenceLogits;

// Logits [windows, T, vocab] of `ids` [windows, T] through the streamer, each window a sample.
at::Tensor StreamedLogits(runtime::LayerStreamer& streamer, const at::Tensor& ids) {
  std::vector<at::Tensor> samples;
  for (int64_t w = 0; w < ids.size(0); ++w) samples.push_back(ids[w].view({1, -1}));
  auto hidden = streamer.Run(samples);
  EXPECT_TRUE(hidden.ok()) << hidden.status();
  std::vector<at::Tensor> out;
  for (const at::Tensor& h : *hidden) out.push_back(*streamer.model().Logits(h));
  return at::cat(out, 0);
}

TEST(GptOssStreamTest, TheStreamedLogitsEqualTheFamilysForwardAndHuggingFaces) {
  runtime::testing::InitTestEngine();
  const runtime::testing::TinyGptOss model("stream", 7);
  const checkpoint::ModelConfig config = checkpoint::LoadModelConfig(model.dir.string()).value();
  ASSERT_EQ(config.family, checkpoint::ArchFamily::kGptOss);
  ASSERT_NE(config.gpt_oss, nullptr);
  const at::Tensor ids = GptOssReferenceIds();
  runtime::StreamerOptions f64;
  f64.compute_dtype = at::kDouble;
  auto streamer64 = runtime::LayerStreamer::Open(model.dir.string(), f64);
  ASSERT_TRUE(streamer64.ok()) << streamer64.status();
  const double vs_hf = (StreamedLogits(**streamer64, ids).to(at::kDouble) - GptOssReferenceLogits()).abs().max().item<double>();
  std::cout << "streamed float64 vs HF: " << vs_hf << "\n";
  EXPECT_LT(vs_hf, 1e-5);  // gpt_oss_test's bound for the family's own forward
  auto streamer = runtime::LayerStreamer::Open(model.dir.string());
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  const at::Tensor streamed = StreamedLogits(**streamer, ids);
  auto own = runtime::GptOssLogits(model.config, *model.weights, ids, at::kFloat);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_LE((streamed - *own).abs().max().item<double>(), 1e-5) << "streamed vs GptOssLogits";
  auto lm = runtime::CausalLm::Open(model.dir.string(), at::kFloat);
  ASSERT_TRUE(lm.ok()) << lm.status();
  auto whole = (*lm)->Forward(ids);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_LE((streamed - *whole).abs().max().item<double>(), 1e-5) << "streamed vs whole";
}

constexpr char kGptOssArch[] = "gpt_oss";

class GptOssPipelineTest : public testing::TinyPipelineTest<kGptOssArch> {
 protected:
  // Each listed expert's weight as the export reads back through the engine's reader equals the fake-quantized slice
  // of the fused float tensor (expert e's gate_up_proj is gate_up_proj[e]^T, its interleaved rows kept), bit for bit.
  // `weight`: the run's weight spec, with the 16-bit scales of packed int4 groups (WeightSpecForExport) as the
  // quantizer applied them.
  static void ExpectReadBackEqualsFakeQuantized(const std::string& out, const QuantSpec& weight) {
    auto source = checkpoint::CheckpointReader::Open(*dir_);
    ASSERT_TRUE(source.ok()) << source.status();
    const runtime::CheckpointWeightSource fused(std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(source)));
    ExpectReadBackEqualsFakeQuantized(out, weight, fused);
  }
  // The same against the fused float tensors `fused` serves.
  static void ExpectReadBackEqualsFakeQuantized(const std::string& out, const QuantSpec& weight,
                                                const runtime::WeightSource& fused) {
    const QuantSpec spec = exporter::WeightSpecForExport(weight, at::kFloat);
    auto exported = exporter::HfQuarkWeightSource::Open(out);
    ASSERT_TRUE(exported.ok()) << exported.status();
    for (const auto& [layer, expert, proj] : std::vector<std::tuple<int, int, std::string>>{
             {0, 0, "gate_up_proj"}, {0, 5, "down_proj"}, {1, 3, "gate_up_proj"}, {2, 7, "down_proj"}}) {
      const std::string prefix = "model.layers." + std::to_string(layer) + ".mlp.experts.";
      const at::Tensor w = fused.Get(prefix + proj, at::kFloat)->select(0, expert).t().contiguous();
      const QuantParams params = *ParamsOf(w, spec, TensorRole::kWeight);
      const at::Tensor expected = *FakeQuantize(w, spec, params, TensorRole::kWeight);
      auto read = (*exported)->Get(prefix + std::to_string(expert) + "." + proj + ".weight", at::kFloat);
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_TRUE(at::equal(*read, expected)) << prefix << expert << "." << proj << ": max diff "
                                              << (*read - expected).abs().max().item<double>();
      const at::Tensor bias = fused.Get(prefix + proj + "_bias", at::kFloat)->select(0, expert);
      EXPECT_TRUE(at::equal(*(*exported)->Get(prefix + std::to_string(expert) + "." + proj + ".bias", at::kFloat), bias));
    }
  }
};

// fp8 (static activations: calibration forwards reach every expert, the top-up the ones the router skipped).
TEST_F(GptOssPipelineTest, Fp8ExportsExpertsPerExpertRouterAndSinksFloatAndReadsBack) {
  QuantizeModelOptions o = Options("fp8", "fp8");
  std::vector<std::string> notices;
  o.on_notice = [&notices](const std::string& n) { notices.push_back(n); };
  auto report = QuantizeModel(*dir_, o);
  ASSERT_TRUE(report.ok()) << report.status();
  const auto& m = report->metrics;
  EXPECT_EQ(m.at("num_layers"), 3);
  EXPECT_TRUE(std::isfinite(m.at("ppl_before")));
  EXPECT_NE(m.at("ppl_after"), m.at("ppl_before")) << "fp8 changed nothing";
  EXPECT_NEAR(m.at("ppl_reloaded"), m.at("ppl_after"), 1e-3 * m.at("ppl_after"));
  EXPECT_EQ(m.at("export_weight_differences"), 0);
  for (const std::string& n : notices) EXPECT_THAT(n, ::testing::Not(HasSubstr("QuarkMoEMethod"))) << "fp8 experts load";
  ASSERT_TRUE(exporter::CheckHfQuarkExport(o.output_dir).ok());
  ExpectReadBackEqualsFakeQuantized(o.output_dir, *o.config.global_quant_config.weight);
  nlohmann::json config_json;
  std::ifstream(o.output_dir + "/config.json") >> config_json;
  EXPECT_EQ(config_json["model_type"], "gpt_oss");
  const auto& exclude = config_json["quantization_config"]["exclude"];
  EXPECT_NE(std::find(exclude.begin(), exclude.end(), "model.layers.1.mlp.router"), exclude.end()) << exclude.dump();
  auto reader = checkpoint::CheckpointReader::Open(o.output_dir).value();
  for (const char* name : {"model.layers.1.mlp.router.weight", "model.layers.1.mlp.router.bias", "model.layers.1.self_attn.sinks"}) {
    ASSERT_TRUE(reader->Has(name)) << name;
    EXPECT_EQ(reader->Get(name)->info->dtype, checkpoint::StDType::kF32) << name;
  }
  EXPECT_FALSE(reader->Has("model.layers.1.mlp.router.weight_scale"));
  EXPECT_FALSE(reader->Has("model.layers.1.mlp.experts.gate_up_proj")) << "the fused source tensors are not copied";
  EXPECT_FALSE(reader->Has("model.layers.1.mlp.experts.down_proj_bias"));
  for (int e = 0; e < 8; ++e) {
    const std::string expert = "model.layers.2.mlp.experts." + std::to_string(e);
    EXPECT_EQ(reader->Get(expert + ".gate_up_proj.weight")->info->shape, (std::vector<int64_t>{64, 64})) << e;
    EXPECT_EQ(reader->Get(expert + ".gate_up_proj.weight")->info->dtype, checkpoint::StDType::kF8E4M3) << e;
    EXPECT_TRUE(reader->Has(expert + ".gate_up_proj.input_scale")) << e;
    EXPECT_EQ(reader->Get(expert + ".down_proj.bias")->info->shape, (std::vector<int64_t>{64})) << e;
  }
  EXPECT_TRUE(reader->Has("model.layers.0.self_attn.q_proj.weight_scale"));
  // vLLM's gpt_oss rules catch an expert left out of its layer's FusedMoE, an excluded expert and a k_proj apart.
  nlohmann::ordered_json qc = nlohmann::ordered_json::parse(config_json["quantization_config"].dump());
  qc["layer_quant_config"]["model.layers.2.mlp.experts.3.down_proj"] = qc["global_quant_config"];
  qc["layer_quant_config"]["model.layers.2.mlp.experts.3.down_proj"]["input_tensors"] = nullptr;
  qc["exclude"].push_back("model.layers.1.mlp.experts.0.gate_up_proj");
  qc["exclude"].push_back("model.layers.0.self_attn.k_proj");
  const auto problems = exporter::GptOssConfigProblems(qc, *checkpoint::LoadModelConfig(*dir_)->gpt_oss);
  ASSERT_EQ(problems.size(), 3u) << ::testing::PrintToString(problems);
  EXPECT_THAT(problems[0], HasSubstr("model.layers.0.self_attn.k_proj: excluded differently"));
  EXPECT_THAT(problems[1], HasSubstr("model.layers.1.mlp.experts.0.gate_up_proj: excluded, but vLLM's gpt_oss"));
  EXPECT_THAT(problems[2], HasSubstr("model.layers.2.mlp.experts.3.down_proj: resolves to a config different from "
                                     "model.layers.2.mlp.experts.0.down_proj"));
}

// uint4 weight-only RTN: the export reads back to the fake-quantized weights; vLLM has no MoE method for uint4
// experts, which a notice says.
TEST_F(GptOssPipelineTest, Uint4RtnExportReadsBackAndNamesWhatVllmDoesNotLoad) {
  QuantizeModelOptions rtn = Options("uint4_wo_32", "rtn");
  std::vector<std::string> notices;
  rtn.on_notice = [&notices](const std::string& n) { notices.push_back(n); };
  auto rtn_report = QuantizeModel(*dir_, rtn);
  ASSERT_TRUE(rtn_report.ok()) << rtn_report.status();
  EXPECT_NEAR(rtn_report->metrics.at("ppl_reloaded"), rtn_report->metrics.at("ppl_after"),
              1e-3 * rtn_report->metrics.at("ppl_after"));
  ExpectReadBackEqualsFakeQuantized(rtn.output_dir, *rtn.config.global_quant_config.weight);
  EXPECT_THAT(::testing::PrintToString(notices), HasSubstr("model.layers.0.mlp.experts.0.gate_up_proj: vLLM's QuarkMoEMethod"));
}

// The same with GPTQ (GptOssGptqModules): closer to float than RTN.
TEST_F(GptOssPipelineTest, GptqRunsOnEveryLayerAndBeatsRtn) { ExpectGptqBeatsRtn(); }

// OpenAI's release stores the experts in MXFP4: the streamer reads them dequantized (CheckpointWeightsFor), the
// export writes them per expert, requantized, and no _blocks/_scales tensor travels.
TEST_F(GptOssPipelineTest, AnMxfp4SourceStreamsAndExportsItsDequantizedExperts) {
  const checkpoint::ModelConfig config = checkpoint::LoadModelConfig(*dir_).value();
  const fs::path mxfp4_dir = *dir_ + "_mxfp4";
  outputs_.push_back(mxfp4_dir.string());
  auto reader = checkpoint::CheckpointReader::Open(*dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const runtime::CheckpointWeightSource float_weights(std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
  runtime::TensorMapWeightSource twin;  // the MXFP4 model with its experts dequantized, in float
  runtime::testing::WriteMxfp4Twin(*config.gpt_oss, *dir_, float_weights, mxfp4_dir, &twin);
  auto streamer = runtime::LayerStreamer::Open(mxfp4_dir.string());
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  const at::Tensor ids = GptOssReferenceIds();
  const at::Tensor streamed = StreamedLogits(**streamer, ids);
  auto from_twin = runtime::GptOssLogits(*config.gpt_oss, twin, ids, at::kFloat);
  ASSERT_TRUE(from_twin.ok()) << from_twin.status();
  EXPECT_LE((streamed - *from_twin).abs().max().item<double>(), 1e-5);
  auto from_float = runtime::GptOssLogits(*config.gpt_oss, float_weights, ids, at::kFloat);
  EXPECT_GT((streamed - *from_float).abs().max().item<double>(), 1e-2) << "the MXFP4 experts were read";
  QuantizeModelOptions o = Options("fp8", "from_mxfp4");
  auto report = QuantizeModel(mxfp4_dir.string(), o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NEAR(report->metrics.at("ppl_reloaded"), report->metrics.at("ppl_after"), 1e-3 * report->metrics.at("ppl_after"));
  ExpectReadBackEqualsFakeQuantized(o.output_dir, *o.config.global_quant_config.weight, twin);
  auto exported = checkpoint::CheckpointReader::Open(o.output_dir);
  ASSERT_TRUE(exported.ok()) << exported.status();
  for (const std::string& name : (*exported)->Names()) {
    EXPECT_EQ(name.find("_blocks"), std::string::npos) << name;
    EXPECT_EQ(name.find("_scales"), std::string::npos) << name;
  }
  nlohmann::json config_json;
  std::ifstream(o.output_dir + "/config.json") >> config_json;
  EXPECT_EQ(config_json["quantization_config"]["quant_method"], "quark");
}

TEST_F(GptOssPipelineTest, ScalingRotationExcludedExpertsAndOtherFormatsAreRefusedByName) {
  ExpectScalingAndRotationRefused();
  QuantizeModelOptions excluded = Options("fp8", "excluded");
  excluded.config.exclude.push_back("model.layers.1.mlp.experts.2.down_proj");
  auto refused = QuantizeModel(*dir_, excluded);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("model.layers.1.mlp.experts.2.down_proj"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("quantize every expert"));
  QuantizeModelOptions ct = Options("fp8", "ct");
  ct.export_formats = {"compressed_tensors"};
  auto ct_refused = QuantizeModel(*dir_, ct);
  ASSERT_FALSE(ct_refused.ok());
  EXPECT_THAT(std::string(ct_refused.status().message()), HasSubstr("export_formats[0] (compressed_tensors)"));
}

}  // namespace
}  // namespace quark::quantize
