// K-quant-aware GPTQ (#37 item 4): the fixed super-block grid against ggml's quantizer, GPTQ's blocks decoded by the
// real ggml (node-llama-cpp's libggml-base, dlopened; a missing library fails under CI=true) to exactly its output
// weights, and its output error on a real tinyllama-a layer's calibration inputs against plain K-quants.
#include "core/algorithms/gptq_kquant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/algorithms/hessian.h"
#include "core/checkpoint/model_config.h"
#include "core/export/gguf_kquant_grid.h"
#include "core/export/gguf_kquants.h"
#include "core/export/gguf_mixture.h"
#include "core/export/gguf_pre_encoded.h"
#include "core/quantize/calibration_input.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/linear.h"
#include "core/runtime/tokenizer.h"
#include "tests/export/gguf_llama_cpp.h"
#include "tests/export/gguf_test_util.h"
#include "tests/quantize/test_model.h"
#include "tests/support/require_peer.h"

namespace quark::algorithms {
namespace {

using exporter::gguf::GgmlType;
using exporter::gguf::kQkK;

const GgmlType kGridTypes[] = {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

const char* Name(GgmlType type) { return exporter::gguf::FindType(type)->name; }

at::Tensor RandomWeight(int64_t n, int64_t k, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return at::randn({n, k}, gen, at::kFloat) * 0.05;
}

// Log-normal importance weights, as an imatrix's column means of x² look.
at::Tensor RandomQuantWeights(int64_t k, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return at::exp(at::randn({k}, gen, at::kFloat));
}

// ggml's quantize_<t> of the rows (the importance weights or none).
std::vector<uint8_t> GgmlBlocks(const testing::LlamaCpp& l, GgmlType type, const at::Tensor& w, const at::Tensor& qw) {
  const int64_t n = w.size(0), k = w.size(1);
  std::vector<uint8_t> out(static_cast<size_t>(n * exporter::gguf::RowBytes(type, k)));
  l.kquants.at(static_cast<int>(type))
      .quantize(w.data_ptr<float>(), out.data(), n, k, qw.defined() ? qw.data_ptr<float>() : nullptr);
  return out;
}

at::Tensor GgmlDecode(const testing::LlamaCpp& l, GgmlType type, const std::vector<uint8_t>& blocks, int64_t n,
                      int64_t k) {
  at::Tensor out = at::empty({n, k}, at::kFloat);
  l.kquants.at(static_cast<int>(type)).dequantize_row(blocks.data(), out.data_ptr<float>(), n * k);
  return out;
}

#define LLAMA_CPP_OR_RETURN(l)                                  \
  std::string why_##l;                                          \
  const testing::LlamaCpp* l = testing::LoadLlamaCpp(&why_##l); \
  if (l == nullptr) {                                           \
    QUARK_PEER_MISSING() << why_##l;                            \
  }

// Searching a super-block and rounding every value of it onto the grid, unchanged, is ggml's quantizer: the same
// bytes, with and without an importance matrix, and the values returned are ggml's decoding of them.
TEST(KQuantGridTest, RoundingUnchangedValuesIsGgmlsQuantizer) {
  LLAMA_CPP_OR_RETURN(l);
  const at::Tensor w = RandomWeight(7, 3 * kQkK, 3);
  const at::Tensor qw = RandomQuantWeights(3 * kQkK, 4);
  for (GgmlType type : kGridTypes) {
    for (const at::Tensor& weights : {at::Tensor(), qw}) {
      const exporter::gguf::KQuantGrid grid(type);
      const int64_t block_bytes = exporter::gguf::RowBytes(type, kQkK);
      std::vector<uint8_t> ours(static_cast<size_t>(w.numel() / kQkK * block_bytes));
      at::Tensor values = at::empty_like(w);
      const float* x = w.data_ptr<float>();
      for (int64_t b = 0; b < w.numel() / kQkK; ++b) {
        uint8_t* block = ours.data() + b * block_bytes;
        const float* q = weights.defined() ? weights.data_ptr<float>() + (b % 3) * kQkK : nullptr;
        grid.Search(x + b * kQkK, q, block);
        for (int j = 0; j < kQkK; ++j) grid.RoundInto(block, j, 1e6f);  // stale codes, which rounding must replace
        for (int j = 0; j < kQkK; ++j)
          values.data_ptr<float>()[b * kQkK + j] = grid.RoundInto(block, j, x[b * kQkK + j]);
      }
      const std::string label = std::string(Name(type)) + (weights.defined() ? " imatrix" : " reference");
      EXPECT_EQ(ours, GgmlBlocks(*l, type, w, weights)) << label;
      EXPECT_TRUE(at::equal(values, GgmlDecode(*l, type, ours, w.size(0), w.size(1)))) << label;
    }
  }
}

// The GPTQ run's blocks are its weights, bit for bit, as ggml decodes them; on random weights and Hessians.
TEST(GptqKQuantTest, BlocksDecodeToTheGptqWeightsInGgml) {
  LLAMA_CPP_OR_RETURN(l);
  at::Generator gen = at::detail::createCPUGenerator(9);
  const at::Tensor x = at::randn({600, 2 * kQkK}, gen, at::kFloat);
  const at::Tensor w = RandomWeight(33, 2 * kQkK, 10);
  for (GgmlType type : kGridTypes) {
    for (const at::Tensor& qw : {at::Tensor(), (x * x).mean(0)}) {
      auto factor = GptqFactorOf(2 * x.t().matmul(x) / x.size(0), GptqOptions{});
      ASSERT_TRUE(factor.ok()) << factor.status();
      auto result = GptqKQuantizeWeight(w, *factor, type, qw);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_TRUE(at::equal(result->weight, GgmlDecode(*l, type, result->blocks, w.size(0), w.size(1)))) << Name(type);
      EXPECT_FALSE(at::equal(result->weight, GgmlDecode(*l, type, GgmlBlocks(*l, type, w, qw), 33, 2 * kQkK)))
          << Name(type) << ": GPTQ changed nothing";
    }
  }
}

// Records a linear's inputs and passes them on.
class RecordingLinear : public runtime::LinearLike {
 public:
  explicit RecordingLinear(std::shared_ptr<runtime::LinearLike> inner) : inner_(std::move(inner)) {}
  at::Tensor forward(const at::Tensor& input) override {
    inputs.push_back(input.reshape({-1, input.size(-1)}).clone());
    return inner_->forward(input);
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  at::Tensor weight() const override { return inner_->weight(); }
  at::Tensor bias() const override { return inner_->bias(); }
  std::vector<at::Tensor> inputs;

 private:
  std::shared_ptr<runtime::LinearLike> inner_;
};

// Layer 0's linear inputs on calibration text (the TinyStories training split, as the accuracy scripts use).
std::map<std::string, at::Tensor> Layer0Inputs(const std::vector<std::string>& names) {
  const std::string dir = testing::FixturePath("tinyllama-a");
  auto streamer = runtime::LayerStreamer::Open(dir);
  EXPECT_TRUE(streamer.ok()) << streamer.status();
  runtime::TransformerModel& model = (*streamer)->model();
  auto tokenizer = runtime::Tokenizer::Open(dir, model.config().bos_token_id, model.config().eos_token_id);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto samples = quantize::LoadCalibrationSamples(testing::FixturePath("eval/tinystories_train_split.txt"),
                                                  model.config(), tokenizer->get(), 16, 128, 0);
  EXPECT_TRUE(samples.ok()) << samples.status();
  auto layer = model.LoadLayer(0);
  EXPECT_TRUE(layer.ok()) << layer.status();
  std::map<std::string, std::shared_ptr<RecordingLinear>> recorders;
  for (const std::string& name : names) {
    recorders[name] = std::make_shared<RecordingLinear>((*layer)->FindLinear(name));
    EXPECT_TRUE((*layer)->ReplaceLinear(name, recorders[name]).ok()) << name;
  }
  for (const at::Tensor& ids : *samples) {
    const at::Tensor hidden = model.Embed(ids).value();
    (*layer)->forward(hidden, model.Context(hidden.size(1)));
  }
  std::map<std::string, at::Tensor> inputs;
  for (const auto& [name, recorder] : recorders) inputs[name] = at::cat(recorder->inputs, 0);
  return inputs;
}

// On tinyllama-a's layer 0 (q_proj: one super-block per row; down_proj: three), GPTQ-K's output error on the
// calibration inputs, sum ‖X (W − Q)ᵀ‖², is below plain K-quant's of the same type, with and without an imatrix.
TEST(GptqKQuantTest, LayerOutputErrorBelowPlainKQuantsOnTinyLlama) {
  LLAMA_CPP_OR_RETURN(l);
  const std::map<std::string, at::Tensor> inputs = Layer0Inputs({"self_attn.q_proj", "mlp.down_proj"});
  auto streamer = runtime::LayerStreamer::Open(testing::FixturePath("tinyllama-a"));
  ASSERT_TRUE(streamer.ok());
  auto layer = (*streamer)->model().LoadLayer(0);
  ASSERT_TRUE(layer.ok());
  for (const auto& [name, x] : inputs) {
    const at::Tensor w = (*layer)->FindLinear(name)->weight().to(at::kFloat).contiguous();
    const auto output_error = [&](const at::Tensor& q) { return x.matmul((w - q).t()).pow(2).sum().item<double>(); };
    HessianAccumulator hessian(x.size(1));
    ASSERT_TRUE(hessian.Add(x).ok());
    auto h = std::move(hessian).Finish();
    ASSERT_TRUE(h.ok()) << h.status();
    auto factor = GptqFactorOf(*h, GptqOptions{});
    ASSERT_TRUE(factor.ok()) << factor.status();
    for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      for (const at::Tensor& qw : {at::Tensor(), (x * x).mean(0)}) {
        auto gptq = GptqKQuantizeWeight(w, *factor, type, qw);
        ASSERT_TRUE(gptq.ok()) << gptq.status();
        const double plain = output_error(GgmlDecode(*l, type, GgmlBlocks(*l, type, w, qw), w.size(0), w.size(1)));
        const double ours = output_error(gptq->weight);
        const std::string label = name + " " + Name(type) + (qw.defined() ? " imatrix" : "");
        EXPECT_LT(ours, plain) << label;
        std::printf("%s: output error plain %.6g, GPTQ-K %.6g (%.3f)\n", label.c_str(), plain, ours, ours / plain);
      }
    }
  }
}

// The writer takes pre-encoded blocks only as what they claim to be: in the planned type, decoding to exactly the
// tensor's values (here the checkpoint's float weights, which GPTQ-K's blocks of another Hessian do not decode to).
TEST(GptqKQuantTest, TheWriterRefusesBlocksOfAnotherTypeOrOtherValues) {
  const std::string model = testing::FixturePath("tinyllama-a");
  const std::string name = "model.layers.0.self_attn.q_proj.weight";  // Q4_K in Q4_K_M
  auto streamer = runtime::LayerStreamer::Open(model);
  ASSERT_TRUE(streamer.ok());
  const at::Tensor w = (*streamer)->model().LoadLayer(0).value()->FindLinear("self_attn.q_proj")->weight();
  at::Generator gen = at::detail::createCPUGenerator(5);
  const at::Tensor x = at::randn({512, w.size(1)}, gen, at::kFloat);
  auto factor = GptqFactorOf(x.t().matmul(x), GptqOptions{});
  ASSERT_TRUE(factor.ok());
  for (GgmlType type : {GgmlType::kQ6_K, GgmlType::kQ4_K}) {
    auto gptq = GptqKQuantizeWeight(w, *factor, type, {});
    ASSERT_TRUE(gptq.ok()) << gptq.status();
    testing::GgufTestExport job;
    job.model_dir = model;
    job.output_file = testing::TempPath("kquant_pre_encoded") + ".gguf";
    job.options.file_type = exporter::gguf::ParseFileType("Q4_K_M").value();
    job.options.pre_encoded = std::make_shared<exporter::gguf::PreEncodedTensors>();
    job.options.pre_encoded->Put(name, {type, w.size(0), w.size(1), gptq->blocks});
    auto written = testing::ExportGguf(job);
    EXPECT_EQ(written.status().code(), absl::StatusCode::kInternal) << Name(type);
    const std::string expected = type == GgmlType::kQ6_K ? name + ": pre-encoded as Q6_K [256, 256], planned Q4_K"
                                                         : name + ": the pre-encoded Q4_K blocks do not decode";
    EXPECT_NE(written.status().message().find(expected), std::string::npos) << written.status();
  }
}

TEST(GptqKQuantTest, RefusalsNameTheField) {
  const at::Tensor w = RandomWeight(4, kQkK, 1);
  auto factor = GptqFactorOf(at::eye(kQkK), GptqOptions{});
  ASSERT_TRUE(factor.ok());
  const auto message = [&](const at::Tensor& weight, const GptqFactor& f, GgmlType type, const at::Tensor& qw) {
    auto result = GptqKQuantizeWeight(weight, f, type, qw);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(result.status().message());
  };
  EXPECT_NE(message(w, *factor, GgmlType::kQ4_0, {}).find("type: Q4_0"), std::string::npos);
  EXPECT_NE(message(w, *factor, GgmlType::kQ3_K, {}).find("type: Q3_K"), std::string::npos);
  auto small = GptqFactorOf(at::eye(300), GptqOptions{});
  ASSERT_TRUE(small.ok());
  EXPECT_NE(message(RandomWeight(4, 300, 1), *small, GgmlType::kQ4_K, {}).find("weight: [4, 300] has 300 columns"),
            std::string::npos);
  EXPECT_NE(message(w, *small, GgmlType::kQ4_K, {}).find("hessian: expected [256, 256]"), std::string::npos);
  GptqOptions act_order;
  act_order.act_order = true;
  auto ordered = GptqFactorOf(at::eye(kQkK), act_order);
  ASSERT_TRUE(ordered.ok());
  EXPECT_NE(message(w, *ordered, GgmlType::kQ4_K, {}).find("desc_act"), std::string::npos);
  EXPECT_NE(message(w, *factor, GgmlType::kQ4_K, at::ones({100})).find("quant_weights: expected [256]"),
            std::string::npos);
}

}  // namespace
}  // namespace quark::algorithms
