// runtime::AllocationMeter: the tensor bytes LibTorch allocates on the CPU, live and at their peak, and what a device
// allocator reports through LibTorch's memory reporting hook (CUDA's caching allocator on a GPU; reported by hand here).
#include "core/runtime/allocation_meter.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

namespace quark::runtime {
namespace {

TEST(AllocationMeterTest, CountsTheCpuTensorsAliveAndTheirPeak) {
  AllocationMeter meter;
  const int64_t before = meter.live_bytes();
  {
    const at::Tensor a = at::empty({1024}, at::kFloat);
    EXPECT_EQ(meter.live_bytes() - before, 4096);
    {
      const at::Tensor b = at::empty({256}, at::kDouble);
      EXPECT_EQ(meter.live_bytes() - before, 4096 + 2048);
    }
    EXPECT_EQ(meter.live_bytes() - before, 4096);
    EXPECT_EQ(meter.peak_bytes() - before, 4096 + 2048);
    meter.ResetPeak();
    EXPECT_EQ(meter.peak_bytes() - before, 4096);
  }
  EXPECT_EQ(meter.live_bytes(), before);
}

// oneDNN's bfloat16 kernels take their buffers through raw_allocate, which needs a DataPtr whose context is its data.
TEST(AllocationMeterTest, RawAllocationsAndBfloat16ProductsWork) {
  AllocationMeter meter;
  const int64_t before = meter.live_bytes();
  c10::Allocator* allocator = c10::GetAllocator(c10::DeviceType::CPU);
  void* raw = allocator->raw_allocate(1000);
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(meter.live_bytes() - before, 1000);
  allocator->raw_deallocate(raw);
  EXPECT_EQ(meter.live_bytes(), before);
  const at::Tensor x = at::ones({64, 64}, at::kBFloat16);
  EXPECT_EQ(at::matmul(x, x).sum().item<float>(), 64.0f * 64 * 64);
}

TEST(AllocationMeterTest, TensorsOutliveTheMeter) {
  at::Tensor kept;
  {
    AllocationMeter meter;
    kept = at::empty({100}, at::kFloat);
  }
  kept.reset();  // freed through the counting allocator's deleter after the meter is gone
  AllocationMeter again;
  const at::Tensor t = at::empty({10}, at::kFloat);
  EXPECT_GE(again.peak_bytes(), again.live_bytes());
}

TEST(AllocationMeterTest, KeepsWhatADeviceAllocatorReports) {
  AllocationMeter meter(/*device_reports=*/true);
  EXPECT_FALSE(meter.device().reported);
  const c10::Device gpu(c10::DeviceType::CUDA, 0);
  int block = 0;
  c10::reportMemoryUsageToProfiler(&block, 1000, 1000, 2 << 20, gpu);
  c10::reportMemoryUsageToProfiler(&block, 3000, 4000, 4 << 20, gpu);
  c10::reportMemoryUsageToProfiler(&block, -3000, 1000, 4 << 20, gpu);
  DeviceAllocatorBytes bytes = meter.device();
  EXPECT_TRUE(bytes.reported);
  EXPECT_EQ(bytes.allocated, 1000);
  EXPECT_EQ(bytes.reserved, 4 << 20);
  EXPECT_EQ(bytes.peak_allocated, 4000);
  EXPECT_EQ(bytes.peak_reserved, 4 << 20);
  meter.ResetPeak();
  EXPECT_EQ(meter.device().peak_allocated, 1000);
  // The CPU allocator's own reports are not the device's.
  c10::reportMemoryUsageToProfiler(&block, 1 << 30, 1 << 30, 0, c10::Device(c10::DeviceType::CPU));
  EXPECT_EQ(meter.device().peak_allocated, 1000);
}

TEST(AllocationMeterTest, DeviceReportsAreOptIn) {
  AllocationMeter meter;
  int block = 0;
  c10::reportMemoryUsageToProfiler(&block, 1000, 1000, 2 << 20, c10::Device(c10::DeviceType::CUDA, 0));
  EXPECT_FALSE(meter.device().reported);
}

}  // namespace
}  // namespace quark::runtime
