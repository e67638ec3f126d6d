// The MoE norm -> experts scaling pair (post_attention_layernorm -> every expert's gate/up, the routers taking the
// scale exactly): the float layer and its routing unchanged for mixtral, qwen2_moe (shared expert and its sigmoid
// gate) and qwen3_moe; a pair that leaves a reader out refused naming the field; a scaling-only run's per-expert
// token counts; and on tinyllama-a grown into an MoE (tests/export/gguf_moe_models.h), AWQ with the pair beating
// AWQ without it, SmoothQuant W8A8 exporting a checked HF-quark folder whose float router reloads to the same model.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/algorithms/layer_scaling.h"
#include "core/algorithms/moe_scaling.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/moe_layout.h"
#include "core/config/presets.h"
#include "core/export/hf_quark_checker.h"
#include "core/numerics/fake_quant.h"
#include "core/quantize/quantize_model.h"
#include "core/quantize/scaling_pass.h"
#include "core/runtime/moe_layer.h"
#include "core/runtime/transformer_model.h"
#include "tests/algorithms/awq_layer_error.h"
#include "core/runtime/weight_source.h"
#include "tests/export/gguf_moe_models.h"
#include "tests/quantize/test_model.h"
#include "tests/runtime/moe_test_models.h"

namespace quark {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int64_t kStarved = 3;
constexpr int64_t kMinTokens = 16;

double RelativeError(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-30);
}

ScalingLayer NormPair(const checkpoint::ModelConfig& config) {
  for (const ScalingLayer& pair : quantize::DefaultScalingLayers(config)) {
    if (pair.prev_op == "post_attention_layernorm") return pair;
  }
  return {};
}

bool Lists(const ScalingLayer& pair, const std::string& name) {
  return std::find(pair.layers.begin(), pair.layers.end(), name) != pair.layers.end();
}

class MoeScalingTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    config_ = runtime::testing::TinyMoeConfig(GetParam());
    dir_ = testing::TempPath("quark_moe_scaling_" + GetParam());
    ASSERT_TRUE(
        runtime::testing::WriteMoeModel(config_, dir_, 11, runtime::testing::StarveExpert(config_, kStarved)).ok());
    auto reader = checkpoint::CheckpointReader::Open(dir_);
    ASSERT_TRUE(reader.ok()) << reader.status();
    auto model = runtime::TransformerModel::Create(
        config_, std::make_shared<runtime::CheckpointWeightSource>(*std::move(reader)), at::kFloat);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::shared_ptr<runtime::MoeDecoderLayer> Layer(int64_t index) {
    auto layer = model_->LoadLayer(index);
    EXPECT_TRUE(layer.ok()) << layer.status();
    return std::dynamic_pointer_cast<runtime::MoeDecoderLayer>(*layer);
  }
  // The MoE block's input for hidden states x [1, T, hidden].
  at::Tensor BlockInput(runtime::MoeDecoderLayer& layer, const at::Tensor& x) {
    const at::Tensor h = x + layer.self_attn->forward(layer.input_layernorm->forward(x), model_->Context(x.size(1)));
    return layer.post_attention_layernorm->forward(h).reshape({-1, config_.hidden_size});
  }
  std::string Block() const { return checkpoint::MoeBlockName(config_); }
  std::string Expert(int64_t e) const { return checkpoint::MoeExpertName(config_, e); }
  std::string ExpertLinear(int64_t e, bool up) const {
    const auto names = checkpoint::MoeExpertProjections(config_);
    return Expert(e) + "." + (up ? names.up : names.gate);
  }
  std::string CalibrationIds() {
    const std::string path = testing::TempPath("quark_moe_scaling_ids") + ".ids";
    std::ofstream out(path);
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t i = 0; i < 20; ++i) out << (i ? " " : "") << (s * 131 + i * 7919 + 13) % 512;
      out << "\n";
    }
    return path;
  }

  checkpoint::ModelConfig config_;
  std::string dir_;
  std::unique_ptr<runtime::TransformerModel> model_;
};

TEST_P(MoeScalingTest, TheDefaultPairListsEveryReaderOfTheNorm) {
  const ScalingLayer pair = NormPair(config_);
  ASSERT_FALSE(pair.layers.empty()) << "no post_attention_layernorm pair in the MoE template";
  EXPECT_EQ(pair.inp, Block());
  EXPECT_EQ(pair.module2inspect, Block());
  for (int64_t e = 0; e < config_.num_experts; ++e) {
    EXPECT_TRUE(Lists(pair, ExpertLinear(e, false))) << e;
    EXPECT_TRUE(Lists(pair, ExpertLinear(e, true))) << e;
  }
  EXPECT_TRUE(Lists(pair, Block() + ".gate"));
  const bool shared = GetParam() == "qwen2_moe";
  EXPECT_EQ(Lists(pair, "mlp.shared_expert.gate_proj"), shared);
  EXPECT_EQ(Lists(pair, "mlp.shared_expert.up_proj"), shared);
  EXPECT_EQ(Lists(pair, "mlp.shared_expert_gate"), shared);
  const size_t readers = 2 * config_.num_experts + 1 + (shared ? 3 : 0);
  EXPECT_EQ(pair.layers.size(), readers);
}

TEST_P(MoeScalingTest, ScalingThroughTheNormPairKeepsTheLayerAndItsRouting) {
  at::manual_seed(5);
  auto layer = Layer(0);
  ASSERT_NE(layer, nullptr);
  const at::Tensor x = at::randn({1, 13, config_.hidden_size});
  const runtime::LayerContext& context = model_->Context(13);
  const at::Tensor out_before = layer->forward(x, context);
  const at::Tensor logits_before = at::matmul(BlockInput(*layer, x), layer->moe->router().t());
  const at::Tensor router_before = layer->moe->router().clone();
  // The default pair (routers listed), then an experts-only pair as Quark's templates write it (routers added).
  ScalingLayer experts_only;
  experts_only.prev_op = "post_attention_layernorm";
  for (const std::string& name : NormPair(config_).layers) {
    if (!algorithms::IsRouter(*layer, name)) experts_only.layers.push_back(name);
  }
  const algorithms::HeadLayout heads{config_.num_attention_heads, config_.num_key_value_heads};
  at::Tensor total = at::ones({config_.hidden_size});
  for (const ScalingLayer& pair : {NormPair(config_), experts_only}) {
    ASSERT_TRUE(algorithms::CheckScalingPair(*layer, pair, "pair").ok()) << algorithms::CheckScalingPair(*layer, pair, "pair");
    const at::Tensor s = at::rand({config_.hidden_size}) * 3.5 + 0.25;  // positive, up to 15x apart
    total = total * s;
    ASSERT_TRUE(algorithms::ApplyScaling(*layer, pair, s, heads).ok());
    const at::Tensor logits = at::matmul(BlockInput(*layer, x), layer->moe->router().t());
    EXPECT_LT(RelativeError(layer->forward(x, context), out_before), 1e-5);
    EXPECT_LT(RelativeError(logits, logits_before), 1e-5);
    EXPECT_TRUE(at::equal(std::get<1>(logits.topk(config_.num_experts_per_tok, -1)),
                          std::get<1>(logits_before.topk(config_.num_experts_per_tok, -1))))
        << "the chosen experts changed";
  }
  // The router took every scale in its input columns, and LayerTensors hands it to the export.
  EXPECT_LT(RelativeError(layer->moe->router(), router_before * total.view({1, -1})), 1e-5);
  const auto tensors = algorithms::LayerTensors(*layer);
  ASSERT_TRUE(tensors.count(Block() + ".gate.weight"));
  EXPECT_TRUE(at::equal(tensors.at(Block() + ".gate.weight"), layer->moe->router()));
  EXPECT_EQ(tensors.count("mlp.shared_expert_gate.weight") > 0, GetParam() == "qwen2_moe");
  // A resumed run puts them back through SetLayerTensors.
  auto fresh = Layer(0);
  ASSERT_TRUE(algorithms::SetLayerTensors(*fresh, tensors).ok());
  EXPECT_LT(RelativeError(fresh->forward(x, context), out_before), 1e-5);
}

// SmoothQuant's statistic is over the block's input (every token), its weight max over the listed linears (not the
// routers); AutoSmoothQuant's trials feed the block x / s with the routers scaled, and both keep the float layer.
TEST_P(MoeScalingTest, SmoothQuantAndAutoSmoothQuantUseTheBlockInputAndKeepTheLayer) {
  at::manual_seed(9);
  const std::vector<at::Tensor> samples = {at::randn({1, 17, config_.hidden_size}), at::randn({1, 9, config_.hidden_size})};
  const ScalingLayer pair = NormPair(config_);
  for (const bool automatic : {false, true}) {
    auto layer = Layer(0);
    ASSERT_NE(layer, nullptr);
    std::vector<at::Tensor> before, block_inputs;
    for (const at::Tensor& x : samples) {
      before.push_back(layer->forward(x, model_->Context(x.size(1))));
      block_inputs.push_back(BlockInput(*layer, x));
    }
    at::Tensor w_max;
    for (const std::string& name : pair.layers) {
      if (algorithms::IsRouter(*layer, name)) continue;
      const at::Tensor c = std::get<0>(layer->FindLinear(name)->weight().abs().max(0));
      w_max = w_max.defined() ? at::maximum(w_max, c) : c;
    }
    const at::Tensor act = std::get<0>(at::cat(block_inputs).abs().max(0));
    algorithms::ScalingInputs in;
    in.samples = &samples;
    in.run = [&](const at::Tensor& x) { return layer->forward(x, model_->Context(x.size(1))); };
    in.context = [&](int64_t t) -> const runtime::LayerContext& { return model_->Context(t); };
    in.heads = {config_.num_attention_heads, config_.num_key_value_heads};
    in.min_expert_tokens = kMinTokens;
    std::vector<runtime::ExpertCoverage> coverage;
    in.coverage = &coverage;
    std::vector<at::Tensor> outputs;
    absl::StatusOr<std::vector<algorithms::ScalingResult>> results;
    if (automatic) {
      const LayerQuantConfig w8a8 = PresetConfig("w_int8_a_int8_per_tensor_sym").value().global_quant_config;
      algorithms::LayerQuantSpecs specs;
      for (const auto& linear : layer->NamedLinears()) specs[linear.relative_name] = {w8a8.weight, w8a8.input_tensors};
      results = algorithms::AutoSmoothQuantLayer(*layer, in, {pair}, specs, "MSE", &outputs);
    } else {
      results = algorithms::SmoothQuantLayer(*layer, in, {pair}, {0.5f, 1e-3f}, &outputs);
    }
    ASSERT_TRUE(results.ok()) << results.status();
    ASSERT_EQ(results->size(), 1u);
    if (!automatic) {
      const at::Tensor expected = (act.sqrt() / w_max.clamp_min(1e-5).sqrt()).clamp_min(1e-3);
      EXPECT_LT(RelativeError((*results)[0].scales, expected), 1e-5);
    }
    ASSERT_EQ(coverage.size(), 1u) << "the recording pass's expert counts";
    for (size_t i = 0; i < samples.size(); ++i) {
      EXPECT_LT(RelativeError(outputs[i], before[i]), 1e-6) << "outputs are the float layer's";
      EXPECT_LT(RelativeError(layer->forward(samples[i], model_->Context(samples[i].size(1))), before[i]), 1e-5)
          << (automatic ? "autosmoothquant" : "smoothquant");
    }
  }
}

TEST_P(MoeScalingTest, APairThatLeavesAReaderOutIsRefusedNamingTheField) {
  auto layer = Layer(0);
  ASSERT_NE(layer, nullptr);
  ScalingLayer missing = NormPair(config_);
  missing.layers.erase(std::find(missing.layers.begin(), missing.layers.end(), ExpertLinear(1, true)));
  absl::Status s = algorithms::CheckScalingPair(*layer, missing, "scaling_layers[2]");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("scaling_layers[2].layers: leaves out \"" + ExpertLinear(1, true)));
  ScalingLayer routed_inp = NormPair(config_);
  routed_inp.inp = ExpertLinear(0, false);
  s = algorithms::CheckScalingPair(*layer, routed_inp, "p");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("p.inp: \"" + ExpertLinear(0, false)));
  // Up front through the job, before any layer runs.
  QuantizeModelOptions o;
  o.config = PresetConfig("uint4_wo_32").value();
  AwqAlgo awq;
  awq.scaling_layers = {missing};
  o.config.algo_config = {awq};
  o.calibration_file = CalibrationIds();
  o.num_calibration_samples = 2;
  o.seq_len = 20;
  auto refused = QuantizeModel(dir_, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("algo_config[0].scaling_layers[0].layers: leaves out \"" + ExpertLinear(1, true)));
  fs::remove(o.calibration_file);
}

TEST_P(MoeScalingTest, AScalingOnlyRunReportsTheExpertCountsAndTheAppliedPair) {
  QuantizeModelOptions o;
  o.config = PresetConfig("uint4_wo_32").value();
  o.config.algo_config = {AwqAlgo{}};
  o.calibration_file = CalibrationIds();
  o.num_calibration_samples = 2;
  o.seq_len = 20;
  o.moe_min_expert_tokens = kMinTokens;
  auto report = QuantizeModel(dir_, o);
  fs::remove(o.calibration_file);
  ASSERT_TRUE(report.ok()) << report.status();
  const auto& m = report->metrics;
  for (int layer = 0; layer < config_.num_hidden_layers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    int64_t routed = 0;
    for (int64_t e = 0; e < config_.num_experts; ++e) {
      ASSERT_TRUE(m.count(prefix + Expert(e) + ".routed_tokens")) << prefix + Expert(e);
      routed += static_cast<int64_t>(m.at(prefix + Expert(e) + ".routed_tokens"));
    }
    EXPECT_EQ(routed, 2 * 20 * config_.num_experts_per_tok);
    EXPECT_EQ(m.at(prefix + Expert(kStarved) + ".routed_tokens"), 0);
    EXPECT_EQ(m.at(prefix + Expert(kStarved) + ".topup_tokens"), kMinTokens);
  }
  // The norm pair ran in every layer, and the recorded algo_config lists what it scaled, routers included.
  int norm_pairs = 0;
  for (const auto& line : report->algorithm_log) norm_pairs += line.rfind("awq post_attention_layernorm -> ", 0) == 0;
  EXPECT_EQ(norm_pairs, config_.num_hidden_layers);
  const auto& pairs = report->quantization_config.at("algo_config")[0].at("scaling_layers");
  bool recorded = false;
  for (const auto& pair : pairs) {
    if (pair.at("prev_op") != "post_attention_layernorm") continue;
    const auto& layers = pair.at("layers");
    recorded = std::find(layers.begin(), layers.end(), Block() + ".gate") != layers.end() &&
               pair.at("module2inspect") == Block();
  }
  EXPECT_TRUE(recorded) << pairs.dump();
}

INSTANTIATE_TEST_SUITE_P(Moe, MoeScalingTest, ::testing::Values("mixtral", "qwen2_moe", "qwen3_moe"));

// tinyllama-a grown into an MoE: a model whose perplexity means something.
class MoeScalingTransplantTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = testing::TempPath("quark_moe_scaling_tx_" + GetParam());
    const absl::Status s = testing::WriteTransplantedMoeModel(GetParam(), testing::FixturePath("tinyllama-a"), dir_);
    ASSERT_TRUE(s.ok()) << s;
    auto config = checkpoint::LoadModelConfig(dir_);
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
  }
  void TearDown() override { fs::remove_all(dir_); }

  QuantizeModelOptions Options(const std::string& preset, std::vector<AlgoConfig> algos, const std::string& out) {
    QuantizeModelOptions o;
    o.config = PresetConfig(preset).value();
    o.config.algo_config = std::move(algos);
    o.calibration_file = testing::FixturePath("eval/tinystories_train_split.txt");
    o.num_calibration_samples = 4;
    o.seq_len = 128;
    o.eval_text_file = testing::FixturePath("eval/tinystories_heldout_split.txt");
    o.eval_seq_len = 128;
    o.eval_max_windows = 4;
    o.output_dir = out.empty() ? "" : testing::TempPath(out);
    return o;
  }

  std::string dir_;
  checkpoint::ModelConfig config_;
};

TEST_P(MoeScalingTransplantTest, AwqWithTheNormPairBeatsRoundToNearestAndReloads) {
  AwqAlgo without;
  for (const ScalingLayer& pair : quantize::DefaultScalingLayers(config_)) {
    if (pair.prev_op != "post_attention_layernorm") without.scaling_layers.push_back(pair);
  }
  ASSERT_EQ(without.scaling_layers.size() + 1, quantize::DefaultScalingLayers(config_).size());
  const std::string preset = "uint4_wo_128";
  const QuantizeModelOptions with_options = Options(preset, {AwqAlgo{}}, "quark_moe_awq_out");
  auto rtn = QuantizeModel(dir_, Options(preset, {}, ""));
  auto awq_without = QuantizeModel(dir_, Options(preset, {without}, ""));
  auto awq_with = QuantizeModel(dir_, with_options);
  ASSERT_TRUE(rtn.ok()) << rtn.status();
  ASSERT_TRUE(awq_without.ok()) << awq_without.status();
  ASSERT_TRUE(awq_with.ok()) << awq_with.status();
  const double with_ppl = awq_with->metrics.at("ppl_after"), without_ppl = awq_without->metrics.at("ppl_after");
  std::cout << GetParam() << " (tinyllama-a grown to 4 experts) uint4 g128: float " << rtn->metrics.at("ppl_before")
            << ", RTN " << rtn->metrics.at("ppl_after") << ", AWQ without the norm pair " << without_ppl
            << ", AWQ with it " << with_ppl << "\n";
  // Perplexity on 512 held-out tokens moves by less than its noise between the two templates (docs/results.md): the
  // pair's gain is asserted on the layer's output error below; here AWQ with it must beat round-to-nearest.
  EXPECT_LT(with_ppl, rtn->metrics.at("ppl_after"));
  // The export (scaled norm, scaled float router, AWQ's experts) reloads to the fake-quantized model.
  EXPECT_NEAR(awq_with->metrics.at("ppl_after"), awq_with->metrics.at("ppl_reloaded"), 1e-4 * with_ppl);
  fs::remove_all(with_options.output_dir);
}

TEST_P(MoeScalingTransplantTest, SmoothQuantW8A8ExportsACheckedFolderWithAFloatRouter) {
  SmoothQuantAlgo smooth;
  smooth.alpha = 0.5f;
  const QuantizeModelOptions o = Options("w_int8_a_int8_per_tensor_sym", {smooth}, "quark_moe_sq_out");
  auto r = QuantizeModel(dir_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->metrics.at("ppl_after"), r->metrics.at("ppl_reloaded"), 1e-4 * r->metrics.at("ppl_after"));
  EXPECT_LT(r->metrics.at("ppl_after"), 1.2 * r->metrics.at("ppl_before"));
  const absl::Status checked = exporter::CheckHfQuarkExport(o.output_dir);
  EXPECT_TRUE(checked.ok()) << checked;
  // The router is exported float, excluded, and scaled: not the checkpoint's any more.
  const std::string router = "model.layers.1." + checkpoint::MoeBlockName(config_) + ".gate";
  std::shared_ptr<checkpoint::CheckpointReader> exported = checkpoint::CheckpointReader::Open(o.output_dir).value();
  EXPECT_EQ(exported->Get(router + ".weight")->info->dtype, checkpoint::StDType::kF32);
  const auto& exclude = r->quantization_config.at("exclude");
  EXPECT_NE(std::find(exclude.begin(), exclude.end(), router), exclude.end()) << exclude.dump();
  const runtime::CheckpointWeightSource exported_weights(exported);
  const runtime::CheckpointWeightSource original_weights(checkpoint::CheckpointReader::Open(dir_).value());
  auto exported_router = exported_weights.Get(router + ".weight", at::kFloat);
  auto original_router = original_weights.Get(router + ".weight", at::kFloat);
  ASSERT_TRUE(exported_router.ok() && original_router.ok());
  EXPECT_FALSE(at::allclose(*exported_router, *original_router)) << "the router did not take the norm's scale";
  fs::remove_all(o.output_dir);
}

// End to end, nothing quantized: every pair smoothed (the norm pair dividing post_attention_layernorm, the experts
// and the routers taking s), and the evaluated model, which reloads the edited norm and router, is the float model.
TEST_P(MoeScalingTransplantTest, SmoothingWithNothingQuantizedKeepsThePerplexity) {
  SmoothQuantAlgo smooth;
  smooth.alpha = 0.5f;
  QuantizeModelOptions o = Options("w_int8_a_int8_per_tensor_sym", {smooth}, "");
  o.config.exclude = {"*"};
  auto r = QuantizeModel(dir_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  int norm_pairs = 0;
  for (const auto& line : r->algorithm_log) norm_pairs += line.rfind("smooth post_attention_layernorm -> ", 0) == 0;
  EXPECT_EQ(norm_pairs, config_.num_hidden_layers);
  EXPECT_NEAR(r->metrics.at("ppl_after"), r->metrics.at("ppl_before"), 1e-5 * r->metrics.at("ppl_before"));
}

// The layer's output error on held-out tokens after AWQ and uint4 g128 rounding of every linear: with the norm pair
// the experts' gate/up are searched against the block's output, which the template without it leaves to RTN.
TEST_P(MoeScalingTransplantTest, AwqWithTheNormPairLowersTheLayerOutputError) {
  auto reader = checkpoint::CheckpointReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto model = runtime::TransformerModel::Create(
      config_, std::make_shared<runtime::CheckpointWeightSource>(*std::move(reader)), at::kFloat);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto embed = [&](int64_t seed, int64_t count) {
    std::vector<at::Tensor> out;
    at::Generator gen = at::detail::createCPUGenerator(seed);
    for (int64_t i = 0; i < count; ++i) {
      const at::Tensor ids = at::randint(3, config_.vocab_size, {1, 64}, gen, at::kLong);
      out.push_back((*model)->Embed(ids).value());
    }
    return out;
  };
  const std::vector<at::Tensor> calibration = embed(1, 6), held_out = embed(2, 3);
  const QuantSpec spec = *PresetConfig("uint4_wo_128").value().global_quant_config.weight;
  const auto error_after_awq = [&](const std::vector<ScalingLayer>& pairs) {
    return testing::AwqLayerZeroHeldOutError(**model, pairs, spec, calibration, held_out,
                                             {config_.num_attention_heads, config_.num_key_value_heads}, kMinTokens);
  };
  std::vector<ScalingLayer> without;
  for (const ScalingLayer& pair : quantize::DefaultScalingLayers(config_)) {
    if (pair.prev_op != "post_attention_layernorm") without.push_back(pair);
  }
  const double with_error = error_after_awq(quantize::DefaultScalingLayers(config_));
  const double without_error = error_after_awq(without);
  std::cout << GetParam() << " layer 0 squared output error after AWQ + uint4 g128: without the norm pair "
            << without_error << ", with it " << with_error << "\n";
  EXPECT_LT(with_error, without_error);
}

INSTANTIATE_TEST_SUITE_P(Moe, MoeScalingTransplantTest, ::testing::Values("mixtral", "qwen2_moe"));

}  // namespace
}  // namespace quark
