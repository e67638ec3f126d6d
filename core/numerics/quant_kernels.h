// The seam between the numerics and a device's kernels. FakeQuantize, FakeQuantizeDynamic and MinMaxOf prepare a
// tensor in the kernel layout (contiguous, the quantization axis placed by quant_layout.h) and hand it to the kernels
// of the tensor's device: CPU tensors to the vectorized CPU kernels (kernels/cpu), tensors on any other device to the
// tensor-op kernels (LibTorch ops with the same element math, so they run wherever LibTorch runs, GPUs included),
// unless a build with device kernels (kernels/cuda) registered its own for that device type. Callers never ask which
// device they are on.
#pragma once

#include <ATen/ATen.h>

#include <string_view>

#include "kernels/cpu/affine_kernels.h"
#include "kernels/cpu/channel_loops.h"
#include "kernels/cpu/format_traits.h"
#include "kernels/cpu/mx_kernels.h"
#include "kernels/element/gptq_row.h"

namespace quark {

/// Parameters of the affine (integer) kernels; scale and zero_point are [channels] float32 on the data's device.
struct AffineKernelArgs {
  at::Tensor scale;
  at::Tensor zero_point;
  int qmin = -128;
  int qmax = 127;
  kernels::RoundMode round = kernels::RoundMode::kHalfEven;
  bool float_zero_point = false;
};

/// The quantization kernels of one kind of device. `in` and `out` are contiguous, of the same shape, dtype (float32,
/// bfloat16 or float16) and device; `out` may be `in`. Element math and results are those of kernels/cpu, bit for bit.
class QuantKernels {
 public:
  virtual ~QuantKernels() = default;
  virtual std::string_view name() const = 0;

  /// Integer fake quantization over the [outer, channels, inner] view of `in`.
  virtual void FakeAffine(const at::Tensor& in, at::Tensor& out, const kernels::ChannelLayout& layout,
                          const AffineKernelArgs& args) const = 0;
  /// Small-float fake quantization; scale is [channels] float32 on the data's device.
  virtual void FakeFloat(const at::Tensor& in, at::Tensor& out, const kernels::ChannelLayout& layout,
                         const at::Tensor& scale, kernels::ElemFormat format) const = 0;
  /// OCP MX on [rows, len] (blocks of 32 along len); exps is [rows, blocks] int8 on the data's device, or undefined
  /// to take each block's exponent from its own amax.
  virtual void FakeMx(const at::Tensor& in, at::Tensor& out, int64_t rows, int64_t len, const kernels::MxArgs& args,
                      const at::Tensor& exps) const = 0;
  /// min and max of every channel as [channels] float32 CPU tensors (NaN anywhere in a channel gives NaN).
  virtual void ChannelMinMax(const at::Tensor& in, const kernels::ChannelLayout& layout, at::Tensor& min,
                             at::Tensor& max) const = 0;
  /// max |x| of every MX block as a [rows * blocks] float32 CPU tensor (NaN propagates).
  virtual void MxBlockAmax(const at::Tensor& in, int64_t rows, int64_t len, at::Tensor& amax) const = 0;
  /// The sequential part of one GPTQ block on an integer or float grid (kernels/element/gptq_row.h) on this device's
  /// memory, in one launch. false (nothing done) where the device has no such kernel: the caller then runs the
  /// block column by column in tensor operations, with the same bits.
  virtual bool GptqBlock(const kernels::element::GptqBlockArgs& /*args*/) const { return false; }
  /// NVFP4 fake quantization of [rows, len] (groups of 16 along len, kernels/cpu/nvfp4_kernels.h) with global scale
  /// `global`; `blk` is [rows, len / 16] float32 (e4m3 values) on the data's device, or undefined: each group's scale
  /// from its own amax. false (nothing done) where the device has no such kernel: the caller computes on the CPU.
  virtual bool FakeNvfp4(const at::Tensor& /*in*/, at::Tensor& /*out*/, int64_t /*rows*/, int64_t /*len*/,
                         float /*global*/, const at::Tensor& /*blk*/) const {
    return false;
  }
};

/// The kernels for tensors on `device` (see the header comment).
const QuantKernels& QuantKernelsFor(const at::Device& device);

/// The vectorized CPU kernels (CPU tensors only).
const QuantKernels& CpuQuantKernels();
/// LibTorch tensor ops with the CPU kernels' element math: any device.
const QuantKernels& TensorOpQuantKernels();

/// Makes `kernels` (static storage) the kernels of `type`; called at start-up by a device kernel library.
void RegisterQuantKernels(c10::DeviceType type, const QuantKernels* kernels);

}  // namespace quark
