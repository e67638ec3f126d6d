// LibTorch's lazy-tensor device (TorchScript backend) as a compute device for tests: a device that is not the CPU
// yet computes real values (each materialisation runs the traced graph through TorchScript on the CPU). A pass
// that leaves a tensor on the CPU beside a lazy one stops the process (LibTorch's check "Input tensor is not a lazy
// tensor"), and results can be compared with the CPU path's, so device placement and the host hand-offs of a pass
// are proven here without a GPU. (The meta device proves placement too, but computes no values.)
#pragma once

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/lazy/core/config.h>
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
    // No cache of compiled graphs: with it, of two graphs the same but for their input data (SmoothQuant's
    // k_proj * s, then v_proj * s; AWQ's trial outputs of one sample, then the next), the second came back with the
    // first one's result (LibTorch 1.13 and 2.6; seen by materialising both and comparing with the CPU's products).
    // Each graph is compiled anew instead, which these small models afford.
    FLAGS_torch_lazy_compilation_cache_size = 0;
    torch::lazy::InitTorchScriptBackend();
  });
  return runtime::ComputeDeviceForTesting(at::Device(at::kLazy, 0));
}

}  // namespace quark::testing
