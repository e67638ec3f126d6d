// The per-element inner loops of the hot kernels, on float32 "lanes" (chunks converted from / to the tensor's
// dtype), written so that GCC vectorizes them. This header is compiled for two instruction sets: lane_ops_base.cc
// (baseline x86-64 / any CPU) and lane_ops_avx2.cc + bf16_lanes_avx2.cc (both -mavx2 -mfma -mf16c), each set into
// its own namespace (QUARK_LANE_NS) so no inline function compiled for AVX2 can be merged into the baseline build. It includes no c10 / ATen headers for that
// reason. The kernels pick a table at run time (LaneOpsForThisCpu()).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/lane_table.h"
#include "kernels/element/element_ops.h"

#ifndef QUARK_LANE_NS
#error "define QUARK_LANE_NS before including lane_ops.h"
#endif

namespace quark::kernels::QUARK_LANE_NS {

// Bits, Float, Rne, Clamp, Round<kMode>, AffineCode, Bf16Bits, GridSat, RoundKeepSign and MxIntValue come from
// kernels/element/element_ops.h, compiled into this namespace: the same formulas the CUDA kernels run.

// Element access of the loops: float32 lanes, or bfloat16 bits converted on the fly (so a bfloat16 tensor is read,
// quantized and written in one pass through registers, with no float32 buffer in between).
struct F32Codec {
  using T = float;
  static float Load(const float* p, int64_t i) { return p[i]; }
  static void Store(float* p, int64_t i, float v) { p[i] = v; }
};

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

template <typename C>
void FloatRunT(const typename C::T* x, typename C::T* y, int64_t n, float s, const GridArgs& g) {
  for (int64_t i = 0; i < n; ++i) C::Store(y, i, ScaledGridValue(C::Load(x, i), s, g) * s);
}

inline void FloatRun(float* v, int64_t n, float s, const GridArgs& g) { FloatRunT<F32Codec>(v, v, n, s, g); }

inline void FloatCols(float* v, int64_t n, const float* s, const GridArgs& g) {
  for (int64_t i = 0; i < n; ++i) v[i] = ScaledGridValue(v[i], s[i], g) * s[i];
}

template <typename C>
void FloatGroupsT(const typename C::T* x, typename C::T* y, int64_t n, int64_t group, const float* s,
                  const GridArgs& g) {
  for (int64_t k = 0; k * group < n; ++k) {
    const int64_t end = n < (k + 1) * group ? n : (k + 1) * group;
    const float sk = s[k];
    for (int64_t i = k * group; i < end; ++i) C::Store(y, i, ScaledGridValue(C::Load(x, i), sk, g) * sk);
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

// MXINT8: clamp(round(x * inv), -127, 127) * s. A negative x that rounds to zero gives -0, as AMD Quark's
// torch.round(x / scale) * scale does (the MX float formats keep the sign through GridSat).
template <int kMode, typename C>
void MxIntT(const typename C::T* x, typename C::T* y, int64_t n, const float* inv, const float* s) {
  for (int64_t b = 0; b * 32 < n; ++b) {
    const int64_t end = n < (b + 1) * 32 ? n : (b + 1) * 32;
    const float bi = inv[b];
    const float bs = s[b];
    for (int64_t i = b * 32; i < end; ++i) {
      C::Store(y, i, MxIntValue<kMode>(C::Load(x, i), bi) * bs);
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
