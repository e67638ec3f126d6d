// The per-element inner loops of the hot kernels, on float32 "lanes" (chunks converted from / to the tensor's
// dtype), written so that GCC vectorizes them. This header is compiled for two instruction sets: lane_ops_base.cc
// (baseline x86-64 / any CPU) and lane_ops_avx2.cc + bf16_lanes_avx2.cc (both -mavx2 -mfma -mf16c), each set into
// its own namespace (QUARK_LANE_NS) so no inline function compiled for AVX2 can be merged into the baseline build. It includes no c10 / ATen headers for that
// reason. The kernels pick a table at run time (LaneOpsForThisCpu()).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/lane_table.h"

#ifndef QUARK_LANE_NS
#error "define QUARK_LANE_NS before including lane_ops.h"
#endif

namespace quark::kernels::QUARK_LANE_NS {

inline uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float Float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline float Rne(float v) { return (v + 12582912.0f) - 12582912.0f; }  // |v| <= 2^22
inline float Clamp(float v, float lo, float hi) {
  const float a = v < lo ? lo : v;
  return a > hi ? hi : a;
}

// Selects only (no branches), so the loops vectorize (with -fno-trapping-math). 0 half even, 1 half away, 2 floor (RoundMode order).
template <int kMode>
inline float Round(float v) {
  const float r = Rne(v);
  if (kMode == 0) return r;
  if (kMode == 2) return r - static_cast<float>(r > v);
  // Half away from zero: only exact ties differ from half-even; they move one step away from zero.
  const float d = v - r;
  const float away = v > 0.0f ? v + 0.5f : v - 0.5f;
  return (d == 0.5f || d == -0.5f) ? away : r;
}

// The clamped integer (as float32) of one element.
template <int kMode, bool kFloatZp>
inline float AffineCode(float x, float inv, float z, float qmin, float qmax) {
  if (kFloatZp) return Clamp(Round<kMode>(Clamp(x * inv + z, qmin - 1.0f, qmax + 1.0f)), qmin, qmax);
  return Clamp(Round<kMode>(Clamp(x * inv, qmin - z - 1.0f, qmax - z + 1.0f)) + z, qmin, qmax);
}

// Element access of the loops: float32 lanes, or bfloat16 bits converted on the fly (so a bfloat16 tensor is read,
// quantized and written in one pass through registers, with no float32 buffer in between).
struct F32Codec {
  using T = float;
  static float Load(const float* p, int64_t i) { return p[i]; }
  static void Store(float* p, int64_t i, float v) { p[i] = v; }
};

// Round to nearest even; any NaN becomes the quiet NaN 0x7FC0 (as c10::BFloat16 does).
inline uint16_t Bf16Bits(float v) {
  const uint32_t b = Bits(v);
  const uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(v != v ? 0x7FC0u : rounded);  // one unordered compare (the build allows no traps)
}

struct Bf16Codec {
  using T = uint16_t;
  static float Load(const uint16_t* p, int64_t i) { return Float(static_cast<uint32_t>(p[i]) << 16); }
  static void Store(uint16_t* p, int64_t i, float v) { p[i] = Bf16Bits(v); }
};

template <int kMode, bool kFloatZp, typename C>
void AffineRunT(const typename C::T* x, typename C::T* y, int64_t n, float s, float inv, float z, float qmin,
                float qmax) {
  for (int64_t i = 0; i < n; ++i) C::Store(y, i, (AffineCode<kMode, kFloatZp>(C::Load(x, i), inv, z, qmin, qmax) - z) * s);
}

template <int kMode, bool kFloatZp>
void AffineRun(float* v, int64_t n, float s, float inv, float z, float qmin, float qmax) {
  AffineRunT<kMode, kFloatZp, F32Codec>(v, v, n, s, inv, z, qmin, qmax);
}

template <int kMode, bool kFloatZp>
void AffineCols(float* v, int64_t n, const float* s, const float* inv, const float* z, float qmin, float qmax) {
  for (int64_t i = 0; i < n; ++i) v[i] = AffineCode<kMode, kFloatZp>(v[i], inv[i], z[i], qmin, qmax);
  for (int64_t i = 0; i < n; ++i) v[i] = (v[i] - z[i]) * s[i];
}

// Groups of `g` consecutive elements share parameters: element i uses s[i / g] (per_group, per-token rows).
template <int kMode, bool kFloatZp, typename C>
void AffineGroupsT(const typename C::T* x, typename C::T* y, int64_t n, int64_t g, const float* s, const float* inv,
                   const float* z, float qmin, float qmax) {
  for (int64_t k = 0; k * g < n; ++k) {
    const int64_t end = n < (k + 1) * g ? n : (k + 1) * g;
    const float r = inv[k];
    const float zk = z[k];
    const float sk = s[k];
    for (int64_t i = k * g; i < end; ++i) {
      C::Store(y, i, (AffineCode<kMode, kFloatZp>(C::Load(x, i), r, zk, qmin, qmax) - zk) * sk);
    }
  }
}

template <int kMode, bool kFloatZp>
void AffineGroups(float* v, int64_t n, int64_t g, const float* s, const float* inv, const float* z, float qmin,
                  float qmax) {
  AffineGroupsT<kMode, kFloatZp, F32Codec>(v, v, n, g, s, inv, z, qmin, qmax);
}

inline float GridSat(float x, const GridArgs& g) {
  const uint32_t b = Bits(x);
  const uint32_t sign = b & 0x80000000u;
  const float a = Float(b & 0x7FFFFFFFu);
  const float c = a > g.max ? g.max : a;
  int32_t e = static_cast<int32_t>(Bits(c) >> 23) - 127;
  e = e < g.emin ? g.emin : e;
  const float m = Float(static_cast<uint32_t>(e - g.mbits + 23 + 127) << 23);
  return Float(Bits((c + m) - m) | sign);
}

template <typename C>
void FloatRunT(const typename C::T* x, typename C::T* y, int64_t n, float s, const GridArgs& g) {
  for (int64_t i = 0; i < n; ++i) C::Store(y, i, GridSat(Clamp(C::Load(x, i) / s, -g.max, g.max), g) * s);
}

inline void FloatRun(float* v, int64_t n, float s, const GridArgs& g) { FloatRunT<F32Codec>(v, v, n, s, g); }

inline void FloatCols(float* v, int64_t n, const float* s, const GridArgs& g) {
  for (int64_t i = 0; i < n; ++i) v[i] = GridSat(Clamp(v[i] / s[i], -g.max, g.max), g) * s[i];
}

template <typename C>
void FloatGroupsT(const typename C::T* x, typename C::T* y, int64_t n, int64_t group, const float* s,
                  const GridArgs& g) {
  for (int64_t k = 0; k * group < n; ++k) {
    const int64_t end = n < (k + 1) * group ? n : (k + 1) * group;
    const float sk = s[k];
    for (int64_t i = k * group; i < end; ++i) C::Store(y, i, GridSat(Clamp(C::Load(x, i) / sk, -g.max, g.max), g) * sk);
  }
}

inline void FloatGroups(float* v, int64_t n, int64_t group, const float* s, const GridArgs& g) {
  FloatGroupsT<F32Codec>(v, v, n, group, s, g);
}

// MX: element i of v belongs to block i / 32 with multipliers inv[block] = 2^-e and s[block] = 2^e (exact).
template <typename C>
void MxGridT(const typename C::T* x, typename C::T* y, int64_t n, const float* inv, const float* s, const GridArgs& g) {
  for (int64_t b = 0; b * 32 < n; ++b) {
    const int64_t end = n < (b + 1) * 32 ? n : (b + 1) * 32;
    const float bi = inv[b];
    const float bs = s[b];
    for (int64_t i = b * 32; i < end; ++i) C::Store(y, i, GridSat(C::Load(x, i) * bi, g) * bs);
  }
}

inline void MxGrid(float* v, int64_t n, const float* inv, const float* s, const GridArgs& g) {
  MxGridT<F32Codec>(v, v, n, inv, s, g);
}

// Round<kMode> with the sign of zero of torch.round / floor: a negative v that rounds to zero gives -0 (the add/sub
// trick of Rne gives +0). Only zero results change: any other result already has v's sign.
template <int kMode>
inline float RoundKeepSign(float v) {
  return Float(Bits(Round<kMode>(v)) | (Bits(v) & 0x80000000u));
}

// MXINT8: clamp(round(x * inv), -127, 127) * s. A negative x that rounds to zero gives -0, as AMD Quark's
// torch.round(x / scale) * scale does (the MX float formats keep the sign through GridSat).
template <int kMode, typename C>
void MxIntT(const typename C::T* x, typename C::T* y, int64_t n, const float* inv, const float* s) {
  for (int64_t b = 0; b * 32 < n; ++b) {
    const int64_t end = n < (b + 1) * 32 ? n : (b + 1) * 32;
    const float bi = inv[b];
    const float bs = s[b];
    for (int64_t i = b * 32; i < end; ++i) {
      C::Store(y, i, Clamp(RoundKeepSign<kMode>(Clamp(C::Load(x, i) * bi, -128.0f, 128.0f)), -127.0f, 127.0f) * bs);
    }
  }
}

template <int kMode>
void MxInt(float* v, int64_t n, const float* inv, const float* s) {
  MxIntT<kMode, F32Codec>(v, v, n, inv, s);
}

// amax[b] = max |v| over block b (NaN ignored here; the kernels check NaN separately).
template <typename C>
void BlockAmaxT(const typename C::T* v, int64_t n, float* amax) {
  for (int64_t b = 0; b * 32 < n; ++b) {
    const int64_t end = n < (b + 1) * 32 ? n : (b + 1) * 32;
    float m = 0.0f;
    for (int64_t i = b * 32; i < end; ++i) {
      const float a = Float(Bits(C::Load(v, i)) & 0x7FFFFFFFu);
      m = a > m ? a : m;
    }
    amax[b] = m;
  }
}

inline void BlockAmax(const float* v, int64_t n, float* amax) { BlockAmaxT<F32Codec>(v, n, amax); }

inline void LoadBf16(const uint16_t* x, float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = Float(static_cast<uint32_t>(x[i]) << 16);
}

inline void StoreBf16(const float* v, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Bf16Bits(v[i]);
}

/// The table of this compilation's loops; the float16 conversions and the copies are supplied by the including file.
inline LaneTable MakeTable(void (*load_f16)(const uint16_t*, float*, int64_t),
                           void (*store_f16)(const float*, uint16_t*, int64_t),
                           void (*copy_f32)(const float*, float*, int64_t),
                           void (*stream_copy)(const void*, void*, int64_t)) {
  LaneTable t;
  t.affine_run[0][0] = &AffineRun<0, false>;
  t.affine_run[0][1] = &AffineRun<0, true>;
  t.affine_run[1][0] = &AffineRun<1, false>;
  t.affine_run[1][1] = &AffineRun<1, true>;
  t.affine_run[2][0] = &AffineRun<2, false>;
  t.affine_run[2][1] = &AffineRun<2, true>;
  t.affine_cols[0][0] = &AffineCols<0, false>;
  t.affine_cols[0][1] = &AffineCols<0, true>;
  t.affine_cols[1][0] = &AffineCols<1, false>;
  t.affine_cols[1][1] = &AffineCols<1, true>;
  t.affine_cols[2][0] = &AffineCols<2, false>;
  t.affine_cols[2][1] = &AffineCols<2, true>;
  t.affine_groups[0][0] = &AffineGroups<0, false>;
  t.affine_groups[0][1] = &AffineGroups<0, true>;
  t.affine_groups[1][0] = &AffineGroups<1, false>;
  t.affine_groups[1][1] = &AffineGroups<1, true>;
  t.affine_groups[2][0] = &AffineGroups<2, false>;
  t.affine_groups[2][1] = &AffineGroups<2, true>;
  t.float_groups = &FloatGroups;
  t.float_run = &FloatRun;
  t.float_cols = &FloatCols;
  t.mx_grid = &MxGrid;
  t.mx_int[0] = &MxInt<0>;
  t.mx_int[1] = &MxInt<1>;
  t.mx_int[2] = &MxInt<2>;
  t.block_amax = &BlockAmax;
  t.bf16.affine_run[0][0] = &AffineRunT<0, false, Bf16Codec>;
  t.bf16.affine_run[0][1] = &AffineRunT<0, true, Bf16Codec>;
  t.bf16.affine_run[1][0] = &AffineRunT<1, false, Bf16Codec>;
  t.bf16.affine_run[1][1] = &AffineRunT<1, true, Bf16Codec>;
  t.bf16.affine_run[2][0] = &AffineRunT<2, false, Bf16Codec>;
  t.bf16.affine_run[2][1] = &AffineRunT<2, true, Bf16Codec>;
  t.bf16.affine_groups[0][0] = &AffineGroupsT<0, false, Bf16Codec>;
  t.bf16.affine_groups[0][1] = &AffineGroupsT<0, true, Bf16Codec>;
  t.bf16.affine_groups[1][0] = &AffineGroupsT<1, false, Bf16Codec>;
  t.bf16.affine_groups[1][1] = &AffineGroupsT<1, true, Bf16Codec>;
  t.bf16.affine_groups[2][0] = &AffineGroupsT<2, false, Bf16Codec>;
  t.bf16.affine_groups[2][1] = &AffineGroupsT<2, true, Bf16Codec>;
  t.bf16.float_run = &FloatRunT<Bf16Codec>;
  t.bf16.float_groups = &FloatGroupsT<Bf16Codec>;
  t.bf16.mx_grid = &MxGridT<Bf16Codec>;
  t.bf16.mx_int[0] = &MxIntT<0, Bf16Codec>;
  t.bf16.mx_int[1] = &MxIntT<1, Bf16Codec>;
  t.bf16.mx_int[2] = &MxIntT<2, Bf16Codec>;
  t.bf16.block_amax = &BlockAmaxT<Bf16Codec>;
  t.load_bf16 = &LoadBf16;
  t.store_bf16 = &StoreBf16;
  t.copy_f32 = copy_f32;
  t.stream_copy = stream_copy;
  t.load_f16 = load_f16;
  t.store_f16 = store_f16;
  return t;
}

}  // namespace quark::kernels::QUARK_LANE_NS
