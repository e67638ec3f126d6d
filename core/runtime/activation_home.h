// Where a streamed layer's calibration activations are kept between the forwards that read them: on the compute
// device, or in host memory when the samples' hidden states do not fit the device memory budget beside the layer
// (#27: LayerStreamer decides it layer by layer). Kept on the host, a sample crosses to the device only while it
// computes, and what a pass keeps of a forward (the next layer's inputs, the float model's outputs, a linear's
// recorded inputs) comes back to the host at once: the device then holds one sample in and out, not all of them.
//
// Passes never ask which it is: they Place what they compute with and Hold what they keep. On the CPU, and on a
// device with room, both are the identity.
#pragma once

#include <ATen/ATen.h>

namespace quark::runtime {

class ActivationHome {
 public:
  /// Everything on the CPU: nothing moves.
  ActivationHome() = default;
  ActivationHome(at::Device compute, bool on_host) : compute_(compute), on_host_(on_host && !compute.is_cpu()) {}

  /// Whether activations are kept in host memory while the layer computes on another device.
  bool on_host() const { return on_host_; }
  const at::Device& compute_device() const { return compute_; }

  /// x where the layer computes: x itself when it is there already.
  at::Tensor Place(const at::Tensor& x) const { return IsOnComputeDevice(x) ? x : x.to(compute_); }
  /// x where activations are kept: a host copy when they are kept on the host, else x itself.
  at::Tensor Hold(const at::Tensor& x) const { return on_host_ && !x.device().is_cpu() ? x.to(at::kCPU) : x; }
  /// A copy of x that outlives the forward it came from, where activations are kept: Hold's host copy, else a clone
  /// (never x itself, whose buffer the forward may reuse).
  at::Tensor Keep(const at::Tensor& x) const { return on_host_ && !x.device().is_cpu() ? x.to(at::kCPU) : x.clone(); }

 private:
  // "cuda" without an index is the current GPU, where the layer's weights were placed.
  bool IsOnComputeDevice(const at::Tensor& x) const {
    return x.device().type() == compute_.type() && (!compute_.has_index() || x.device().index() == compute_.index());
  }

  at::Device compute_{at::kCPU};
  bool on_host_ = false;
};

}  // namespace quark::runtime
