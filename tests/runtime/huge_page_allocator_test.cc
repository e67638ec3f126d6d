// runtime::InstallHugePageCpuAllocator: LibTorch's large CPU tensors aligned to 2 MiB and advised onto transparent
// huge pages (the kernel's own record of the advice, /proc/self/smaps, is what is checked), small ones from LibTorch's
// allocator, raw allocations as oneDNN takes them, the allocation meter in front of it, and QUARK_HUGE_PAGES=0.
#include "core/runtime/huge_page_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include "core/runtime/allocation_meter.h"
#include "core/runtime/layer_streamer.h"

namespace quark::runtime {
namespace {

// The VmFlags of the mapping that holds `address`, from /proc/self/smaps ("" when none holds it).
std::string VmFlagsAt(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-' && line.find(':') > line.find(' ')) {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8);
    }
  }
  return "";
}

// Whether this kernel has transparent huge pages at all (without them the advice is refused, and the memory is
// ordinary memory).
bool KernelHasTransparentHugePages() {
  return std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled");
}

// The advice is the mapping's "hg" flag.
bool AdvisedHuge(const void* address) {
  std::istringstream flags(VmFlagsAt(address));
  std::string flag;
  while (flags >> flag) {
    if (flag == "hg") return true;
  }
  return false;
}

TEST(HugePageAllocatorTest, LargeTensorsAreAlignedAndAdvisedSmallOnesAreLibTorchs) {
  ASSERT_TRUE(InstallHugePageCpuAllocator());
  EXPECT_TRUE(InstallHugePageCpuAllocator()) << "idempotent";
  EXPECT_TRUE(HugePageCpuAllocatorInstalled());

  // 6 MiB + 4 bytes: an odd size, over the threshold.
  at::Tensor large = at::empty({(int64_t{6} << 20) / 4 + 1}, at::kFloat);
  const auto address = reinterpret_cast<uintptr_t>(large.data_ptr());
  EXPECT_EQ(address % kHugePageBytes, 0u);
  ASSERT_FALSE(VmFlagsAt(large.data_ptr()).empty()) << "no mapping holds the tensor";
  if (KernelHasTransparentHugePages()) {
    EXPECT_TRUE(AdvisedHuge(large.data_ptr())) << VmFlagsAt(large.data_ptr());
    EXPECT_TRUE(AdvisedHuge(static_cast<char*>(large.data_ptr()) + large.nbytes() - 1)) << "the tail";
  }
  large.fill_(1.5f);
  EXPECT_EQ(large.sum().item<double>(), 1.5 * static_cast<double>(large.numel()));

  // One byte under the threshold: LibTorch's own allocator, 64-byte aligned, not advised by us.
  const at::Tensor small = at::empty({static_cast<int64_t>(kHugePageThresholdBytes) - 1}, at::kByte);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data_ptr()) % 64, 0u);
  const at::Tensor threshold = at::empty({static_cast<int64_t>(kHugePageThresholdBytes)}, at::kByte);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(threshold.data_ptr()) % kHugePageBytes, 0u) << "the threshold itself";
}

// More than the machine can give: refused as LibTorch's allocator refuses, which the engine reports as out of memory
// (RESOURCE_EXHAUSTED naming what was being done), never a crash.
TEST(HugePageAllocatorTest, ARefusedAllocationIsTheEnginesOutOfMemory) {
  ASSERT_TRUE(InstallHugePageCpuAllocator());
  try {
    const at::Tensor too_large = at::empty({int64_t{1} << 58}, at::kByte);
    ADD_FAILURE() << "2^58 bytes were allocated";
  } catch (const std::exception& error) {
    const absl::Status status = TorchErrorToStatus(error, "layer 3");
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    EXPECT_NE(status.message().find("288230376151711744 bytes"), std::string::npos) << status;
  }
}

// oneDNN's bfloat16 kernels take their buffers through raw_allocate (context == data) and give them back through
// raw_deallocate: both sizes.
TEST(HugePageAllocatorTest, RawAllocationsAndBfloat16ProductsWork) {
  ASSERT_TRUE(InstallHugePageCpuAllocator());
  c10::Allocator* allocator = c10::GetAllocator(c10::DeviceType::CPU);
  for (const size_t bytes : {size_t{1000}, size_t{5} << 20}) {
    void* raw = allocator->raw_allocate(bytes);
    ASSERT_NE(raw, nullptr) << bytes;
    static_cast<char*>(raw)[bytes - 1] = 7;
    allocator->raw_deallocate(raw);
  }
  const at::Tensor x = at::ones({1024, 1024}, at::kBFloat16);  // 2 MiB operands, a 2 MiB product
  EXPECT_EQ(at::matmul(x, x).to(at::kFloat).mean().item<float>(), 1024.0f);
}

TEST(HugePageAllocatorTest, TheMeterCountsInFrontAndPutsItBack) {
  ASSERT_TRUE(InstallHugePageCpuAllocator());
  c10::Allocator* huge = c10::GetAllocator(c10::DeviceType::CPU);
  {
    AllocationMeter meter;
    const int64_t before = meter.live_bytes();
    const at::Tensor t = at::empty({int64_t{3} << 20}, at::kFloat);
    EXPECT_EQ(meter.live_bytes() - before, int64_t{12} << 20);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kHugePageBytes, 0u) << "counted, still on huge pages";
  }
  EXPECT_EQ(c10::GetAllocator(c10::DeviceType::CPU), huge);
  const at::Tensor after = at::empty({int64_t{3} << 20}, at::kFloat);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(after.data_ptr()) % kHugePageBytes, 0u);
}

// QUARK_HUGE_PAGES=0 leaves LibTorch's allocator alone: in a process of its own (the install is once per process).
TEST(HugePageAllocatorDeathTest, QuarkHugePagesZeroLeavesLibTorchsAllocator) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("QUARK_HUGE_PAGES", "0", 1);
        c10::Allocator* before = c10::GetAllocator(c10::DeviceType::CPU);
        const bool installed = InstallHugePageCpuAllocator();
        std::exit(!installed && !HugePageCpuAllocatorInstalled() &&
                          c10::GetAllocator(c10::DeviceType::CPU) == before
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace quark::runtime
