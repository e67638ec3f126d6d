// Large CPU tensors get mappings of their own, 2 MiB-aligned and advised for transparent huge pages; small ones and
// LibTorch's raw allocations keep working through the same allocator.
#include "core/engine/large_tensors.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/runtime/test_paths.h"

namespace quark {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The kernel's THPeligible for the mapping that starts at p (/proc/self/smaps), -1 when it is not listed.
int ThpEligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto start = reinterpret_cast<uintptr_t>(p);
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream fields(line);
    if (fields >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin == start;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

class LargeTensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { runtime::testing::InitTestEngine(); }
};

TEST_F(LargeTensorsTest, LargeTensorsAreAlignedAdvisedAndWork) {
  at::Tensor large = at::empty({static_cast<int64_t>(kLargeTensorBytes / sizeof(float)) + 5}, at::kFloat);
  const auto address = reinterpret_cast<uintptr_t>(large.data_ptr());
  EXPECT_EQ(address % kHugePage, 0u);
  large.fill_(3.0f);
  EXPECT_TRUE(at::all(large == 3.0f).item<bool>());
  const std::string mode = ReadFile("/sys/kernel/mm/transparent_hugepage/enabled");
  if (mode.find("[never]") == std::string::npos && !mode.empty()) {
    EXPECT_EQ(ThpEligible(large.data_ptr()), 1) << "THP mode: " << mode;
  }
  // Small tensors still come from LibTorch's allocator.
  at::Tensor small = at::arange(1000, at::kFloat);
  EXPECT_EQ(small.sum().item<double>(), 999.0 * 1000.0 / 2.0);
}

TEST_F(LargeTensorsTest, GrowingAndFreeingAcrossTheThresholdKeepsTheData) {
  for (int round = 0; round < 3; ++round) {
    at::Tensor t = at::arange(1000, at::kFloat);
    t.resize_({static_cast<int64_t>(kLargeTensorBytes / sizeof(float)) * 2});  // reallocates: copied over
    EXPECT_EQ(t.slice(0, 0, 1000).sum().item<double>(), 999.0 * 1000.0 / 2.0);
    t = at::Tensor();
  }
}

TEST_F(LargeTensorsTest, RawAllocationsOfEverySizeRoundTrip) {
  c10::Allocator* allocator = c10::GetCPUAllocator();
  for (const size_t bytes : {size_t{64}, size_t{1} << 20, kLargeTensorBytes, kLargeTensorBytes * 3 + 7}) {
    void* p = allocator->raw_allocate(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    static_cast<char*>(p)[0] = 1;
    static_cast<char*>(p)[bytes - 1] = 2;
    allocator->raw_deallocate(p);
  }
}

}  // namespace
}  // namespace quark
