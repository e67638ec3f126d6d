// Powers written out as eager PyTorch computes them, so that every device gives the CPU's bits.
//
// ATen's CPU and CUDA kernels of pow(Tensor, Scalar) take exponent 2 as x * x and 0.5 as sqrt: exact or correctly
// rounded, the same on every device. A backend that passes the exponent as a tensor calls powf instead: under
// LibTorch 2.6 the lazy tensors (the device-parity tests' device) are one float32 step off in ~2% of elements for
// both exponents (measured on 65,536 normal values), which moved RMSNorm outputs and SmoothQuant scales. Forward
// computations whose results are compared across devices use these, and AutoRound's loss (x * x's gradient is
// pow's: grad * x + grad * x = grad * (2 * x), but for subnormal products); the other training code (learned
// rotation, the trainer) keeps pow (nothing compares it across devices).
#pragma once

#include <ATen/ATen.h>

namespace quark::runtime {

/// x * x, what eager pow(x, 2) computes.
inline at::Tensor Squared(const at::Tensor& x) { return x.mul(x); }

/// x^e, with e == 0.5 as sqrt and e == 2 as x * x (what eager pow(x, e) computes for them).
inline at::Tensor PowAsEager(const at::Tensor& x, double e) {
  if (e == 0.5) return x.sqrt();
  if (e == 2.0) return Squared(x);
  return x.pow(e);
}

}  // namespace quark::runtime
