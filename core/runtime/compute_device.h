// Where the engine computes: the one device seam. Passes ask it to place tensors, stage host data for an
// asynchronous copy, bring results back and synchronise; none of them asks which kind of device it is on. On the CPU
// every call is the identity (no copy, no stream); on a GPU (a LibTorch build with CUDA or ROCm) placement copies,
// staging pins host memory and side-stream copies overlap the compute stream.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace quark::runtime {

/// Parses "cpu", "cuda", "cuda:N" (ROCm builds of LibTorch name their GPUs cuda too) and checks that this process can
/// use the device. INVALID_ARGUMENT for text that names no device; FAILED_PRECONDITION naming the device when this
/// LibTorch build has no such backend or the device does not exist (the message says how many there are).
/// `what` names the flag or field in messages ("--device", "resources.gpus").
absl::StatusOr<at::Device> ResolveDevice(const std::string& text, const std::string& what = "--device");

/// The dtype the streamed layers and their activations compute in: "f32" (float32) or "bf16" (bfloat16).
/// INVALID_ARGUMENT naming `what` (the flag or field) for anything else.
absl::StatusOr<at::ScalarType> ResolveComputeDtype(const std::string& text, const std::string& what);

/// Whether each operation on `device` is a kernel launch queued for it (a GPU: CUDA or HIP): a search that runs many
/// small operations pays a launch for each there, and batches its trials within a larger allowance
/// (quantize::SearchBatchBytes, algorithms/search_batch.h). Not the CPU, whose operations run as they are called.
inline bool QueuesLaunches(const at::Device& device) { return device.is_cuda() || device.is_hip(); }

class ComputeDevice {
 public:
  /// The CPU.
  ComputeDevice() = default;
  /// ResolveDevice, then a device handle.
  static absl::StatusOr<ComputeDevice> Open(const std::string& text, const std::string& what = "--device");

  const at::Device& device() const { return device_; }
  bool is_cpu() const { return device_.is_cpu(); }
  /// Whether copies to this device run beside its compute (a GPU's side streams): then loading the next layer while
  /// this one computes pays, and a second layer's weights are worth their memory. Not on the CPU, nor on devices
  /// whose work is synchronous.
  bool OverlapsCopies() const { return device_.is_cuda() || device_.is_hip(); }
  std::string name() const { return device_.str(); }

  /// x on this device: x itself when it is already there, else a copy (asynchronous when x is pinned host memory).
  at::Tensor Place(const at::Tensor& x) const;
  /// Host data ready for an asynchronous copy to this device: a pinned copy for a GPU, x itself for the CPU.
  at::Tensor Stage(const at::Tensor& host) const;
  /// x in host memory (exports, checkpoints, CPU-only steps): x itself when it is there.
  at::Tensor ToHost(const at::Tensor& x) const;
  /// Runs `copies` with a side stream of the device current, then makes the compute stream wait for them: the next
  /// layer's weights cross the bus while this one computes. On the CPU it simply runs `copies`.
  void OnSideStream(const std::function<void()>& copies) const;
  /// Waits until the device has finished the work queued on its current stream (nothing on the CPU).
  void Synchronize() const;

 private:
  explicit ComputeDevice(at::Device device) : device_(device) {}
  friend ComputeDevice ComputeDeviceForTesting(at::Device device);
  at::Device device_{at::kCPU};
};

/// A handle on any device LibTorch knows, unchecked: tests place layers on the meta device (shapes only), where a
/// tensor left behind on the CPU makes the forward fail.
ComputeDevice ComputeDeviceForTesting(at::Device device);

}  // namespace quark::runtime
