// AWQ's trials side by side (#27 item 2, core/algorithms/search_batch.h): a stacked linear computes each trial as its
// own FloatLinear does, the batched ratio grid and clip search choose what the one-at-a-time searches choose, the
// layer gets its float linears back, and the batch sizes follow the memory allowance.
#include "core/algorithms/search_batch.h"

#include <gtest/gtest.h>

#include "core/algorithms/smoothing.h"
#include "core/numerics/fake_quant.h"
#include "core/quantize/pass_memory.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/matmul_precision.h"
#include "core/runtime/synthetic_model.h"
#include "tests/algorithms/blas_kernels.h"
#include "tests/algorithms/gptq_test_specs.h"
#include "tests/algorithms/synthetic_layer_fixture.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/test_model.h"
#include "tests/runtime/dense_arch_models.h"

namespace quark::algorithms {
namespace {

QuantSpec Uint4Group(int group) { return testing::IntSpec(DType::kUInt4, /*symmetric=*/false, group); }

// The fraction of elements of a that equal b's bit for bit (what the tolerances below leave room for).
double EqualFraction(const at::Tensor& a, const at::Tensor& b) {
  return a.eq(b).to(at::kDouble).mean().item<double>();
}

// The clip search's errors, in float64, of every shrink factor i < `shrinks` (the weight clamped to org_max (1 - i /
// 20) and quantized as the search does, by blocks of output channels) for each (output channel, group of columns): [shrinks, out,
// groups], the mean over the tokens of (x (w - q))^2; and `clip` [out, groups]'s factors' errors among them. A choice
// whose error equals another's here is a tie of the search's own float32 sums (near ties included).
at::Tensor ChosenClipErrors(const at::Tensor& w, const at::Tensor& x, const at::Tensor& clip, const QuantSpec& spec,
                            const WeightQdq& qdq, int shrinks) {
  const int64_t out = w.size(0), in = w.size(1), groups = clip.size(1), group = in / groups;
  const int64_t block = out % 256 == 0 ? 256 : 64;  // Quark's output-channel batches
  const at::Tensor wg = w.view({out, groups, group});
  const at::Tensor org_max = std::get<0>(wg.abs().max(-1, true));
  const at::Tensor xg = x.to(at::kDouble).view({-1, groups, group});
  std::vector<at::Tensor> errors, values;
  for (int i = 0; i < shrinks; ++i) {
    const at::Tensor max_val = org_max * (1.0 - static_cast<double>(i) / 20);
    const at::Tensor clamped = at::max(at::min(wg, max_val), -max_val).reshape({out, in});
    std::vector<at::Tensor> blocks;  // quantized a block of output channels at a time, as the search does
    for (int64_t start = 0; start < out; start += block) {
      const absl::StatusOr<at::Tensor> q = PseudoQuantizeWeight(clamped.slice(0, start, start + block), spec, qdq);
      EXPECT_TRUE(q.ok()) << q.status();
      blocks.push_back(*q);
    }
    const at::Tensor diff = (w - at::cat(blocks)).to(at::kDouble).view({out, groups, group});
    // [tokens, groups, group] x [out, groups, group] -> [out, tokens, groups], squared, averaged over the tokens
    errors.push_back(at::einsum("tgc,ogc->otg", {xg, diff}).pow(2).mean(1));
    values.push_back(max_val.squeeze(-1));
  }
  const at::Tensor matches = at::stack(values).eq(clip.unsqueeze(0));  // [shrinks, out, groups]
  EXPECT_TRUE(matches.any(0).all().item<bool>()) << "a clip value is none of the factors'";
  const at::Tensor factor = matches.to(at::kByte).argmax(0, /*keepdim=*/true);
  return at::stack(errors).gather(0, factor).squeeze(0);
}

TEST(StackedTrialLinearTest, ComputesEachTrialAsItsOwnFloatLinear) {
  at::manual_seed(3);
  const int64_t n = 3, out = 24, in = 40, rows = 17;
  const at::Tensor weights = at::randn({n, out, in});
  const at::Tensor bias = at::randn({out});
  const at::Tensor x = at::randn({1, rows, in});
  const at::Tensor other = at::randn({n, rows, in});  // a different input per trial: the batched product
  for (const bool with_bias : {true, false}) {
    StackedTrialLinear stacked(weights, with_bias ? bias : at::Tensor());
    const at::Tensor shared = stacked.forward(x.expand({n, rows, in}));
    const at::Tensor each = stacked.forward(other);
    ASSERT_EQ(shared.sizes(), (std::vector<int64_t>{n, rows, out}));
    ASSERT_TRUE(shared.is_contiguous());
    for (int64_t g = 0; g < n; ++g) {
      runtime::FloatLinear linear(weights[g], with_bias ? bias : at::Tensor());
      const at::Tensor expected = linear.forward(x)[0];
      // The CPU's batched product is one GEMM a batch row: the trial's own product, bit for bit.
      EXPECT_TRUE(at::equal(shared[g], expected)) << g << " " << (shared[g] - expected).abs().max();
      EXPECT_TRUE(at::equal(each[g], linear.forward(other.slice(0, g, g + 1))[0])) << g;
    }
  }
}

TEST(StackedTrialLinearTest, Bf16ComputesInFloat32WhereFloatLinearDoes) {
  runtime::SetBf16MatmulForTest(runtime::Bf16Matmul::kFloat32);
  at::manual_seed(4);
  const at::Tensor weights = at::randn({2, 16, 32}).to(at::kBFloat16);
  const at::Tensor x = at::randn({1, 9, 32}).to(at::kBFloat16);
  StackedTrialLinear stacked(weights, at::Tensor());
  const at::Tensor y = stacked.forward(x.expand({2, 9, 32}));
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  for (int64_t g = 0; g < 2; ++g) {
    runtime::FloatLinear linear(weights[g], at::Tensor());
    EXPECT_TRUE(at::equal(y[g], linear.forward(x)[0])) << g;
  }
  runtime::SetBf16MatmulForTest(std::nullopt);
}

TEST(SearchBatchTest, BatchSizesFollowTheAllowance) {
  EXPECT_EQ(TrialsPerBatch(0, 100, 20), 1);
  EXPECT_EQ(TrialsPerBatch(99, 100, 20), 1);
  EXPECT_EQ(TrialsPerBatch(700, 100, 20), 7);
  EXPECT_EQ(TrialsPerBatch(int64_t{1} << 40, 100, 20), 20);
  EXPECT_EQ(TrialsPerBatch(1000, 100, 1), 1);

  QuantSpec per_tensor = testing::Int8PerTensor();
  EXPECT_FALSE(RowLocalQuantization(per_tensor, false));
  EXPECT_TRUE(RowLocalQuantization(Uint4Group(32), false));
  EXPECT_FALSE(RowLocalQuantization(Uint4Group(32), true));  // another quantizer: not known to be row-local
  QuantSpec channel = per_tensor;
  channel.qscheme = QScheme::kPerChannel;
  EXPECT_TRUE(RowLocalQuantization(channel, false));
  channel.ch_axis = 1;
  EXPECT_FALSE(RowLocalQuantization(channel, false));
  QuantSpec nvfp4 = Uint4Group(16);
  nvfp4.scale_format = ScaleFormat::kE4M3;  // a global scale over the whole tensor
  EXPECT_FALSE(RowLocalQuantization(nvfp4, false));

  // -1: by the device; below that refused, naming the field.
  EXPECT_EQ(quantize::SearchBatchBytes(-1, at::Device(at::kCPU)).value(), checkpoint::kCpuSearchBatchBytes);
  EXPECT_EQ(quantize::SearchBatchBytes(-1, at::Device(at::kCUDA, 0)).value(), checkpoint::kGpuSearchBatchBytes);
  EXPECT_EQ(quantize::SearchBatchBytes(0, at::Device(at::kCUDA, 0)).value(), 0);
  EXPECT_EQ(quantize::SearchBatchBytes(12345, at::Device(at::kCUDA, 0)).value(), 12345);
  const auto refused = quantize::SearchBatchBytes(-2, at::Device(at::kCPU));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("search_batch_bytes"), std::string::npos);
}

// The clip search with every shrink factor of a block in one batch, and in batches of 3 (a tail of 1), against one at
// a time: stacked quantization (uint4 groups), per-factor quantization (int8 per tensor; another quantizer), and a
// zero row (every factor ties: the first wins).
TEST(SearchBatchTest, BatchedClipSearchChoosesWhatTheLoopChooses) {
  const ::testing::AssertionResult bits = testing::BitForBitBlasKernels(testing::Verified::kAvx512);
  if (!bits) std::cout << "near ties may fall either way: " << bits.message() << "\n";
  at::manual_seed(11);
  at::Tensor w = at::randn({320, 128});
  w.index_put_({7}, 0.0);
  const at::Tensor x = at::randn({700, 128});
  const WeightQdq qdq = [](const at::Tensor& t) -> absl::StatusOr<at::Tensor> {
    // A row-local rounding to a grid of 1/8 (the K-quant quantizers' place in the search).
    return (t * 8).round() / 8;
  };
  struct Case {
    const char* name;
    QuantSpec spec;
    WeightQdq qdq;
  };
  for (const Case& c : {Case{"uint4 g32", Uint4Group(32), {}}, Case{"int8 per tensor", testing::Int8PerTensor(), {}},
                        Case{"qdq", Uint4Group(32), qdq}}) {
    AwqOptions options;
    auto loop = AwqBestClip(w, x, c.spec, options, c.qdq);
    ASSERT_TRUE(loop.ok()) << loop.status();
    // 320 output channels: blocks of 64 (Quark's, where 256 does not divide); 700 tokens, all sampled (700 / 512 = 1).
    // All 10 factors in one batch, and 3 a batch (3, 3, 3, 1).
    for (const int64_t batch_bytes : {int64_t{1} << 40, 3 * ClipShrinkBytes(64, 128, 4, 700, 4)}) {
      options.search_batch_bytes = batch_bytes;
      auto batched = AwqBestClip(w, x, c.spec, options, c.qdq);
      ASSERT_TRUE(batched.ok()) << batched.status();
      ASSERT_EQ(batched->sizes(), loop->sizes());
      const double equal = EqualFraction(*batched, *loop);
      std::cout << c.name << ", " << batch_bytes << " bytes: clip values equal to the loop's " << equal << "\n";
      // Each value is org_max * (1 - i / 20) for the chosen i: equal choices are equal values. The errors are summed
      // in other shapes, so a near tie may fall the other way: not one did in these cases on OpenBLAS's AVX-512
      // kernels. On its AVX2 ones (Haswell, Zen) a product's bits depend on its place in the GEMM and on the
      // threads (blas_kernels.h): 0.4% of the qdq case's values fell the other way single-threaded, 1.3% on two
      // threads (QUARK_THREADS=2), each a factor whose quantized weights are the loop's choice's (an exact tie the
      // loop gives to the first: their float64 errors were equal). There every other choice must be a tie: its
      // error within float32's summing error of the loop's (a neighbouring factor's is 2 to 5 times it here).
      if (bits) {
        EXPECT_EQ(equal, 1.0) << c.name;
      } else {
        const at::Tensor loop_error = ChosenClipErrors(w, x, *loop, c.spec, c.qdq, 10);
        const at::Tensor batched_error = ChosenClipErrors(w, x, *batched, c.spec, c.qdq, 10);
        const double worst_other = ((batched_error - loop_error).abs() / loop_error.clamp_min(1e-30))
                                       .masked_fill(batched->eq(*loop), 0.0).max().item<double>();
        std::cout << c.name << ": the largest relative error difference of another choice " << worst_other << "\n";
        EXPECT_LE(worst_other, 1e-5) << c.name << ": a choice other than the loop's is not a tie";
      }
    }
    EXPECT_EQ(loop->index({7}).abs().max().item<float>(), 0.0f);
  }
}

class AwqSearchBatchTest : public ::testing::Test, protected quark::testing::SyntheticLlamaLayer {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenSyntheticLlama(/*seed=*/5, /*count=*/3, [](int i) { return 20 + 3 * i; }));
  }

  // AWQ on layer 0 with `batch_bytes`: its results and the layer's tensors after it.
  std::pair<std::vector<ScalingResult>, std::map<std::string, at::Tensor>> Run(int64_t batch_bytes,
                                                                                const QuantSpec& spec) {
    const std::shared_ptr<runtime::DecoderLayer> loaded = Layer();
    runtime::DecoderLayer& layer = *loaded;
    ScalingInputs in;
    in.samples = &samples_;
    in.run = [this, &layer](const at::Tensor& x) { return Forward(layer, x); };
    in.context = [this](int64_t t) -> const runtime::LayerContext& { return Context(t); };
    in.heads = {4, 2};
    LayerQuantSpecs specs;
    for (const auto& l : layer.NamedLinears()) specs[l.relative_name] = {spec, std::nullopt};
    const std::vector<ScalingLayer> pairs = {
        {"input_layernorm", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}, "self_attn.q_proj",
         "self_attn"},
        {"self_attn.v_proj", {"self_attn.o_proj"}, "self_attn.o_proj", ""},
        {"post_attention_layernorm", {"mlp.gate_proj", "mlp.up_proj"}, "mlp.gate_proj", "mlp"},
        {"mlp.up_proj", {"mlp.down_proj"}, "mlp.down_proj", ""}};
    AwqOptions options;
    options.search_batch_bytes = batch_bytes;
    std::vector<at::Tensor> outputs;
    auto results = AwqLayer(layer, in, pairs, specs, options, &outputs);
    EXPECT_TRUE(results.ok()) << results.status();
    // The trials' stacked linears are gone: every linear is a float linear again.
    for (const auto& l : layer.NamedLinears()) {
      EXPECT_NE(std::dynamic_pointer_cast<runtime::FloatLinear>(l.linear), nullptr) << l.relative_name;
    }
    return {results.ok() ? *results : std::vector<ScalingResult>{}, LayerTensors(layer)};
  }
};

// Every batch size (the whole grid in one batch, batches of a few with a shorter last one) chooses the loop's ratios
// and so leaves the layer with the loop's weights.
TEST_F(AwqSearchBatchTest, BatchedGridChoosesTheLoopsRatios) {
  for (const QuantSpec& spec : {Uint4Group(32), testing::Int8PerTensor()}) {
    const auto [loop, loop_tensors] = Run(0, spec);
    ASSERT_EQ(loop.size(), 4u);
    // A trial (hidden 64, intermediate 128, up to 26 tokens) is 0.07-0.2 MB in float32: 1 MiB holds 5-14.
    for (const int64_t batch_bytes : {int64_t{1} << 40, int64_t{1} << 20}) {
      const auto [batched, tensors] = Run(batch_bytes, spec);
      ASSERT_EQ(batched.size(), loop.size());
      int most_batches = 0;
      for (size_t i = 0; i < loop.size(); ++i) {
        EXPECT_EQ(loop[i].trial_batches, 0);
        if (batch_bytes == int64_t{1} << 40) EXPECT_EQ(batched[i].trial_batches, 1) << loop[i].pair.prev_op;
        EXPECT_GE(batched[i].trial_batches, 1) << loop[i].pair.prev_op;
        most_batches = std::max(most_batches, batched[i].trial_batches);
        EXPECT_EQ(batched[i].ratio, loop[i].ratio) << loop[i].pair.prev_op << " at " << batch_bytes;
        EXPECT_TRUE(at::equal(batched[i].scales, loop[i].scales)) << loop[i].pair.prev_op;
      }
      // 1 MiB: several batches a pair, the last shorter where the batch does not divide 20 (self_attn: 7, 7, 6).
      if (batch_bytes == int64_t{1} << 20) EXPECT_GE(most_batches, 3);
      for (const auto& [name, tensor] : loop_tensors) {
        const double equal = EqualFraction(tensors.at(name), tensor);
        EXPECT_EQ(equal, 1.0) << name << " at " << batch_bytes;
      }
    }
  }
}

// Through QuantizeModel, on the layouts whose modules the batched grid runs: the Llama family with grouped KV heads,
// OPT (biased q/k/v, out_proj, fc1/fc2), Phi-3 (fused qkv_proj and gate_up_proj), and bf16 compute. Every exported
// byte and perplexity of a batched run is the one-at-a-time run's.
struct PipelineCase {
  std::string name;
  std::string preset;
  std::string compute_dtype;
};

class AwqSearchBatchPipelineTest : public ::testing::TestWithParam<PipelineCase> {
 protected:
  static std::string Model(const std::string& name) {
    if (name == "opt") {
      runtime::SyntheticModelOptions make;
      make.arch = "opt";
      make.dtype = "f32";
      make.seed = 3;
      make.out_dir = quark::testing::TempPath("batch_opt");
      make.tokenizer_path = quark::testing::FixturePath("stories260K/tokenizer.model");
      EXPECT_TRUE(runtime::MakeSyntheticModel(make).ok());
      return make.out_dir;
    }
    if (name == "phi3") {
      const std::string dir = quark::testing::TempPath("batch_phi3");
      const absl::Status status =
          runtime::testing::TransplantTinyLlama(quark::testing::FixturePath("tinyllama-a"), "phi3", dir);
      EXPECT_TRUE(status.ok()) << status;
      return dir;
    }
    return quark::testing::WriteSyntheticLlama(quark::testing::Group128Llama());
  }
};

TEST_P(AwqSearchBatchPipelineTest, BatchedRunIsTheOneAtATimeRun) {
  const PipelineCase& c = GetParam();
  const std::string model = Model(c.name), text = quark::testing::SmallEvalText();
  const auto run = [&](int64_t batch_bytes, const std::string& out) {
    quark::testing::Scenario scenario{c.name, c.preset, {AwqAlgo{}}, {}};
    scenario.search_batch_bytes = batch_bytes;
    QuantizeModelOptions options = quark::testing::ScenarioOptions(scenario, text, out, "");
    options.compute_dtype = c.compute_dtype;
    return QuantizeModel(model, options);
  };
  const std::string loop_out = quark::testing::TempPath("loop_out");
  auto loop = run(0, loop_out);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const auto loop_files = quark::testing::FilesUnder(loop_out);
  // 4 MiB: a few ratios a forward (the fused Phi-3 MLP's trial is over 4 MiB: one at a time); 2^40: the whole grid.
  for (const int64_t batch_bytes : {int64_t{4} << 20, int64_t{1} << 40}) {
    const std::string out = quark::testing::TempPath("batched_out");
    auto batched = run(batch_bytes, out);
    ASSERT_TRUE(batched.ok()) << batched.status();
    EXPECT_EQ(batched->algorithm_log, loop->algorithm_log) << batch_bytes;
    for (const std::string metric : {"ppl_before", "ppl_after", "ppl_reloaded"}) {
      EXPECT_EQ(batched->metrics.at(metric), loop->metrics.at(metric)) << metric << " at " << batch_bytes;
    }
    const auto files = quark::testing::FilesUnder(out);
    ASSERT_EQ(files.size(), loop_files.size());
    for (const auto& [name, bytes] : loop_files) {
      EXPECT_TRUE(files.at(name) == bytes) << name << " differs at " << batch_bytes << " bytes a batch";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, AwqSearchBatchPipelineTest,
                         ::testing::Values(PipelineCase{"llama", "uint4_wo_128", "f32"},
                                           PipelineCase{"llama_bf16", "uint4_wo_128", "bf16"},
                                           PipelineCase{"opt", "uint4_wo_32", "f32"},
                                           PipelineCase{"phi3", "uint4_wo_128", "f32"}),
                         [](const ::testing::TestParamInfo<PipelineCase>& info) { return info.param.name; });

}  // namespace
}  // namespace quark::algorithms
