// The quantization kernels as LibTorch tensor ops, for tensors on any device. Each step is one elementwise op that
// rounds its float32 result once (no contraction across ops), and the bit tricks of kernels/element/element_ops.h
// are written as int32 ops on the float32 bit patterns, so on the CPU the results equal the vectorized kernels' bit
// for bit (tests/numerics/tensor_op_kernels_test.cc), and on a GPU they follow the same formulas.
#include <limits>

#include "core/numerics/quant_kernels.h"

namespace quark {
namespace {

constexpr int64_t kSignBit = std::numeric_limits<int32_t>::min();  // 0x80000000 as an int32 scalar

at::Tensor Bits(const at::Tensor& f) { return f.contiguous().view(at::kInt); }
at::Tensor Floats(const at::Tensor& i) { return i.contiguous().view(at::kFloat); }

// Rne / Round<kMode> of element_ops.h for |v| <= 2^22. at::round is half to even like the add/sub trick; adding +0
// turns the -0 that at::round and at::floor keep for small negative values into the trick's +0.
at::Tensor RoundWith(const at::Tensor& v, kernels::RoundMode mode) {
  if (mode == kernels::RoundMode::kFloor) return at::floor(v).add_(0.0);
  at::Tensor r = at::round(v);
  if (mode == kernels::RoundMode::kHalfAway) {
    const at::Tensor d = v - r;
    const at::Tensor tie = at::logical_or(d == 0.5, d == -0.5);
    r = at::where(tie, at::where(v > 0, v + 0.5, v - 0.5), r);
  }
  return r.add_(0.0);
}

// RoundKeepSign<kMode>: the result carries v's sign bit (a negative value that rounds to zero gives -0).
at::Tensor RoundKeepSign(const at::Tensor& v, kernels::RoundMode mode) {
  return Floats(at::bitwise_or(Bits(RoundWith(v, mode)), at::bitwise_and(Bits(v), kSignBit)));
}

// GridSat: the nearest grid value, saturating at +-max, NaN kept.
at::Tensor GridSat(const at::Tensor& x, const kernels::GridArgs& g) {
  const at::Tensor b = Bits(x);
  const at::Tensor sign = at::bitwise_and(b, kSignBit);
  const at::Tensor a = Floats(at::bitwise_and(b, 0x7FFFFFFF));
  const at::Tensor c = at::where(a > g.max, at::full_like(a, g.max), a);
  const at::Tensor e = at::clamp_min(at::bitwise_right_shift(Bits(c), 23) - 127, g.emin);
  const at::Tensor m = Floats(at::bitwise_left_shift(e + (23 + 127 - g.mbits), 23));
  return Floats(at::bitwise_or(Bits((c + m) - m), sign));
}

// Exact 2^k for int32 k in [-149, 127], as float32.
at::Tensor Pow2(const at::Tensor& k) {
  const at::Tensor normal = at::bitwise_left_shift(k + 127, 23);
  const at::Tensor subnormal = at::bitwise_left_shift(at::ones_like(k), at::clamp_min(k + 149, 0));
  return Floats(at::where(k >= -126, normal, subnormal));
}

// MxSharedExponent on a tensor of block amaxes (NaN-free, >= 0): int32 exponents.
at::Tensor SharedExponents(const at::Tensor& amax, int mbits, int emax, kernels::MxScaleMode mode) {
  at::Tensor b = at::bitwise_and(Bits(amax), 0x7FFFFFFF);
  const at::Tensor zero = b == 0;
  if (mode == kernels::MxScaleMode::kEven) b = at::bitwise_and(b + (1 << (23 - mbits - 1)), 0x7F800000);
  at::Tensor e = at::bitwise_right_shift(b, 23) - 127;
  if (mode == kernels::MxScaleMode::kCeil) e = e + (at::bitwise_and(b, 0x7FFFFF) != 0).to(at::kInt);
  e = at::clamp(e - emax, -127, 127);
  return at::where(zero, at::full_like(e, -126), e);
}

// [channels] float32 parameters shaped to broadcast over [outer, channels, inner].
at::Tensor PerChannel(const at::Tensor& p, const at::Tensor& like) {
  return p.to(like.device(), at::kFloat).reshape({1, -1, 1});
}

// Stores the float32 result r (of the float32 input x, same shape) into out as the CPU kernels store it. A NaN result
// comes only from a NaN input, and the CPU kernels write it as the input's NaN in float32, as 0x7FC0 in bfloat16 and
// as 0x7E00 with the input's sign in float16 (element_ops.h). ATen writes other NaN bits: its vectorized CPU min/max
// (so clamp) give the all-ones NaN, and its vectorized bfloat16 conversion 0xFFFF.
void StoreLikeCpu(const at::Tensor& x, const at::Tensor& r, at::Tensor& out) {
  const at::Tensor nan = at::isnan(r).reshape(out.sizes());
  if (out.scalar_type() == at::kFloat) {
    out.copy_(at::where(nan, x.reshape(out.sizes()), r.reshape(out.sizes())));
    return;
  }
  out.copy_(r.reshape(out.sizes()));
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  if (out.scalar_type() == at::kHalf) {
    const at::Tensor negative = (at::bitwise_and(Bits(x), kSignBit) != 0).reshape(out.sizes());
    out.masked_fill_(at::logical_and(nan, negative), -kNaN);
    out.masked_fill_(at::logical_and(nan, at::logical_not(negative)), kNaN);
  } else {
    out.masked_fill_(nan, kNaN);
  }
}

class TensorOpKernels final : public QuantKernels {
 public:
  std::string_view name() const override { return "tensor-ops"; }

  void FakeAffine(const at::Tensor& in, at::Tensor& out, const kernels::ChannelLayout& l,
                  const AffineKernelArgs& a) const override {
    const at::Tensor x = in.to(at::kFloat).reshape({l.outer, l.channels, l.inner});
    const at::Tensor s = PerChannel(a.scale, x);
    const at::Tensor inv = at::full_like(s, 1.0f).div_(s);
    const at::Tensor z = PerChannel(a.zero_point, x);
    const double qmin = a.qmin;
    const double qmax = a.qmax;
    at::Tensor code;
    if (a.float_zero_point) {
      const at::Tensor v = at::clamp(x * inv + z, qmin - 1.0, qmax + 1.0);
      code = at::clamp(RoundWith(v, a.round), qmin, qmax);
    } else {
      const at::Tensor v = at::clamp(x * inv, (qmin - z) - 1.0, (qmax - z) + 1.0);
      code = at::clamp(RoundWith(v, a.round) + z, qmin, qmax);
    }
    StoreLikeCpu(x, (code - z) * s, out);
  }

  void FakeFloat(const at::Tensor& in, at::Tensor& out, const kernels::ChannelLayout& l, const at::Tensor& scale,
                 kernels::ElemFormat format) const override {
    const kernels::FormatTraits& t = kernels::Traits(format);
    const kernels::GridArgs g{t.mbits, t.emin, t.max};
    const at::Tensor x = in.to(at::kFloat).reshape({l.outer, l.channels, l.inner});
    const at::Tensor s = PerChannel(scale, x);
    const at::Tensor v = at::clamp(x / s, -static_cast<double>(g.max), static_cast<double>(g.max));
    StoreLikeCpu(x, GridSat(v, g) * s, out);
  }

  void FakeMx(const at::Tensor& in, at::Tensor& out, int64_t rows, int64_t len, const kernels::MxArgs& args,
              const at::Tensor& exps) const override {
    const bool is_int = args.element == kernels::ElemFormat::kInt8;
    const kernels::FormatTraits& t = kernels::Traits(is_int ? kernels::ElemFormat::kFp8E4M3 : args.element);
    const int64_t blocks = kernels::MxBlocksPerRow(len);
    const at::Tensor x = at::constant_pad_nd(in.to(at::kFloat).reshape({rows, len}), {0, blocks * 32 - len})
                             .reshape({rows, blocks, 32});
    at::Tensor e;
    if (exps.defined()) {
      e = exps.to(x.device(), at::kInt).reshape({rows, blocks, 1});
    } else {
      const at::Tensor magnitude = at::abs(x);
      const at::Tensor amax = at::where(at::isnan(magnitude), at::zeros_like(magnitude), magnitude).amax(-1, true);
      e = SharedExponents(amax, is_int ? 6 : t.mbits, is_int ? 0 : t.emax, args.mode);
    }
    // Elements are x / 2^(e - shift); 2^(shift - e) above 2^127 is applied in two exact steps through 2^64, as the
    // CPU kernels' prescaled blocks are.
    const int shift = is_int ? 6 : 0;
    const at::Tensor k = shift - e;
    const at::Tensor prescaled = k > 127;
    const at::Tensor up = at::where(prescaled, at::full_like(x, 18446744073709551616.0f), at::ones_like(x));
    const at::Tensor scaled = (x * up) * Pow2(at::where(prescaled, k - 64, k));
    at::Tensor r;
    if (is_int) {
      r = at::clamp(RoundKeepSign(at::clamp(scaled, -128.0, 128.0), args.round), -127.0, 127.0);
    } else {
      r = GridSat(scaled, kernels::GridArgsOf(t));
    }
    const at::Tensor y = (r * Pow2(e - shift)).reshape({rows, blocks * 32}).narrow(1, 0, len);
    StoreLikeCpu(x.reshape({rows, blocks * 32}).narrow(1, 0, len), y, out);
  }

  void ChannelMinMax(const at::Tensor& in, const kernels::ChannelLayout& l, at::Tensor& min,
                     at::Tensor& max) const override {
    const at::Tensor x = in.reshape({l.outer, l.channels, l.inner});
    min = at::amin(x, {0, 2}).to(at::kCPU, at::kFloat);
    max = at::amax(x, {0, 2}).to(at::kCPU, at::kFloat);
  }

  void MxBlockAmax(const at::Tensor& in, int64_t rows, int64_t len, at::Tensor& amax) const override {
    const int64_t blocks = kernels::MxBlocksPerRow(len);
    const at::Tensor x = at::constant_pad_nd(at::abs(in.to(at::kFloat).reshape({rows, len})), {0, blocks * 32 - len});
    amax = x.reshape({rows, blocks, 32}).amax(-1).reshape({-1}).to(at::kCPU);
  }
};

}  // namespace

const QuantKernels& TensorOpQuantKernels() {
  static const TensorOpKernels kernels;
  return kernels;
}

}  // namespace quark
