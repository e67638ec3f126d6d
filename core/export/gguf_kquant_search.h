// The scale searches of ggml-quants.c that the K-quant and IQ4 quantizers share (internal to core/export). Each
// keeps ggml's expression order: the files are built with -ffp-contract=off so that the floats round as ggml's do.
#pragma once

#include <cstdint>
#include <cstring>

namespace quark::exporter::gguf::kquant {

inline constexpr float kGroupMaxEps = 1e-15f;

/// ggml's nearest_int: round half to even through the 1.5·2^23 trick (|f| <= 4194303).
inline int NearestInt(float f) {
  const float v = f + 12582912.f;
  int i;
  std::memcpy(&i, &v, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

/// Symmetric codes L in [0, 2·nmax) (offset nmax) and a signed scale; `qw` or the rmse_type weighting.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* qw);
/// Q3_K's x²-weighted symmetric codes with up to 5 single-code refinement passes.
float MakeQ3Quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse);
/// Asymmetric codes L in [0, nmax] with a scale and a non-positive min (`the_min` = −min); weights required.
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, uint8_t* Laux,
                     float rmin, float rdelta, int nstep, bool use_mad);
/// As MakeQkx2Quants; null weights mean x².
float MakeQkx3Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, uint8_t* Laux,
                     float rmin, float rdelta, int nstep, bool use_mad);
/// Non-negative codes of non-negative x (the sub-block scales) weighted by `quant_weights`.
float MakeQpQuants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights);
/// Index of the value of `val` (n ascending) nearest to x.
int BestIndexInt8(int n, const int8_t* val, float x);

/// Q4_K/Q5_K: 6-bit scale and min j of the 12 packed bytes.
inline void GetScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

/// Q4_K/Q5_K: packs 6-bit scale `ls` and min `lm` of sub-block j (bytes j - 4 and j must be written first for j >= 4).
inline void PutScaleMinK4(int j, uint8_t ls, uint8_t lm, uint8_t* q) {
  if (j < 4) {
    q[j] = ls;
    q[j + 4] = lm;
  } else {
    q[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
    q[j - 4] |= ((ls >> 4) << 6);
    q[j - 0] |= ((lm >> 4) << 6);
  }
}

}  // namespace quark::exporter::gguf::kquant
