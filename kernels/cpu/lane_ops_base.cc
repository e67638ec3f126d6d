// The lane loops for any CPU (baseline instruction set), and the run-time choice of table.
#define QUARK_LANE_NS base
#include "kernels/cpu/lane_ops.h"

#include <c10/util/Half.h>

#include <cstdlib>
#include <cstring>

namespace quark::kernels {
namespace {

void LoadF16(const uint16_t* x, float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = c10::detail::fp16_ieee_to_fp32_value(x[i]);
}

void StoreF16(const float* v, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = c10::detail::fp16_ieee_from_fp32_value(v[i]);
}

void CopyF32(const float* x, float* v, int64_t n) { std::memcpy(v, x, static_cast<size_t>(n) * sizeof(float)); }

// The baseline has no portable non-temporal store worth the complexity: a plain copy.
void StreamCopy(const void* src, void* dst, int64_t bytes) { std::memcpy(dst, src, static_cast<size_t>(bytes)); }

void Transpose8x8(const float* const* src, float* const* dst, bool only_changed) {
  uint32_t block[8][8];
  bool same = only_changed;
  for (int j = 0; j < 8; ++j) {
    for (int k = 0; k < 8; ++k) {
      std::memcpy(&block[k][j], src[j] + k, sizeof(float));
      uint32_t held;
      std::memcpy(&held, dst[k] + j, sizeof(float));
      same = same && held == block[k][j];
    }
  }
  if (same) return;
  for (int k = 0; k < 8; ++k) std::memcpy(dst[k], block[k], sizeof(block[k]));
}

}  // namespace

const LaneTable& BaseLaneTable() {
  static const LaneTable table = [] {
    LaneTable t = base::MakeTable(&LoadF16, &StoreF16, &CopyF32, &StreamCopy);
    t.transpose8x8 = &Transpose8x8;
    return t;
  }();
  return table;
}

#if !defined(QUARK_HAVE_AVX2_LANES)
const LaneTable* Avx2LaneTable() { return nullptr; }
#endif

const LaneTable& LaneOpsForThisCpu() {
  static const LaneTable* table = [] {
    const char* force = std::getenv("QUARK_CPU_BASELINE");
    const bool baseline = force != nullptr && force[0] == '1';
#if defined(__x86_64__) || defined(__i386__)
    if (!baseline && Avx2LaneTable() != nullptr && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c")) {
      return Avx2LaneTable();
    }
#endif
    return &BaseLaneTable();
  }();
  return *table;
}

LaneIo LaneIoFor(int64_t numel, int64_t element_size) {
  return LaneIo{&LaneOpsForThisCpu(), element_size == 4 && numel * element_size >= kStreamOutputBytes};
}

}  // namespace quark::kernels
