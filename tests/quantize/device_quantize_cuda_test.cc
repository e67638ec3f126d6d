// The quantize pipeline on cuda:0 against the same run on the CPU (#27, the H200 issue's item 2), on the synthetic
// Llama of device_quantize_test: calibration, every algorithm, the evaluations and the read-back on the GPU, the
// exports from host tensors. Weight-only RTN is elementwise (the CUDA kernels are the CPU's bit for bit), so its
// export must be the CPU's byte for byte. Everything else passes through cuBLAS GEMMs that sum in another order than
// the CPU's BLAS (calibration ranges, Hessians, AWQ's and AutoSmoothQuant's search losses), so it is held to the
// issue's bound: the exported model's perplexity within 1e-3 (relative) of the CPU's, the float model's within 1e-4;
// whether the bytes came out identical anyway is printed. Labelled `gpu`: skips, saying so, without a CUDA device
// (fails then if QUARK_EXPECT_CUDA is set).

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "core/quantize/quantize_model.h"
#include "core/runtime/compute_device.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/test_model.h"
#include "tests/support/require_cuda.h"

namespace quark {
namespace {

using testing::FilesUnder;
using testing::Scenario;

class DeviceQuantizeCudaTest : public ::testing::TestWithParam<Scenario> {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new std::string(testing::WriteSyntheticLlama(testing::Group128Llama()));
    text_ = new std::string(testing::SmallEvalText());
  }

  void SetUp() override {
    QUARK_REQUIRE_CUDA("the pipeline was not run on CUDA");
  }

  static std::string* model_dir_;
  static std::string* text_;
};
std::string* DeviceQuantizeCudaTest::model_dir_ = nullptr;
std::string* DeviceQuantizeCudaTest::text_ = nullptr;

double Relative(double a, double b) { return std::abs(a - b) / std::abs(b); }

TEST_P(DeviceQuantizeCudaTest, TheGpuRunIsTheCpuRunWithinTheBounds) {
  const Scenario& scenario = GetParam();
  const std::string cpu_out = testing::TempPath("cpu_out"), gpu_out = testing::TempPath("gpu_out");
  auto cpu = QuantizeModel(*model_dir_, testing::ScenarioOptions(scenario, *text_, cpu_out, ""));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto cuda = runtime::ComputeDevice::Open("cuda:0");
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  auto gpu = QuantizeModelOn(*cuda, *model_dir_, testing::ScenarioOptions(scenario, *text_, gpu_out, ""));
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  const auto cpu_files = FilesUnder(cpu_out), gpu_files = FilesUnder(gpu_out);
  ASSERT_FALSE(cpu_files.empty());
  ASSERT_EQ(gpu_files.size(), cpu_files.size());
  int differing = 0;
  for (const auto& [name, bytes] : cpu_files) {
    auto it = gpu_files.find(name);
    ASSERT_NE(it, gpu_files.end()) << name;
    if (it->second != bytes) ++differing;
  }
  const bool weight_only_rtn = scenario.algos.empty() && scenario.preset.find("_wo_") != std::string::npos;
  if (weight_only_rtn) EXPECT_EQ(differing, 0) << "weight-only RTN: the exports must be the CPU's byte for byte";

  const auto metric = [](const QuantizeModelReport& r, const char* name) {
    auto it = r.metrics.find(name);
    return it == r.metrics.end() ? std::nan("") : it->second;
  };
  ASSERT_TRUE(cpu->metrics.count("ppl_before") && cpu->metrics.count("ppl_reloaded"));
  EXPECT_LE(Relative(metric(*gpu, "ppl_before"), metric(*cpu, "ppl_before")), 1e-4) << "the float model's perplexity";
  for (const char* name : {"ppl_after", "ppl_reloaded"}) {
    if (!cpu->metrics.count(name)) continue;
    EXPECT_LE(Relative(metric(*gpu, name), metric(*cpu, name)), 1e-3) << name;
  }
  std::printf("%s: ppl_before cpu %.9g gpu %.9g; ppl_reloaded cpu %.9g gpu %.9g; files differing %d of %zu\n",
              scenario.name.c_str(), metric(*cpu, "ppl_before"), metric(*gpu, "ppl_before"),
              metric(*cpu, "ppl_reloaded"), metric(*gpu, "ppl_reloaded"), differing, cpu_files.size());
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, DeviceQuantizeCudaTest,
    ::testing::Values(Scenario{"rtn_weight_only", "uint4_wo_128", {}, {}},
                      Scenario{"rtn_weight_only_all_formats", "uint4_wo_32", {}, {"hf_quark", "gguf", "onnx"}},
                      Scenario{"rtn_static_int8", "int8", {}, {}},
                      Scenario{"fp8", "fp8", {}, {}},
                      Scenario{"mxfp4", "mxfp4", {}, {}},
                      Scenario{"smoothquant", "int8", {SmoothQuantAlgo{}}, {}},
                      Scenario{"rotation", "int4_wo_128", {RotationAlgo{}}, {}},
                      Scenario{"gptq", "uint4_wo_128", {GptqAlgo{}}, {}},
                      Scenario{"awq", "uint4_wo_128", {AwqAlgo{}}, {}},
                      Scenario{"autosmoothquant", "int8", {AutoSmoothQuantAlgo{}}, {}}),
    [](const ::testing::TestParamInfo<Scenario>& info) { return info.param.name; });

// #27: at the smallest budget the run fits (its first run's report) the calibration activations of every layer are
// kept in host memory, each sample crossing to the GPU while it computes; GPTQ's Hessians and the scaling searches
// then read samples placed one at a time. Held to the same bounds against the CPU run; whether the exports are the
// roomy GPU run's byte for byte is printed (AWQ's channel means are then taken on the host, in another order).
class DeviceActivationsOnHostCudaTest : public DeviceQuantizeCudaTest {};

TEST_P(DeviceActivationsOnHostCudaTest, AtTheLeastBudgetTheActivationsLeaveTheGpuAndTheRunHoldsItsBounds) {
  const Scenario& scenario = GetParam();
  const std::string cpu_out = testing::TempPath("cpu_out"), roomy_out = testing::TempPath("roomy_out"),
                    tight_out = testing::TempPath("tight_out");
  const auto options = [&](const std::string& out, int64_t budget) {
    QuantizeModelOptions o = testing::ScenarioOptions(scenario, *text_, out, "");
    o.eval_seq_len = o.seq_len;  // no evaluation needs more of the GPU than the quantization
    o.device_memory_budget = budget;
    return o;
  };
  auto cpu = QuantizeModel(*model_dir_, options(cpu_out, 0));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto cuda = runtime::ComputeDevice::Open("cuda:0");
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  auto roomy = QuantizeModelOn(*cuda, *model_dir_, options(roomy_out, int64_t{64} << 30));
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  const int64_t least = static_cast<int64_t>(roomy->metrics.at("device_memory_least_budget_bytes"));
  auto tight = QuantizeModelOn(*cuda, *model_dir_, options(tight_out, least));
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_EQ(tight->metrics.at("layers_activations_on_host"), tight->metrics.at("num_layers"));
  for (const char* name : {"ppl_before", "ppl_after", "ppl_reloaded"}) {
    if (!cpu->metrics.count(name)) continue;
    EXPECT_LE(Relative(tight->metrics.at(name), cpu->metrics.at(name)), 1e-3) << name;
  }
  const auto roomy_files = FilesUnder(roomy_out), tight_files = FilesUnder(tight_out);
  int differing = 0;
  for (const auto& [name, bytes] : roomy_files) {
    auto it = tight_files.find(name);
    ASSERT_NE(it, tight_files.end()) << name;
    if (it->second != bytes) ++differing;
  }
  std::printf("%s at %lld bytes (all on the GPU: %.0f): files differing from the roomy GPU run %d of %zu\n",
              scenario.name.c_str(), static_cast<long long>(least),
              roomy->metrics.at("device_memory_all_on_device_bytes"), differing, roomy_files.size());
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, DeviceActivationsOnHostCudaTest,
    ::testing::Values(Scenario{"rtn_static_int8", "int8", {}, {}},
                      Scenario{"gptq", "uint4_wo_128", {GptqAlgo{}}, {}},
                      Scenario{"awq", "uint4_wo_128", {AwqAlgo{}}, {}}),
    [](const ::testing::TestParamInfo<Scenario>& info) { return info.param.name; });

}  // namespace
}  // namespace quark
