// #27: the MoE families on a compute device that is not the CPU equal the CPU run, every exported byte and every
// perplexity: their routing and the calibration top-up (int8's static activation scales), with whole layers and with
// the routed experts streamed in groups, the latter also at the smallest budget the run fits, where every layer's
// activations are kept in host memory and cross to the device one sample at a time (DeepSeek-V3 also in bfloat16
// compute, with fp8); SmoothQuant and AWQ through the norm pair that spans the router and every expert
// (algorithms/moe_scaling.h). The device is LibTorch's lazy-tensor device (tests/support/lazy_device.h): a CPU tensor
// left beside a device tensor fails the run there as it would on a GPU. The models are `quark make-model --arch ARCH
// --shape tiny --dtype f32 --seed 21`.
//
// The calibration top-up built its routing mask on the CPU whatever the routing's device, so every MoE run that
// calibrated (static activations, GPTQ's routed captures) failed on a device; no MoE model had run on one before.
// Not here: GPTQ, whose column loop the lazy backend runs through its eager fallback with a host sync a column (one
// tiny MoE run took over five minutes); device_moe_cuda_test runs it on a GPU. Under LibTorch 2.x the comparison is
// bounded, not exact (ExpectSameRun says why).
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/version.h>
#include <unistd.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/config/presets.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/expert_streaming.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/mxfp4_expert_source.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/tiny_family_model.h"
#include "tests/runtime/test_paths.h"
#include "tests/support/lazy_device.h"

namespace quark {
namespace {

struct MoeCase {
  std::string arch;
  std::string name;
  int64_t expert_group_size = 0;  // QuantizeModelOptions::expert_group_size (0: whole layers)
  std::string preset = "int8";
  std::vector<AlgoConfig> algos;
  std::string compute_dtype = "f32";  // QuantizeModelOptions::compute_dtype
};

std::filesystem::path Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("quark_device_moe_" + name + std::to_string(::getpid()));
}

// The families' tiny models, made once per process and removed when its tests end.
class TinyModels : public ::testing::Environment {
 public:
  static std::map<std::string, std::string>& Made() {
    static auto* models = new std::map<std::string, std::string>();
    return *models;
  }
  void TearDown() override {
    for (const auto& [arch, dir] : Made()) std::filesystem::remove_all(dir);
    Made().clear();
  }
};
::testing::Environment* const kTinyModels = ::testing::AddGlobalTestEnvironment(new TinyModels);

const std::string& ModelOf(const std::string& arch) {
  auto& models = TinyModels::Made();
  auto it = models.find(arch);
  if (it != models.end()) return it->second;
  runtime::testing::InitTestEngine();
  const std::string dir = Temp("model_" + arch).string();
  const absl::Status made = testing::MakeTinyFamilyModel(arch, dir);
  EXPECT_TRUE(made.ok()) << made;
  return models.emplace(arch, dir).first->second;
}

class DeviceMoeTest : public ::testing::TestWithParam<MoeCase> {
 protected:
  void TearDown() override {
    for (const std::string& out : outputs_) std::filesystem::remove_all(out);
  }

  // int8 (static activation scales: the calibration and its top-up); 4 calibration samples of 32 tokens, every expert
  // topped up to 4; with whole layers 2 evaluation windows of 32 tokens. Experts in groups are not evaluated: the
  // evaluation's streamer holds whole layers, which would set the smallest budget the run fits, and the quantization's
  // activations would stay on the device at it.
  QuantizeModelOptions Options(const std::string& run) {
    const MoeCase& c = GetParam();
    QuantizeModelOptions o;
    o.config = PresetConfig(c.preset).value();
    o.config.algo_config = c.algos;
    o.expert_group_size = c.expert_group_size;
    o.compute_dtype = c.compute_dtype;
    o.calibration_file = runtime::testing::TinyStoriesText();
    o.num_calibration_samples = 4;
    o.seq_len = 32;
    o.moe_min_expert_tokens = 4;
    if (c.expert_group_size == 0) o.eval_text_file = runtime::testing::TinyStoriesText();
    o.eval_seq_len = 32;
    o.eval_max_windows = 2;
    o.output_dir = Temp(c.arch + "_" + c.name + "_" + run).string();
    std::filesystem::remove_all(o.output_dir);
    outputs_.push_back(o.output_dir);
    return o;
  }

  std::vector<std::string> outputs_;
};

// Under LibTorch 1.13 (Debian's, CI's) the lazy device computes every op as the eager CPU kernels do. Under LibTorch
// 2.6 (scripts/check-libtorch2.sh's chroot) its MoE forward comes out a float32 step off somewhere: the float model's
// perplexity 5e-9 relative apart, so the exports differ too. Not found yet: softmax, topk, the division, silu,
// sigmoid, index_select, gather and index_add_ each equal eager there (PyTorch 2.6's lazy backend from Python, graph
// optimisation off, as tests/support/lazy_device.h sets it). There the float model's perplexity is held to 1e-7 and
// the quantized model's to 1e-4 (a calibration range a float step off can move a static scale: 5.5e-5 measured), and
// the differing files are printed; the placement proof (a CPU tensor beside a lazy one fails the run) is the same.
constexpr bool kLazyIsEager = TORCH_VERSION_MAJOR < 2;

void ExpectSameRun(const QuantizeModelReport& cpu, const std::string& cpu_dir, const QuantizeModelReport& device,
                   const std::string& device_dir) {
  for (const char* metric : {"ppl_before", "ppl_after", "ppl_reloaded"}) {
    if (!cpu.metrics.count(metric)) continue;
    ASSERT_TRUE(device.metrics.count(metric)) << metric;
    if (kLazyIsEager) {
      EXPECT_EQ(device.metrics.at(metric), cpu.metrics.at(metric)) << metric;
    } else {
      const double bound = std::string(metric) == "ppl_before" ? 1e-7 : 1e-4;
      EXPECT_NEAR(device.metrics.at(metric), cpu.metrics.at(metric), bound * cpu.metrics.at(metric)) << metric;
    }
  }
  if (kLazyIsEager) {
    testing::ExpectSameFiles(cpu_dir, device_dir, "differs between the CPU run and the device run");
    return;
  }
  const auto cpu_files = testing::FilesUnder(cpu_dir), device_files = testing::FilesUnder(device_dir);
  ASSERT_EQ(device_files.size(), cpu_files.size());
  int differing = 0;
  for (const auto& [name, bytes] : cpu_files) {
    ASSERT_TRUE(device_files.count(name)) << name;
    differing += device_files.at(name) != bytes;
  }
  std::printf("LibTorch %s: files differing from the CPU run's %d of %zu\n", TORCH_VERSION, differing, cpu_files.size());
}

TEST_P(DeviceMoeTest, TheDeviceRunIsTheCpuRun) {
  const std::string& model = ModelOf(GetParam().arch);
  const QuantizeModelOptions cpu_options = Options("cpu");
  auto cpu = QuantizeModel(model, cpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  QuantizeModelOptions roomy = Options("device");
  roomy.device_memory_budget = int64_t{1} << 40;
  auto device = QuantizeModelOn(quark::testing::LazyComputeDevice(), model, roomy);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->metrics.at("layers_activations_on_host"), 0);
  ExpectSameRun(*cpu, cpu_options.output_dir, *device, roomy.output_dir);
  if (GetParam().expert_group_size == 0) return;

  // Experts in groups at the smallest budget the run fits: the activations of the layer that sets it in host memory,
  // each sample crossing to the device for its forward (runtime/layer_forward.cc), and of every layer where the MoE
  // layers set it (DeepSeek's dense first layer, with no experts to stream, holds more than its MoE layers).
  const double least = device->metrics.at("device_memory_least_budget_bytes");
  ASSERT_GT(least, 0);
  ASSERT_LT(least, device->metrics.at("device_memory_all_on_device_bytes"));
  QuantizeModelOptions tight = Options("on_host");
  tight.device_memory_budget = static_cast<int64_t>(least);
  auto on_host = QuantizeModelOn(quark::testing::LazyComputeDevice(), model, tight);
  ASSERT_TRUE(on_host.ok()) << on_host.status();
  const double layers_on_host = on_host->metrics.at("layers_activations_on_host");
  EXPECT_GE(layers_on_host, 1);
  if (GetParam().arch != "deepseek_v3") EXPECT_EQ(layers_on_host, on_host->metrics.at("num_layers"));
  EXPECT_EQ(on_host->metrics.at("device_memory_peak_bytes"), least);
  ExpectSameRun(*cpu, cpu_options.output_dir, *on_host, tight.output_dir);
}

std::vector<MoeCase> Cases() {
  std::vector<MoeCase> cases;
  for (const std::string arch : {"qwen3_moe", "deepseek_v3", "gpt_oss", "llama4"}) {
    cases.push_back({arch, "int8", 0});
    cases.push_back({arch, "int8_experts_in_groups", 2});
  }
  // The families with scaling templates (their norm pair spans the router and every expert: moe_scaling.h); qwen2_moe
  // with its gated shared expert.
  cases.push_back({"qwen2_moe", "int8", 0});
  // bfloat16 compute (the GPU's fast path, h200.sh's moe step): the routed sums kept on the host are bfloat16 there.
  cases.push_back({"deepseek_v3", "fp8_bf16_experts_in_groups", 2, "fp8", {}, "bf16"});
  cases.push_back({"qwen3_moe", "smoothquant", 0, "int8", {SmoothQuantAlgo{}}});
  // AWQ (its searches one trial at a time through the routed block) takes ~2 minutes on this device; AutoSmoothQuant
  // and mixtral's AWQ passed as well (2 minutes each) and are left out for time.
  cases.push_back({"qwen3_moe", "awq", 0, "uint4_wo_32", {AwqAlgo{}}});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Families, DeviceMoeTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<MoeCase>& info) {
                           return info.param.arch + "_" + info.param.name;
                         });

// Experts streamed one at a time, with every layer's activations in host memory (the smallest budget the run fits):
// each pass over a layer still loads each expert at most once for all the samples (the residual, the block's input and
// the routed sum of every sample stay on the host, one sample's tokens of one expert cross at a time); the hooks see
// host tensors, and the outputs are the CPU's whole-layer forward, bit for bit. Sample by sample it had loaded each
// expert once per sample.
TEST(DeviceMoeStreamingTest, WithTheActivationsOnTheHostEachExpertStillLoadsOncePerPass) {
  const std::string& dir = ModelOf("qwen3_moe");
  const checkpoint::ModelConfig config = *checkpoint::LoadModelConfig(dir);
  const std::shared_ptr<const runtime::WeightSource> checkpoint =
      runtime::CheckpointWeightsFor(config, *checkpoint::CheckpointReader::Open(dir));
  std::vector<at::Tensor> samples;  // 4 samples of 24 tokens: every expert routed in each
  for (int s = 0; s < 4; ++s) samples.push_back(at::arange(3 + s, 3 + s + 24, at::kLong).mul(37).remainder(509));
  auto cpu = runtime::LayerStreamer::Create(config, checkpoint);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto reference = (*cpu)->Run(samples);
  ASSERT_TRUE(reference.ok()) << reference.status();

  // The roomy run sets the least budget; the run at it keeps every layer's activations on the host.
  int64_t least_budget = int64_t{1} << 40;
  for (const bool on_host : {false, true}) {
    auto streaming = std::make_shared<const runtime::ExpertStreamingWeights>(checkpoint, 1, testing::LazyComputeDevice());
    runtime::StreamerOptions options;
    options.device = testing::LazyComputeDevice();
    options.device_memory_budget = least_budget;
    auto streamer = runtime::LayerStreamer::Create(config, streaming, options);
    ASSERT_TRUE(streamer.ok()) << streamer.status();
    const runtime::ExpertResidency& residency = *streaming->residency();
    int64_t mark = 0, moe_layers = 0;
    runtime::LayerHooks hooks;
    hooks.before = [&](int64_t, runtime::DecoderLayer&, const std::vector<at::Tensor>& inputs) {
      for (const at::Tensor& input : inputs) EXPECT_EQ(input.is_cpu(), on_host);
      mark = residency.loads();
      return absl::OkStatus();
    };
    hooks.after = [&](int64_t layer, runtime::DecoderLayer&, const std::vector<at::Tensor>&,
                      const std::vector<at::Tensor>& outputs) {
      for (const at::Tensor& output : outputs) EXPECT_EQ(output.is_cpu(), on_host);
      const int64_t loads = residency.loads() - mark;
      EXPECT_LE(loads, config.num_experts) << "layer " << layer << (on_host ? ", activations on the host" : "");
      std::printf("layer %lld, activations %s: %lld expert loads\n", static_cast<long long>(layer),
                  on_host ? "on the host" : "on the device", static_cast<long long>(loads));
      moe_layers += loads > 0;
      return absl::OkStatus();
    };
    auto hidden = (*streamer)->Run(samples, hooks);
    ASSERT_TRUE(hidden.ok()) << hidden.status();
    EXPECT_EQ(moe_layers, config.num_hidden_layers);
    EXPECT_EQ((*streamer)->memory_use().layers_activations_on_host, on_host ? config.num_hidden_layers : 0);
    for (size_t i = 0; i < samples.size(); ++i) {
      if (kLazyIsEager) {
        EXPECT_TRUE(at::equal((*hidden)[i].cpu(), (*reference)[i])) << "sample " << i << " on_host " << on_host;
      } else {
        EXPECT_TRUE(at::allclose((*hidden)[i].cpu(), (*reference)[i], 1e-5, 1e-6)) << "sample " << i;
      }
    }
    least_budget = (*streamer)->memory_use().least_budget;
  }
}


}  // namespace
}  // namespace quark
