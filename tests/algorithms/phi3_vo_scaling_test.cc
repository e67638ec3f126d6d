// Phi-3's v -> o scaling pair through the fused qkv_proj (self_attn.qkv_proj -> self_attn.o_proj): only the v rows
// of qkv_proj (the last kv_heads * head_dim) are divided, reduced per KV head under grouped heads, so the float layer
// is unchanged (MHA and GQA); any other reader, or shapes that do not fit, refused naming the field; the template
// lists the pair exactly when the attention is square (as Llama's v_proj -> o_proj); and AWQ with the pair on the
// tinyllama-a phi3 transplant (8 heads over 4 KV heads, so given explicitly) against the template without it.
#include <cmath>
#include <filesystem>
#include <iostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/algorithms/layer_scaling.h"
#include "core/algorithms/smoothing.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/config/presets.h"
#include "core/export/hf_quark_checker.h"
#include "core/numerics/fake_quant.h"
#include "core/quantize/quantize_model.h"
#include "core/quantize/scaling_pass.h"
#include "core/runtime/transformer_model.h"
#include "tests/algorithms/awq_layer_error.h"
#include "core/runtime/weight_source.h"
#include "tests/quantize/test_model.h"
#include "tests/runtime/dense_arch_models.h"

namespace quark {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const ScalingLayer kQkvToO{"self_attn.qkv_proj", {"self_attn.o_proj"}, "self_attn.o_proj", ""};

// hidden 128 (uint4 g128 divides every input), head_dim 32, vocab 512 (tinyllama-a's tokenizer).
checkpoint::ModelConfig Phi3Config(int64_t kv_heads) {
  auto config = checkpoint::ParseModelConfig(absl::StrCat(
      R"({"model_type": "phi3", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": )", kv_heads, R"(, "vocab_size": 512,
      "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
      "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": false, "rope_scaling": null})"));
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

std::unique_ptr<runtime::TransformerModel> Load(const checkpoint::ModelConfig& config, const std::string& dir) {
  auto reader = checkpoint::CheckpointReader::Open(dir);
  EXPECT_TRUE(reader.ok()) << reader.status();
  auto model = runtime::TransformerModel::Create(
      config, std::make_shared<runtime::CheckpointWeightSource>(*std::move(reader)), at::kFloat);
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

std::string RandomPhi3(int64_t kv_heads, const std::string& stem) {
  const std::string dir = testing::TempPath(stem);
  const absl::Status written = runtime::testing::WriteRandomDenseModel(Phi3Config(kv_heads), dir, 7);
  EXPECT_TRUE(written.ok()) << written;
  fs::copy_file(testing::FixturePath("tinyllama-a/tokenizer.model"), fs::path(dir) / "tokenizer.model",
                fs::copy_options::overwrite_existing);
  return dir;
}

class Phi3QkvToOExactnessTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(Phi3QkvToOExactnessTest, RandomScalesKeepTheFloatLayerAndTouchOnlyTheVRows) {
  const int64_t kv_heads = GetParam();
  const checkpoint::ModelConfig config = Phi3Config(kv_heads);
  const std::string dir = RandomPhi3(kv_heads, "phi3vo_exact_" + std::to_string(kv_heads));
  auto model = Load(config, dir);
  auto layer = model->LoadLayer(1);
  ASSERT_TRUE(layer.ok()) << layer.status();
  at::Generator gen = at::detail::createCPUGenerator(11);
  const at::Tensor x = at::randn({1, 13, config.hidden_size}, gen, at::kFloat);
  const runtime::LayerContext& context = model->Context(13);
  const at::Tensor before = (*layer)->forward(x, context);
  const at::Tensor qkv_before = (*layer)->FindLinear("self_attn.qkv_proj")->weight().clone();
  ASSERT_TRUE(algorithms::CheckScalingPair(**layer, kQkvToO, "pair").ok());
  const int64_t q_rows = config.num_attention_heads * config.head_dim;
  const at::Tensor scales = at::rand({q_rows}, gen, at::kFloat) * 3 + 0.2;
  const absl::Status applied =
      algorithms::ApplyScaling(**layer, kQkvToO, scales, {config.num_attention_heads, config.num_key_value_heads});
  ASSERT_TRUE(applied.ok()) << applied;
  const at::Tensor after = (*layer)->forward(x, context);
  EXPECT_LT((after - before).abs().max().item<double>(), 1e-5 * before.abs().max().item<double>());
  // q and k rows untouched, every v row divided (by the per-KV-head max under grouped heads).
  const at::Tensor qkv = (*layer)->FindLinear("self_attn.qkv_proj")->weight();
  const int64_t kv_rows = kv_heads * config.head_dim;
  EXPECT_TRUE(at::equal(qkv.narrow(0, 0, q_rows + kv_rows), qkv_before.narrow(0, 0, q_rows + kv_rows)));
  const int64_t v_start = q_rows + kv_rows;
  const at::Tensor ratio = qkv_before.narrow(0, v_start, kv_rows).div(qkv.narrow(0, v_start, kv_rows));
  const at::Tensor expected = std::get<0>(
      scales.view({kv_heads, config.num_attention_heads / kv_heads, config.head_dim}).max(1)).reshape({-1, 1});
  EXPECT_TRUE(at::allclose(ratio, expected.expand_as(ratio), 1e-5, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(HeadsOverKvHeads, Phi3QkvToOExactnessTest, ::testing::Values(4, 2, 1),
                         [](const auto& info) { return "KvHeads" + std::to_string(info.param); });

TEST(Phi3QkvToORefusalTest, AnyOtherReaderOrShapeIsRefusedNamingTheField) {
  const checkpoint::ModelConfig config = Phi3Config(2);
  auto model = Load(config, RandomPhi3(2, "phi3vo_refuse"));
  auto layer = model->LoadLayer(0);
  ASSERT_TRUE(layer.ok()) << layer.status();
  const auto refused = [&](const ScalingLayer& pair) {
    return std::string(algorithms::CheckScalingPair(**layer, pair, "scaling_layers[1]").message());
  };
  EXPECT_THAT(refused({"self_attn.qkv_proj", {"mlp.gate_up_proj"}, "mlp.gate_up_proj", ""}),
              HasSubstr("scaling_layers[1].layers[0]: \"mlp.gate_up_proj\": \"self_attn.qkv_proj\" scales only into"));
  EXPECT_THAT(refused({"self_attn.qkv_proj", {"self_attn.o_proj", "mlp.down_proj"}, "self_attn.o_proj", ""}),
              HasSubstr("scaling_layers[1].layers[1]: \"mlp.down_proj\""));
  EXPECT_THAT(refused({"self_attn.qkv_proj", {"self_attn.o_proj"}, "mlp.down_proj", ""}),
              HasSubstr("scaling_layers[1].inp: \"mlp.down_proj\""));
  EXPECT_THAT(refused({"self_attn.qkv_proj", {"self_attn.o_proj"}, "self_attn.o_proj", "mlp"}),
              HasSubstr("scaling_layers[1].module2inspect: \"mlp\""));
  // Scales that do not fit the v rows with the given heads: refused, nothing changed.
  const at::Tensor qkv_before = (*layer)->FindLinear("self_attn.qkv_proj")->weight().clone();
  const at::Tensor ones = at::ones({config.hidden_size});
  EXPECT_FALSE(algorithms::ApplyScaling(**layer, kQkvToO, ones, {4, 4}).ok());
  EXPECT_FALSE(algorithms::ApplyScaling(**layer, kQkvToO, at::ones({config.hidden_size + 2}), {4, 2}).ok());
  EXPECT_TRUE(at::equal((*layer)->FindLinear("self_attn.qkv_proj")->weight(), qkv_before));
  // Up front, before any layer loads: the model-level check names algo_config[i].scaling_layers[j].layers[k].
  QuantizeModelOptions o;
  o.config = PresetConfig("uint4_wo_128").value();
  AwqAlgo awq;
  awq.scaling_layers = quantize::DefaultScalingLayers(config);
  awq.scaling_layers.push_back({"self_attn.qkv_proj", {"mlp.gate_up_proj"}, "mlp.gate_up_proj", ""});
  o.config.algo_config = {awq};
  o.calibration_file = testing::FixturePath("eval/tinystories_train_split.txt");
  o.num_calibration_samples = 1;
  o.seq_len = 16;
  auto r = QuantizeModel(RandomPhi3(2, "phi3vo_refuse_model"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("algo_config[0].scaling_layers[3].layers[0]: \"mlp.gate_up_proj\""));
}

TEST(Phi3QkvToOTemplateTest, ListedExactlyWhenTheAttentionIsSquare) {
  // Quark's (and AutoAWQ's) v -> o condition, as for Llama: v_proj's (here qkv_proj's v rows') shape equals
  // o_proj's; with grouped KV heads the pair is left to an explicit scaling_layers.
  const auto has_pair = [](const checkpoint::ModelConfig& config) {
    for (const ScalingLayer& pair : quantize::DefaultScalingLayers(config)) {
      if (pair.prev_op == kQkvToO.prev_op) return pair.layers == kQkvToO.layers && pair.inp == kQkvToO.inp;
    }
    return false;
  };
  EXPECT_TRUE(has_pair(Phi3Config(4)));
  EXPECT_FALSE(has_pair(Phi3Config(2)));
  EXPECT_EQ(quantize::DefaultScalingLayers(Phi3Config(4)).size(), 4u);
}

QuantizeModelOptions AwqOptions(std::vector<ScalingLayer> pairs, const std::string& out) {
  QuantizeModelOptions o;
  o.config = PresetConfig("uint4_wo_128").value();
  AwqAlgo awq;
  awq.scaling_layers = std::move(pairs);
  o.config.algo_config = {awq};
  o.calibration_file = testing::FixturePath("eval/tinystories_train_split.txt");
  o.num_calibration_samples = 4;
  o.seq_len = 128;
  o.eval_text_file = testing::FixturePath("eval/tinystories_heldout_split.txt");
  o.eval_seq_len = 128;
  o.eval_max_windows = 3;
  o.output_dir = testing::TempPath(out);
  return o;
}

TEST(Phi3QkvToOAwqTest, TheDefaultTemplateRunsThePairOnSquareAttentionAndExports) {
  // Random weights: the perplexity means nothing, the path does (4 pairs per layer, the vLLM check, the reload).
  const std::string dir = RandomPhi3(4, "phi3vo_mha");
  const QuantizeModelOptions options = AwqOptions({}, "phi3vo_mha_awq");
  auto r = QuantizeModel(dir, options);
  ASSERT_TRUE(r.ok()) << r.status();
  int qkv_pairs = 0;
  for (const auto& line : r->algorithm_log) {
    qkv_pairs += line.rfind("awq self_attn.qkv_proj -> self_attn.o_proj", 0) == 0;
  }
  EXPECT_EQ(qkv_pairs, 2);
  EXPECT_EQ(r->algorithm_log.size(), 8u);
  EXPECT_TRUE(exporter::CheckHfQuarkExport(options.output_dir).ok());
  EXPECT_NEAR(r->metrics.at("ppl_after"), r->metrics.at("ppl_reloaded"), 1e-4 * r->metrics.at("ppl_after"));
}

// tinyllama-a as phi3: with square attention (each KV head repeated per query head: the same function, Phi-3-mini's
// shape) the template lists qkv -> o, and "without" is the template less it; as trained (8 heads over 4 KV heads)
// the template leaves it out (Quark's and AutoAWQ's GQA rule), and "with" is the template plus the pair given
// explicitly.
class Phi3QkvToOTransplantTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    square_ = GetParam();
    dir_ = testing::TempPath(square_ ? "phi3vo_transplant_mha" : "phi3vo_transplant_gqa");
    const absl::Status status =
        runtime::testing::TransplantTinyLlama(testing::FixturePath("tinyllama-a"), "phi3", dir_, square_);
    ASSERT_TRUE(status.ok()) << status;
    config_ = checkpoint::LoadModelConfig(dir_).value();
    with_ = quantize::DefaultScalingLayers(config_);
    ASSERT_EQ(with_.size(), square_ ? 4u : 3u);
    if (!square_) with_.insert(with_.begin() + 1, kQkvToO);
    ASSERT_EQ(with_[1].prev_op, kQkvToO.prev_op);
    without_ = with_;
    without_.erase(without_.begin() + 1);
  }
  const char* Shape() const { return square_ ? "8 KV heads (repeated)" : "4 KV heads"; }
  bool square_ = false;
  std::string dir_;
  checkpoint::ModelConfig config_;
  std::vector<ScalingLayer> with_, without_;
};

// Layer 0's squared output error on held-out inputs after AWQ and uint4 g128 rounding of every linear.
TEST_P(Phi3QkvToOTransplantTest, AwqWithThePairAndTheLayerOutputError) {
  auto model = Load(config_, dir_);
  const auto embed = [&](int64_t seed, int64_t count) {
    std::vector<at::Tensor> out;
    at::Generator gen = at::detail::createCPUGenerator(seed);
    for (int64_t i = 0; i < count; ++i) {
      out.push_back(model->Embed(at::randint(3, config_.vocab_size, {1, 64}, gen, at::kLong)).value());
    }
    return out;
  };
  const std::vector<at::Tensor> calibration = embed(1, 6), held_out = embed(2, 3);
  const QuantSpec spec = *PresetConfig("uint4_wo_128").value().global_quant_config.weight;
  const auto error_after_awq = [&](const std::vector<ScalingLayer>& pairs) {
    return testing::AwqLayerZeroHeldOutError(*model, pairs, spec, calibration, held_out,
                                             {config_.num_attention_heads, config_.num_key_value_heads});
  };
  const double with_error = error_after_awq(with_);
  const double without_error = error_after_awq(without_);
  std::cout << "phi3 transplant, " << Shape() << ": layer 0 squared output error after AWQ + uint4 g128: without "
            << "qkv -> o " << without_error << ", with it " << with_error << "\n";
  // Square attention: the search sees what is applied, so the pair must help. Under grouped heads the scale applied
  // is the max over each KV head's query heads, not the one the search chose: reported, not asserted.
  if (square_) EXPECT_LT(with_error, without_error);
}

TEST_P(Phi3QkvToOTransplantTest, AwqWithThePairExportsAndReloads) {
  // The square template given as {} (resolved to the default), the grouped one explicitly.
  const QuantizeModelOptions with_options =
      AwqOptions(square_ ? std::vector<ScalingLayer>{} : with_, "phi3vo_awq_with");
  auto with = QuantizeModel(dir_, with_options);
  ASSERT_TRUE(with.ok()) << with.status();
  auto without = QuantizeModel(dir_, AwqOptions(without_, "phi3vo_awq_without"));
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(with->algorithm_log.size(), 16u);
  EXPECT_TRUE(exporter::CheckHfQuarkExport(with_options.output_dir).ok());
  EXPECT_NEAR(with->metrics.at("ppl_after"), with->metrics.at("ppl_reloaded"), 1e-4 * with->metrics.at("ppl_after"));
  // Perplexity on 3 x 128 held-out tokens moves by noise either way: reported, not asserted.
  std::cout << "phi3 (tinyllama-a transplant, " << Shape() << ") AWQ uint4 g128: float "
            << with->metrics.at("ppl_before")
            << ", without qkv -> o " << without->metrics.at("ppl_after") << ", with it "
            << with->metrics.at("ppl_after") << "\n";
}

// SmoothQuant with the pair (the square template; the grouped one plus the pair): with every linear excluded only
// the scales move, so the model must compute what it computed (a v row left unscaled, a q/k row scaled, or a grouped
// scale not reduced per KV head would show); W8A8 static with and without the pair exports, reloads, stays near float.
TEST_P(Phi3QkvToOTransplantTest, SmoothQuantKeepsTheFloatModelAndExports) {
  SmoothQuantAlgo smooth;
  smooth.alpha = 0.5f;
  smooth.scaling_layers = with_;
  QuantizeModelOptions exact = AwqOptions({}, "");
  exact.config = PresetConfig("w_int8_a_int8_per_tensor_sym").value();
  exact.config.algo_config = {smooth};
  exact.config.exclude = {"*"};
  exact.output_dir.clear();
  auto r = QuantizeModel(dir_, exact);
  ASSERT_TRUE(r.ok()) << r.status();
  int qkv_pairs = 0;
  for (const auto& line : r->algorithm_log) qkv_pairs += line.rfind("smooth self_attn.qkv_proj -> ", 0) == 0;
  EXPECT_EQ(qkv_pairs, config_.num_hidden_layers);
  EXPECT_NEAR(r->metrics.at("ppl_after"), r->metrics.at("ppl_before"), 1e-5 * r->metrics.at("ppl_before"));
  std::map<std::string, double> ppl;
  for (const bool with_pair : {true, false}) {
    smooth.scaling_layers = with_pair ? with_ : without_;
    QuantizeModelOptions o = AwqOptions({}, with_pair ? "phi3vo_sq_with" : "phi3vo_sq_without");
    o.config = PresetConfig("w_int8_a_int8_per_tensor_sym").value();
    o.config.algo_config = {smooth};
    auto w8a8 = QuantizeModel(dir_, o);
    ASSERT_TRUE(w8a8.ok()) << w8a8.status();
    EXPECT_TRUE(exporter::CheckHfQuarkExport(o.output_dir).ok());
    EXPECT_NEAR(w8a8->metrics.at("ppl_after"), w8a8->metrics.at("ppl_reloaded"), 1e-4 * w8a8->metrics.at("ppl_after"));
    EXPECT_LT(w8a8->metrics.at("ppl_after"), 1.2 * w8a8->metrics.at("ppl_before"));
    ppl[with_pair ? "with" : "without"] = w8a8->metrics.at("ppl_after");
  }
  std::cout << "phi3 (tinyllama-a transplant, " << Shape() << ") SmoothQuant alpha 0.5 W8A8 static: float "
            << r->metrics.at("ppl_before") << ", without qkv -> o " << ppl["without"] << ", with it " << ppl["with"]
            << "\n";
}

INSTANTIATE_TEST_SUITE_P(Attention, Phi3QkvToOTransplantTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Square" : "GroupedKv"; });

}  // namespace
}  // namespace quark
