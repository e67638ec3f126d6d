// LibTorch's lazy-tensor device (TorchScript backend) as a compute device for tests: a device that is not the CPU
// yet computes real values (each materialisation runs the traced graph through TorchScript on the CPU). A pass
// that leaves a tensor on the CPU beside a lazy one stops the process (LibTorch's check "Input tensor is not a lazy
// tensor"), and results can be compared with the CPU path's, so device placement and the host hand-offs of a pass
// are proven here without a GPU. (The meta device proves placement too, but computes no values.)
#pragma once

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/lazy/ts_backend/ts_backend_impl.h>

#include <mutex>

#include "core/runtime/compute_device.h"

namespace quark::testing {

inline runtime::ComputeDevice LazyComputeDevice() {
  static std::once_flag initialised;
  std::call_once(initialised, [] {
    // The traced graphs run op by op, as the CPU path computes them, with none of TorchScript's graph passes. With
    // them, LibTorch 2.6 (Debian's, built with LLVM) compiled every materialised graph with the TensorExpr fuser: a
    // pipeline run that takes seconds with 1.13 did not finish in 10 minutes.
    torch::jit::setGraphExecutorOptimize(false);
    torch::lazy::InitTorchScriptBackend();
  });
  return runtime::ComputeDeviceForTesting(at::Device(at::kLazy, 0));
}

}  // namespace quark::testing
