// The device seam on a machine without a GPU: names are parsed and checked (a device this process cannot use is
// refused, naming it and the flag), and on the CPU every operation is the identity.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "core/runtime/compute_device.h"

namespace quark::runtime {
namespace {

TEST(ComputeDeviceTest, CpuIsAlwaysThere) {
  for (const char* name : {"cpu", "cpu:0"}) {
    absl::StatusOr<at::Device> device = ResolveDevice(name);
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_TRUE(device->is_cpu());
  }
}

TEST(ComputeDeviceTest, TextThatIsNoDeviceIsInvalid) {
  for (const char* name : {"", "gpu", "cuda:x", "cuda:-3", "cpu:1"}) {
    absl::StatusOr<at::Device> device = ResolveDevice(name, "--device");
    ASSERT_FALSE(device.ok()) << name;
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument) << name << ": " << device.status();
    EXPECT_NE(device.status().message().find("--device"), std::string::npos) << device.status();
  }
  // A huge name is quoted, not echoed whole.
  absl::StatusOr<at::Device> device = ResolveDevice(std::string(100000, 'x'));
  ASSERT_FALSE(device.ok());
  EXPECT_LT(device.status().message().size(), 200u);
}

TEST(ComputeDeviceTest, AGpuThisProcessCannotUseIsAFailedPreconditionNamingIt) {
  if (c10::impl::hasDeviceGuardImpl(at::kCUDA) &&
      c10::impl::getDeviceGuardImpl(at::kCUDA)->deviceCount() > 0) {
    GTEST_SKIP() << "this process has a CUDA device";
  }
  for (const char* name : {"cuda", "cuda:0", "cuda:7"}) {
    absl::StatusOr<at::Device> device = ResolveDevice(name, "resources.gpus");
    ASSERT_FALSE(device.ok()) << name;
    EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition) << device.status();
    EXPECT_NE(device.status().message().find("resources.gpus: cuda"), std::string::npos) << device.status();
    EXPECT_NE(device.status().message().find("not available"), std::string::npos) << device.status();
  }
}

TEST(ComputeDeviceTest, OnTheCpuEveryOperationIsTheIdentity) {
  absl::StatusOr<ComputeDevice> cpu = ComputeDevice::Open("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_TRUE(cpu->is_cpu());
  EXPECT_EQ(cpu->name(), "cpu");
  const at::Tensor x = at::arange(10, at::kFloat);
  EXPECT_TRUE(cpu->Place(x).is_same(x));
  EXPECT_TRUE(cpu->Stage(x).is_same(x));
  EXPECT_TRUE(cpu->ToHost(x).is_same(x));
  at::Tensor copied;
  cpu->OnSideStream([&] { copied = x.clone(); });
  EXPECT_TRUE(at::equal(copied, x));
  cpu->Synchronize();
  EXPECT_FALSE(cpu->Place(at::Tensor()).defined());
}

}  // namespace
}  // namespace quark::runtime
