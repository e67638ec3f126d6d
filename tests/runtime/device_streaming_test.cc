// The layer streamer on a compute device: every tensor a layer computes with is placed where the streamer says
// (checked on LibTorch's meta device, where a tensor left on the CPU makes the forward fail), the device memory budget
// is enforced by its formula before a layer computes, and running out of memory is RESOURCE_EXHAUSTED naming the
// layer, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/checkpoint/forward_workspace.h"
#include "core/runtime/device_memory.h"
#include "core/runtime/layer_streamer.h"
#include "tests/runtime/test_paths.h"
#include "tests/support/lazy_device.h"

namespace quark::runtime {
namespace {

using ::testing::HasSubstr;

std::vector<at::Tensor> Samples() {
  at::manual_seed(3);
  return {at::randint(1, 500, {1, 24}, at::kLong), at::randint(1, 500, {1, 9}, at::kLong)};
}

TEST(DeviceStreamingTest, EveryLayerComputesOnTheDeviceItNames) {
  testing::InitTestEngine();
  StreamerOptions options;
  options.device = ComputeDeviceForTesting(at::Device(at::kMeta));
  auto streamer = LayerStreamer::Open(testing::Stories260K(), options);
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  int64_t layers_seen = 0;
  LayerHooks hooks;
  hooks.before = [&](int64_t, DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
    for (const NamedLinear& linear : layer.NamedLinears()) {
      EXPECT_TRUE(linear.linear->weight().is_meta()) << linear.name;
    }
    for (const at::Tensor& input : inputs) EXPECT_TRUE(input.is_meta());
    ++layers_seen;
    return absl::OkStatus();
  };
  const std::vector<at::Tensor> samples = Samples();
  auto hidden = (*streamer)->Run(samples, hooks);
  ASSERT_TRUE(hidden.ok()) << hidden.status();  // a CPU tensor beside a meta one fails the forward
  EXPECT_EQ(layers_seen, (*streamer)->config().num_hidden_layers);
  ASSERT_EQ(hidden->size(), 2u);
  EXPECT_TRUE((*hidden)[0].is_meta());
  EXPECT_EQ((*hidden)[0].size(1), 24);
  // The meta device runs its work synchronously: nothing to overlap, no second layer held.
  EXPECT_FALSE((*streamer)->double_buffered());
}

double MeanNll(const StreamerOptions& options) {
  auto streamer = LayerStreamer::Open(testing::Stories260K(), options);
  EXPECT_TRUE(streamer.ok()) << streamer.status();
  if (!streamer.ok()) return -1;
  const std::vector<at::Tensor> samples = Samples();
  auto hidden = (*streamer)->Run(samples);
  EXPECT_TRUE(hidden.ok()) << hidden.status();
  if (!hidden.ok()) return -1;
  double sum = 0;
  int64_t count = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ((*hidden)[i].device(), options.device.device());
    auto nll = (*streamer)->model().NextTokenNll((*hidden)[i], samples[i]);
    EXPECT_TRUE(nll.ok()) << nll.status();
    if (!nll.ok()) return -1;
    EXPECT_TRUE(nll->device().is_cpu());
    sum += nll->sum().item<double>();
    count += nll->numel();
  }
  return sum / static_cast<double>(count);
}

TEST(DeviceStreamingTest, PerplexityOnAComputingDeviceIsTheCpus) {
  testing::InitTestEngine();
  const double cpu = MeanNll({});
  StreamerOptions lazy;
  lazy.device = quark::testing::LazyComputeDevice();
  const double on_device = MeanNll(lazy);
  EXPECT_NEAR(on_device, cpu, 1e-6 * cpu);
  std::printf("mean NLL cpu=%.9f lazy=%.9f\n", cpu, on_device);
}

TEST(DeviceStreamingTest, TheCpuStreamerIsUnchanged) {
  testing::InitTestEngine();
  auto cpu = LayerStreamer::Open(testing::Stories260K());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  StreamerOptions budgeted;
  budgeted.device_memory_budget = int64_t{1} << 30;
  auto within = LayerStreamer::Open(testing::Stories260K(), budgeted);
  ASSERT_TRUE(within.ok()) << within.status();
  const std::vector<at::Tensor> samples = Samples();
  auto a = (*cpu)->Run(samples);
  auto b = (*within)->Run(samples);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_TRUE(at::equal((*a)[0], (*b)[0]));
  EXPECT_FALSE((*cpu)->double_buffered());
}

TEST(DeviceStreamingTest, ALayerThatDoesNotFitTheBudgetIsRefusedBeforeItComputes) {
  testing::InitTestEngine();
  StreamerOptions options;
  options.device_memory_budget = 4096;
  auto streamer = LayerStreamer::Open(testing::Stories260K(), options);
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  bool computed = false;
  LayerHooks hooks;
  hooks.before = [&](int64_t, DecoderLayer&, const std::vector<at::Tensor>&) {
    computed = true;
    return absl::OkStatus();
  };
  auto hidden = (*streamer)->Run(Samples(), hooks);
  EXPECT_EQ(hidden.status().code(), absl::StatusCode::kResourceExhausted) << hidden.status();
  EXPECT_THAT(std::string(hidden.status().message()), HasSubstr("layer 0: needs "));
  EXPECT_THAT(std::string(hidden.status().message()), HasSubstr("device_memory_budget is 4096 bytes"));
  EXPECT_FALSE(computed);
}

// #27: when the samples' hidden states do not fit beside the layer, they are kept in host memory and cross to the
// device one at a time: the hooks see them on the host, the outputs are the run's with them on the device, bit for bit
// (the lazy device computes with the CPU's kernels), and the budget then needs one sample's in and out.
TEST(DeviceStreamingTest, ActivationsThatDoNotFitAreKeptInHostMemory) {
  testing::InitTestEngine();
  StreamerOptions options;
  options.device = quark::testing::LazyComputeDevice();
  auto unbounded = LayerStreamer::Open(testing::Stories260K(), options);
  ASSERT_TRUE(unbounded.ok()) << unbounded.status();
  const std::vector<at::Tensor> samples = Samples();
  auto reference = (*unbounded)->Run(samples);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const LayerStreamer::MemoryUse unbounded_use = (*unbounded)->memory_use();
  EXPECT_EQ(unbounded_use.layers_activations_on_host, 0);
  EXPECT_EQ(unbounded_use.peak_need, unbounded_use.peak_need_on_device);
  // Two samples of 24 and 9 tokens: on the host the activations count the longer one only.
  const int64_t hidden_bytes = (*unbounded)->config().hidden_size * 4;
  EXPECT_EQ(unbounded_use.peak_need_on_device - unbounded_use.least_budget, 2 * 9 * hidden_bytes);

  options.device_memory_budget = unbounded_use.least_budget;
  auto bounded = LayerStreamer::Open(testing::Stories260K(), options);
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  int64_t layers_seen = 0;
  LayerHooks hooks;
  hooks.before = [&](int64_t, DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
    EXPECT_FALSE(layer.NamedLinears().front().linear->weight().is_cpu());
    for (const at::Tensor& input : inputs) EXPECT_TRUE(input.is_cpu());
    ++layers_seen;
    return absl::OkStatus();
  };
  hooks.after = [&](int64_t, DecoderLayer&, const std::vector<at::Tensor>&, const std::vector<at::Tensor>& outputs) {
    for (const at::Tensor& output : outputs) EXPECT_TRUE(output.is_cpu());
    return absl::OkStatus();
  };
  auto spilled = (*bounded)->Run(samples, hooks);
  ASSERT_TRUE(spilled.ok()) << spilled.status();
  EXPECT_EQ(layers_seen, (*bounded)->config().num_hidden_layers);
  EXPECT_EQ((*bounded)->memory_use().layers_activations_on_host, (*bounded)->config().num_hidden_layers);
  EXPECT_EQ((*bounded)->memory_use().peak_need, unbounded_use.least_budget);
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_TRUE(at::equal((*spilled)[i], (*reference)[i].cpu())) << "sample " << i;
    // The head takes the last layer's outputs from the host.
    auto nll = (*bounded)->model().NextTokenNll((*spilled)[i], samples[i]);
    auto expected = (*unbounded)->model().NextTokenNll((*reference)[i], samples[i]);
    ASSERT_TRUE(nll.ok() && expected.ok()) << nll.status() << expected.status();
    EXPECT_TRUE(at::equal(*nll, *expected)) << "sample " << i;
  }

  // One byte less than one sample in and out needs: refused before the first layer computes, naming both figures.
  options.device_memory_budget = unbounded_use.least_budget - 1;
  auto short_of_one = LayerStreamer::Open(testing::Stories260K(), options);
  ASSERT_TRUE(short_of_one.ok()) << short_of_one.status();
  layers_seen = 0;
  auto refused = (*short_of_one)->Run(samples, hooks);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr(std::to_string(unbounded_use.least_budget) + " with the activations kept in host memory"));
  EXPECT_EQ(layers_seen, 0);
}

TEST(DeviceStreamingTest, TheBudgetFormula) {
  checkpoint::ModelConfig config;
  config.num_attention_heads = 8;
  config.intermediate_size = 110;
  const std::vector<at::Tensor> hidden = {at::zeros({1, 10, 64}), at::zeros({1, 4, 64})};
  const LayerDeviceMemory memory = LayerDeviceMemoryOf(config, 1000, hidden);
  EXPECT_EQ(memory.weights, 1000);
  EXPECT_EQ(memory.activations, 2 * (10 + 4) * 64 * 4);
  // The wider of the attention (8 heads' 10 x 10 float32 scores and softmax, six 10 x 64 rows) and the MLP (four
  // 10 x 110 intermediates, two rows): here the MLP; and the mask and RoPE tables (head_dim 8).
  config.hidden_size = 64;
  const LayerDeviceMemory wide = LayerDeviceMemoryOf(config, 1000, hidden);
  const int64_t attention = 8 * 10 * 10 * (4 + 4) + 6 * 10 * 64 * 4;
  const int64_t mlp = 4 * 10 * 110 * 4 + 2 * 10 * 64 * 4;
  const int64_t context = 10 * 10 * 4 + 2 * 10 * 8 * 4;
  ASSERT_GT(mlp, attention);
  EXPECT_EQ(wide.workspace, mlp + context);
  EXPECT_EQ(wide.passes, 0);
  EXPECT_EQ(wide.Need(2), 2000 + wide.activations + wide.workspace);
  // A narrow MLP: the attention. In bfloat16 the probabilities take a bfloat16 copy beside the float32 softmax.
  config.intermediate_size = 4;
  const std::vector<at::Tensor> bf16 = {at::zeros({1, 10, 64}, at::kBFloat16)};
  EXPECT_EQ(LayerDeviceMemoryOf(config, 1000, bf16).workspace,
            8 * 10 * 10 * (4 + 4 + 2) + 6 * 10 * 64 * 2 + 10 * 10 * 4 + 2 * 10 * 8 * 2);
}

// Long samples: CausalAttention takes blocks of KV heads and query rows of at most kScoreElementsPerBlock score
// elements, and the formula counts one block, not every head's scores (Llama-2-7B at 2048 tokens: every head, 128
// rows a block).
TEST(DeviceStreamingTest, TheBudgetCountsOneScoreBlock) {
  using checkpoint::ScoreBlockElements;
  using checkpoint::ScoreBlockOf;
  EXPECT_EQ(ScoreBlockOf(1, 32, 32, 2048).kv_heads, 32);
  EXPECT_EQ(ScoreBlockOf(1, 32, 32, 2048).rows, 128);
  EXPECT_EQ(ScoreBlockElements(1, 32, 32, 2048), 32 * 128 * 2048);
  EXPECT_EQ(ScoreBlockOf(1, 32, 8, 2048).kv_heads, 8) << "4 query heads share each KV head";
  EXPECT_EQ(ScoreBlockElements(1, 32, 8, 2048), 8 * 4 * 128 * 2048);
  EXPECT_EQ(ScoreBlockOf(1, 32, 8, 16).rows, 16) << "short samples: every row and head in one block";
  EXPECT_EQ(ScoreBlockElements(1, 32, 8, 16), 32 * 16 * 16);
  EXPECT_EQ(ScoreBlockOf(1, 64, 8, 8192).kv_heads, 2) << "fewer KV heads before fewer than 64 rows";
  EXPECT_EQ(ScoreBlockOf(1, 64, 8, 8192).rows, 64);
  EXPECT_EQ(ScoreBlockOf(1, 64, 8, 1 << 17).kv_heads, 1) << "never less than one KV head";
  EXPECT_EQ(ScoreBlockOf(1, 64, 8, 1 << 17).rows, 8);
  EXPECT_LE(ScoreBlockElements(1, 64, 8, 1 << 17), checkpoint::kScoreElementsPerBlock);
  checkpoint::ModelConfig config;
  config.num_attention_heads = 32;
  config.num_key_value_heads = 32;
  config.intermediate_size = 11008;
  config.hidden_size = 4096;
  const std::vector<at::Tensor> hidden = {at::empty({1, 2048, 4096}, at::device(at::kMeta))};
  const int64_t attention = int64_t{32} * 128 * 2048 * 8 + 6 * 2048 * 4096 * 4;
  const int64_t mlp = int64_t{4} * 2048 * 11008 * 4 + 2 * 2048 * 4096 * 4;
  EXPECT_EQ(LayerDeviceMemoryOf(config, 0, hidden).workspace,
            std::max(attention, mlp) + int64_t{2048} * 2048 * 4 + 2 * 2048 * 128 * 4);
}

// The default budget: a share of what the device reports free; none where nothing reports (the CPU); a given budget
// as it is; a negative one refused naming the field.
TEST(DeviceStreamingTest, TheDefaultBudgetIsAShareOfTheDevicesFreeMemory) {
  const ComputeDevice meta = ComputeDeviceForTesting(at::Device(at::kMeta));
  auto budget = DeviceMemoryBudget(meta, 0, "--device-memory-gb");
  ASSERT_TRUE(budget.ok()) << budget.status();
  EXPECT_EQ(*budget, 0) << "no probe for the meta device: no budget";
  RegisterFreeMemoryProbe(at::kMeta, [](c10::DeviceIndex) { return std::optional<int64_t>(1000); });
  EXPECT_EQ(FreeDeviceMemory(meta), std::optional<int64_t>(1000));
  EXPECT_EQ(*DeviceMemoryBudget(meta, 0, "--device-memory-gb"), 900);
  EXPECT_EQ(*DeviceMemoryBudget(meta, 5000, "--device-memory-gb"), 5000);
  EXPECT_EQ(*DeviceMemoryBudget(ComputeDevice(), 0, "--device-memory-gb"), 0) << "the CPU has no device budget";
  EXPECT_EQ(FreeDeviceMemory(ComputeDevice()), std::nullopt);
  auto negative = DeviceMemoryBudget(meta, -1, "--device-memory-gb");
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("--device-memory-gb"));
  RegisterFreeMemoryProbe(at::kMeta, nullptr);
  EXPECT_EQ(FreeDeviceMemory(meta), std::nullopt);
}

TEST(DeviceStreamingTest, OutOfMemoryIsResourceExhaustedNamingTheLayer) {
  testing::InitTestEngine();
  auto streamer = LayerStreamer::Open(testing::Stories260K());
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  LayerHooks hooks;
  hooks.after = [](int64_t index, DecoderLayer&, const std::vector<at::Tensor>&, const std::vector<at::Tensor>&) {
    if (index == 1) at::empty({int64_t{1} << 52}, at::kFloat);  // 16 PiB: the allocator refuses
    return absl::OkStatus();
  };
  auto hidden = (*streamer)->Run(Samples(), hooks);
  EXPECT_EQ(hidden.status().code(), absl::StatusCode::kResourceExhausted) << hidden.status();
  EXPECT_THAT(std::string(hidden.status().message()), HasSubstr("layer 1: out of memory"));
}

}  // namespace
}  // namespace quark::runtime
