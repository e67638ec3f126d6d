#include "core/runtime/compute_device.h"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "absl/strings/str_cat.h"

namespace quark::runtime {
namespace {

// Quotes at most 64 bytes of caller text in messages.
std::string Quoted(const std::string& text) {
  return absl::StrCat("\"", text.substr(0, 64), text.size() > 64 ? "...\"" : "\"");
}

}  // namespace

absl::StatusOr<at::Device> ResolveDevice(const std::string& text, const std::string& what) {
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty device name (cpu, cuda or cuda:N)"));
  at::Device device(at::kCPU);
  try {
    device = at::Device(text);
  } catch (const std::exception&) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", Quoted(text), " is not a device (cpu, cuda or cuda:N)"));
  }
  if (device.is_cpu()) {
    if (device.has_index() && device.index() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", Quoted(text), " (the CPU has no index but 0)"));
    }
    return at::Device(at::kCPU);
  }
  if (!c10::impl::hasDeviceGuardImpl(device.type())) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": ", device.str(), " is not available: this build of the engine uses a LibTorch without ",
        c10::DeviceTypeName(device.type()), " support (docs/gpu.md says how to build against one)"));
  }
  const int count = c10::impl::getDeviceGuardImpl(device.type())->deviceCount();
  if (count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", device.str(), " is not available: no ", c10::DeviceTypeName(device.type()),
                     " device is visible to this process (driver, CUDA_VISIBLE_DEVICES)"));
  }
  if (!device.has_index()) device.set_index(0);
  if (device.index() >= count) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", device.str(), " does not exist: ", count, " ",
                                                      c10::DeviceTypeName(device.type()), " device",
                                                      count == 1 ? " is" : "s are", " visible"));
  }
  return device;
}

absl::StatusOr<ComputeDevice> ComputeDevice::Open(const std::string& text, const std::string& what) {
  absl::StatusOr<at::Device> device = ResolveDevice(text, what);
  if (!device.ok()) return device.status();
  return ComputeDevice(*device);
}

at::Tensor ComputeDevice::Place(const at::Tensor& x) const {
  if (!x.defined() || x.device() == device_) return x;
  return x.to(device_, /*non_blocking=*/x.is_pinned());
}

at::Tensor ComputeDevice::Stage(const at::Tensor& host) const {
  if (!OverlapsCopies() || !host.defined() || host.is_pinned()) return host;
  return host.pin_memory();
}

at::Tensor ComputeDevice::ToHost(const at::Tensor& x) const {
  if (!x.defined() || x.device().is_cpu()) return x;
  return x.to(at::kCPU);
}

void ComputeDevice::OnSideStream(const std::function<void()>& copies) const {
  if (!OverlapsCopies()) {
    copies();
    return;
  }
  const c10::impl::VirtualGuardImpl guard(device_.type());
  const c10::Stream compute = guard.getStream(device_);
  const c10::Stream side = guard.getStreamFromGlobalPool(device_);
  {
    const c10::StreamGuard on_side(side);
    copies();
  }
  c10::Event copied(device_.type());
  copied.record(side);
  copied.block(compute);
}

void ComputeDevice::Synchronize() const {
  if (!OverlapsCopies()) return;
  const c10::impl::VirtualGuardImpl guard(device_.type());
  guard.synchronizeStream(guard.getStream(device_));
}

ComputeDevice ComputeDeviceForTesting(at::Device device) { return ComputeDevice(device); }

absl::StatusOr<at::ScalarType> ResolveComputeDtype(const std::string& text, const std::string& what) {
  if (text == "f32") return at::kFloat;
  if (text == "bf16") return at::kBFloat16;
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", Quoted(text), " is not one of f32, bf16"));
}

}  // namespace quark::runtime
