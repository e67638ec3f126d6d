// #27: the MoE families on cuda:0 (what device_moe_test proves on the lazy device, plus GPTQ, which that device cannot
// run in a test's time). Against the CPU run, within device_quantize_cuda_test's bounds (the float model's perplexity
// within 1e-4 relative, the exported model's within 1e-3): int8 (routing and the calibration top-up) and GPTQ of
// whole layers (every expert's Hessian in one routed capture). GPTQ of experts streamed in groups of 2 at the
// smallest budget the run fits, where the activations, the routed block's inputs and a group's recorded calls are
// kept in host memory and cross to the GPU one at a time (algorithms/gptq_layer.cc), against the same job on the GPU
// with room for everything: the same values on the same device, so the same bytes. Labelled `gpu`: skips, saying so,
// without a CUDA device (fails then if QUARK_EXPECT_CUDA is set).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/config/presets.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/compute_device.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/tiny_family_model.h"
#include "tests/runtime/test_paths.h"
#include "tests/support/require_cuda.h"

namespace quark {
namespace {

struct MoeCudaCase {
  std::string arch;
  std::string name;
  std::string preset;
  bool gptq = false;
  int64_t expert_group_size = 0;
};

std::string Temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("quark_moe_cuda_" + name + std::to_string(::getpid()))).string();
}

class DeviceMoeCudaTest : public ::testing::TestWithParam<MoeCudaCase> {
 protected:
  void SetUp() override {
    QUARK_REQUIRE_CUDA("the MoE pipeline was not run on CUDA");
    model_ = Temp("model_" + GetParam().arch);
    const absl::Status made = testing::MakeTinyFamilyModel(GetParam().arch, model_);
    ASSERT_TRUE(made.ok()) << made;
  }
  void TearDown() override {
    std::filesystem::remove_all(model_);
    for (const std::string& out : outputs_) std::filesystem::remove_all(out);
  }

  // 8 calibration samples of 64 tokens, every expert topped up to 4; 2 evaluation windows of 64 unless `evaluate` is
  // false (the evaluation's streamer holds whole layers and would set the smallest budget).
  QuantizeModelOptions Options(const std::string& run, bool evaluate) {
    const MoeCudaCase& c = GetParam();
    QuantizeModelOptions o;
    o.config = PresetConfig(c.preset).value();
    if (c.gptq) o.config.algo_config = {GptqAlgo{}};
    o.expert_group_size = c.expert_group_size;
    o.calibration_file = runtime::testing::TinyStoriesText();
    o.num_calibration_samples = 8;
    o.seq_len = 64;
    o.moe_min_expert_tokens = 4;
    if (evaluate) {
      o.eval_text_file = runtime::testing::TinyStoriesText();
      o.eval_seq_len = 64;
      o.eval_max_windows = 2;
    }
    o.output_dir = Temp(c.arch + "_" + c.name + "_" + run);
    std::filesystem::remove_all(o.output_dir);
    outputs_.push_back(o.output_dir);
    return o;
  }

  std::string model_;
  std::vector<std::string> outputs_;
};

double Relative(double a, double b) { return std::abs(a - b) / std::abs(b); }

TEST_P(DeviceMoeCudaTest, TheGpuRunHoldsItsBounds) {
  auto cuda = runtime::ComputeDevice::Open("cuda:0");
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  if (GetParam().expert_group_size == 0) {
    const QuantizeModelOptions cpu_options = Options("cpu", true), gpu_options = Options("gpu", true);
    auto cpu = QuantizeModel(model_, cpu_options);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    auto gpu = QuantizeModelOn(*cuda, model_, gpu_options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_LE(Relative(gpu->metrics.at("ppl_before"), cpu->metrics.at("ppl_before")), 1e-4);
    for (const char* name : {"ppl_after", "ppl_reloaded"}) {
      EXPECT_LE(Relative(gpu->metrics.at(name), cpu->metrics.at(name)), 1e-3) << name;
    }
    std::printf("%s %s: ppl_reloaded cpu %.9g gpu %.9g\n", GetParam().arch.c_str(), GetParam().name.c_str(),
                cpu->metrics.at("ppl_reloaded"), gpu->metrics.at("ppl_reloaded"));
    return;
  }
  QuantizeModelOptions roomy = Options("roomy", false);
  roomy.device_memory_budget = int64_t{64} << 30;
  auto first = QuantizeModelOn(*cuda, model_, roomy);
  ASSERT_TRUE(first.ok()) << first.status();
  const int64_t least = static_cast<int64_t>(first->metrics.at("device_memory_least_budget_bytes"));
  QuantizeModelOptions tight = Options("tight", false);
  tight.device_memory_budget = least;
  auto second = QuantizeModelOn(*cuda, model_, tight);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GE(second->metrics.at("layers_activations_on_host"), 1);
  testing::ExpectSameFiles(roomy.output_dir, tight.output_dir, "differs with the activations on the host");
  std::printf("%s %s: least budget %lld bytes (all on the GPU %.0f), layers with activations on the host %.0f of %.0f\n",
              GetParam().arch.c_str(), GetParam().name.c_str(), static_cast<long long>(least),
              first->metrics.at("device_memory_all_on_device_bytes"), second->metrics.at("layers_activations_on_host"),
              second->metrics.at("num_layers"));
}

INSTANTIATE_TEST_SUITE_P(Families, DeviceMoeCudaTest,
                         ::testing::Values(MoeCudaCase{"qwen3_moe", "int8", "int8"},
                                           MoeCudaCase{"qwen3_moe", "gptq", "uint4_wo_32", true},
                                           MoeCudaCase{"qwen3_moe", "gptq_experts_in_groups", "uint4_wo_32", true, 2},
                                           MoeCudaCase{"deepseek_v3", "gptq", "uint4_wo_32", true},
                                           MoeCudaCase{"deepseek_v3", "gptq_experts_in_groups", "uint4_wo_32", true, 2}),
                         [](const ::testing::TestParamInfo<MoeCudaCase>& info) {
                           return info.param.arch + "_" + info.param.name;
                         });

}  // namespace
}  // namespace quark
