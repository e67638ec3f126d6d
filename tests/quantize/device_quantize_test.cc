// The quantize pipeline on a compute device that is not the CPU (#27): calibration, the algorithms, the fake-quantized
// evaluation and the read-back run on the device, the exports and checkpoints receive host tensors, and the result is
// the CPU run's: every exported file byte for byte and every perplexity equal. The device is LibTorch's lazy-tensor
// device (tests/support/lazy_device.h): it computes real values, and a CPU tensor left beside a device tensor stops
// the process, so a pass that forgets a hand-off fails here as it would on a GPU.
//
// Not here: GPTQ, whose column loop (about ten operations a column, no host sync by design) the lazy backend traces
// into one graph per weight that outgrows memory (std::bad_alloc); its device path is gptq_tensor_ops_test (bit for
// bit on CPU tensors) and gptq_cuda_test.
#include <string>

#include <gtest/gtest.h>

#include "core/quantize/quantize_model.h"
#include "core/runtime/compute_device.h"
#include "core/runtime/device_memory.h"
#include "tests/quantize/scenario_run.h"
#include "tests/quantize/test_model.h"
#include "tests/support/lazy_device.h"

namespace quark {
namespace {

using testing::Scenario;

// AutoRound trains through each layer (autograd on the device); a few iterations show every hand-off.
AutoRoundAlgo ShortAutoRound() {
  AutoRoundAlgo algo;
  algo.iters = 3;
  algo.batch_size = 2;
  return algo;
}

class DeviceQuantizeTest : public ::testing::TestWithParam<Scenario> {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new std::string(testing::WriteSyntheticLlama(testing::Group128Llama()));
    text_ = new std::string(testing::SmallEvalText());
  }

  QuantizeModelOptions Options(const std::string& output) const {
    return testing::ScenarioOptions(GetParam(), *text_, output, "");
  }

  static std::string* model_dir_;
  static std::string* text_;
};
std::string* DeviceQuantizeTest::model_dir_ = nullptr;
std::string* DeviceQuantizeTest::text_ = nullptr;

// The lazy device runs every op through the eager CPU kernels, so its run equals the CPU run: perplexities and every
// exported byte. Two of its own ways had hidden that: its cache of compiled graphs (off: tests/support/lazy_device.h)
// and, under LibTorch 2.6, pow(x, 2) and pow(x, 0.5) through powf, one float32 step off in ~2% of elements (the
// engine writes them as eager pow computes them: core/runtime/eager_powers.h).
void ExpectSameRun(const QuantizeModelReport& cpu, const std::string& cpu_dir, const QuantizeModelReport& device,
                   const std::string& device_dir) {
  for (const std::string metric :
       {"ppl_before", "ppl_after", "ppl_reloaded", "ppl_gguf", "export_weight_differences"}) {
    if (!cpu.metrics.count(metric)) continue;
    ASSERT_TRUE(device.metrics.count(metric)) << metric;
    EXPECT_EQ(device.metrics.at(metric), cpu.metrics.at(metric)) << metric;
  }
  EXPECT_EQ(device.algorithm_log, cpu.algorithm_log);
  testing::ExpectSameFiles(cpu_dir, device_dir, "differs between the CPU run and the device run");
}

TEST_P(DeviceQuantizeTest, TheDeviceRunIsTheCpuRun) {
  const std::string cpu_out = testing::TempPath("cpu_out"), device_out = testing::TempPath("device_out");
  auto cpu = QuantizeModel(*model_dir_, Options(cpu_out));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto device = QuantizeModelOn(quark::testing::LazyComputeDevice(), *model_dir_, Options(device_out));
  ASSERT_TRUE(device.ok()) << device.status();
  ExpectSameRun(*cpu, cpu_out, *device, device_out);
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, DeviceQuantizeTest,
    ::testing::Values(Scenario{"rtn_weight_only", "uint4_wo_128", {}, {}},
                      Scenario{"rtn_static_int8", "int8", {}, {}},
                      Scenario{"fp8", "fp8", {}, {}},
                      Scenario{"mxfp4", "mxfp4", {}, {}},
                      Scenario{"smoothquant", "int8", {SmoothQuantAlgo{}}, {}},
                      Scenario{"rotation", "int4_wo_128", {RotationAlgo{}}, {}},
                      // #27: one trial at a time, and the searches' trials in batches of ~1 MiB (a few ratios a
                      // forward, every clip factor of a block in one product).
                      Scenario{"awq", "uint4_wo_128", {AwqAlgo{}}, {}, ObserverKind::kMinMax, 0},
                      Scenario{"awq_search_batches", "uint4_wo_128", {AwqAlgo{}}, {}, ObserverKind::kMinMax, 1 << 20},
                      Scenario{"autosmoothquant", "int8", {AutoSmoothQuantAlgo{}}, {}},
                      Scenario{"autoround", "uint4_wo_128", {ShortAutoRound()}, {}},
                      Scenario{"rotation_all_formats", "uint4_wo_32", {RotationAlgo{}},
                               {"hf_quark", "gguf", "onnx"}}),
    [](const ::testing::TestParamInfo<Scenario>& info) { return info.param.name; });

// #27: a budget too small for the calibration activations beside a layer keeps them in host memory (each sample
// crosses to the device while it computes, what the passes keep comes back): the run is still the CPU run, byte for
// byte. The first device run, with room for everything, says the smallest budget the run fits (its report: the most
// any of its streamers needed with the activations on the host); the second runs at exactly that budget, where every
// layer's calibration activations must leave the device.
// Evaluation windows as long as the calibration samples: no evaluation then needs more of the device than the
// quantization, so the smallest budget is the quantization's and its activations are the ones that leave.
class DeviceActivationsOnHostTest : public DeviceQuantizeTest {
 protected:
  QuantizeModelOptions Options(const std::string& output) const {
    QuantizeModelOptions options = DeviceQuantizeTest::Options(output);
    options.eval_seq_len = options.seq_len;
    return options;
  }
};

TEST_P(DeviceActivationsOnHostTest, TheRunWithActivationsInHostMemoryIsTheCpuRun) {
  const std::string cpu_out = testing::TempPath("cpu_out"), roomy_out = testing::TempPath("roomy_out"),
                    device_out = testing::TempPath("device_out");
  auto cpu = QuantizeModel(*model_dir_, Options(cpu_out));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  QuantizeModelOptions roomy = Options(roomy_out);
  roomy.device_memory_budget = int64_t{1} << 40;
  auto first = QuantizeModelOn(quark::testing::LazyComputeDevice(), *model_dir_, roomy);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->metrics.at("layers_activations_on_host"), 0);
  const double least = first->metrics.at("device_memory_least_budget_bytes");
  ASSERT_GT(least, 0);
  ASSERT_LT(least, first->metrics.at("device_memory_all_on_device_bytes"));

  QuantizeModelOptions tight = Options(device_out);
  tight.device_memory_budget = static_cast<int64_t>(least);
  auto device = QuantizeModelOn(quark::testing::LazyComputeDevice(), *model_dir_, tight);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->metrics.at("layers_activations_on_host"), device->metrics.at("num_layers"));
  EXPECT_EQ(device->metrics.at("device_memory_peak_bytes"), least);
  ExpectSameRun(*cpu, cpu_out, *device, device_out);
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, DeviceActivationsOnHostTest,
    ::testing::Values(Scenario{"rtn_static_int8", "int8", {}, {}},
                      Scenario{"smoothquant", "int8", {SmoothQuantAlgo{}}, {}},
                      Scenario{"awq", "uint4_wo_128", {AwqAlgo{}}, {}, ObserverKind::kMinMax, 0},
                      Scenario{"awq_search_batches", "uint4_wo_128", {AwqAlgo{}}, {}, ObserverKind::kMinMax, 1 << 20},
                      Scenario{"autosmoothquant", "int8", {AutoSmoothQuantAlgo{}}, {}},
                      Scenario{"autoround", "uint4_wo_128", {ShortAutoRound()}, {}},
                      Scenario{"smoothquant_all_formats", "int8", {SmoothQuantAlgo{}}, {"hf_quark", "onnx"}}),
    [](const ::testing::TestParamInfo<Scenario>& info) { return info.param.name; });

// #27: a run on a device holds to a budget without anyone giving one: 90% of the free memory the device reports when
// the run starts (a GPU's cudaMemGetInfo; here a probe registered for the lazy device says 1 MiB, which the model's
// first layer and its activations do not fit), and fails naming the layer and the bytes before it computes. A given
// budget replaces the default; a negative one is refused naming the field.
TEST_F(DeviceQuantizeTest, ARunOnADeviceHoldsToTheDefaultBudgetFromItsFreeMemory) {
  const runtime::ComputeDevice lazy = quark::testing::LazyComputeDevice();
  runtime::RegisterFreeMemoryProbe(at::kLazy, [](c10::DeviceIndex) { return std::optional<int64_t>(1 << 20); });
  QuantizeModelOptions options = testing::ScenarioOptions(Scenario{"fp8", "fp8", {}, {}}, *text_, "", "");
  auto report = QuantizeModelOn(lazy, *model_dir_, options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kResourceExhausted) << report.status();
  const int64_t expected = static_cast<int64_t>((1 << 20) * runtime::kDefaultBudgetShareOfFree);
  EXPECT_NE(std::string(report.status().message()).find("device_memory_budget is " + std::to_string(expected) + " bytes"),
            std::string::npos)
      << report.status();

  options.device_memory_budget = -1;
  auto negative = QuantizeModelOn(lazy, *model_dir_, options);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument) << negative.status();
  EXPECT_NE(std::string(negative.status().message()).find("device_memory_budget"), std::string::npos);

  options.device_memory_budget = int64_t{8} << 30;  // a given budget replaces the probe's
  options.eval_text_file.clear();
  auto given = QuantizeModelOn(lazy, *model_dir_, options);
  runtime::RegisterFreeMemoryProbe(at::kLazy, nullptr);
  EXPECT_TRUE(given.ok()) << given.status();
}

}  // namespace
}  // namespace quark
