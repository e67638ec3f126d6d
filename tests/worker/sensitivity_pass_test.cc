// #36 item 3 / #27: an automatic search's sensitivity child computes where and in what the job's quantization would
// (the worker's device, spec.resources.compute_dtype), so the figures that choose a recipe come from the arithmetic
// that will run it. On this CPU: bfloat16 gives other figures than float32, and a device the process cannot use is
// refused naming the field.
#include "worker/sensitivity_pass.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "tests/storage/support/subprocess.h"
#include "tests/worker/recording_sink.h"

namespace quark::worker {
namespace {

using ::testing::HasSubstr;

std::string Fixtures() {
  return quark::testing::EnvOr("QUARK_SHARED_DIR", QUARK_TEST_SOURCE_DIR "/../shared") + "/fixtures";
}

class SensitivityPassTest : public ::testing::Test {
 protected:
  PipelineRequest Request(const std::string& compute_dtype, const std::string& device = "cpu") {
    PipelineRequest request;
    request.job_id = "job-sensitivity";
    request.spec.set_preset("fp8");  // stories260K: 64 wide, its MLP 172
    request.spec.set_sensitivity_pass(true);
    request.spec.mutable_calibration()->set_num_samples(2);
    request.spec.mutable_calibration()->set_seq_len(64);
    if (!compute_dtype.empty()) request.spec.mutable_resources()->set_compute_dtype(compute_dtype);
    request.model_dir = Fixtures() + "/stories260K";
    request.calibration_file = Fixtures() + "/eval/tinystories_validation_prefix.txt";
    request.output_dir = dir_.path() / ("out-" + compute_dtype + device);
    std::filesystem::create_directories(request.output_dir);
    request.device = device;
    return request;
  }
  quark::testing::TempDir dir_;
};

TEST_F(SensitivityPassTest, ThePassComputesInTheJobsComputeDtype) {
  RecordingSink sink;
  CancelToken cancel;
  absl::StatusOr<PipelineResult> f32 = RunSensitivityPass(Request(""), sink, cancel);
  ASSERT_TRUE(f32.ok()) << f32.status();
  absl::StatusOr<PipelineResult> bf16 = RunSensitivityPass(Request("bf16"), sink, cancel);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  const double nll32 = f32->metrics.at("sensitivity_float_nll");
  const double nll16 = bf16->metrics.at("sensitivity_float_nll");
  ASSERT_TRUE(std::isfinite(nll32) && std::isfinite(nll16));
  // bfloat16's 8-bit mantissa moves the float model's NLL, but not far.
  EXPECT_NE(nll32, nll16);
  EXPECT_NEAR(nll16, nll32, 0.02 * nll32);
  EXPECT_EQ(f32->metrics.at("sensitivity_tokens"), bf16->metrics.at("sensitivity_tokens"));
}

TEST_F(SensitivityPassTest, AComputeDtypeOrDeviceItCannotUseIsRefusedByName) {
  RecordingSink sink;
  CancelToken cancel;
  absl::StatusOr<PipelineResult> dtype = RunSensitivityPass(Request("f16"), sink, cancel);
  EXPECT_EQ(dtype.status().code(), absl::StatusCode::kInvalidArgument) << dtype.status();
  EXPECT_THAT(std::string(dtype.status().message()), HasSubstr("spec.resources.compute_dtype"));
  // This LibTorch build has no CUDA (or this machine no GPU): the pass does not fall back to the CPU silently.
  absl::StatusOr<PipelineResult> device = RunSensitivityPass(Request("", "cuda:7"), sink, cancel);
  EXPECT_FALSE(device.ok());
  EXPECT_THAT(std::string(device.status().message()), HasSubstr("resources.gpus"));
}

}  // namespace
}  // namespace quark::worker
