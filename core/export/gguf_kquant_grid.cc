#include "core/export/gguf_kquant_grid.h"

#include <algorithm>

#include "core/base/strings.h"
#include "core/export/gguf_kquant_search.h"
#include "core/export/gguf_kquants.h"

// Built with -ffp-contract=off, as gguf_kquants.cc and gguf_kquant_dequant.cc: the rounding and the decoded values
// use their expressions, operation for operation.

namespace quark::exporter::gguf {
namespace {

using kquant::NearestInt;

// Q4_K (kNmax 15) and Q5_K (31): element 64c + l in the low nibble of qs[32c + l], 64c + 32 + l in the high one;
// Q5_K's fifth bit in qh[l] bit 2c (first half) or 2c + 1 (second).
template <int kNmax, typename Block>
float RoundQ45(Block* y, int index, float x) {
  uint8_t sc, m;
  kquant::GetScaleMinK4(index / 32, y->scales, &sc, &m);
  const float d1 = Fp16ToFp32(y->d) * sc, m1 = Fp16ToFp32(y->dmin) * m;
  // Clamped before rounding (the same code for every finite x; NearestInt only takes |f| < 2^22).
  const int l = d1 ? NearestInt(std::clamp((x + m1) / d1, 0.f, static_cast<float>(kNmax))) : 0;
  const int c = index / 64, within = index % 64, byte = 32 * c + within % 32;
  const bool high = within >= 32;
  uint8_t& qs = y->qs[byte];
  qs = high ? static_cast<uint8_t>((qs & 0x0F) | ((l & 0xF) << 4)) : static_cast<uint8_t>((qs & 0xF0) | (l & 0xF));
  if constexpr (kNmax == 31) {
    const uint8_t bit = static_cast<uint8_t>(1u << (2 * c + (high ? 1 : 0)));
    uint8_t& qh = y->qh[within % 32];
    qh = l > 15 ? static_cast<uint8_t>(qh | bit) : static_cast<uint8_t>(qh & ~bit);
  }
  return d1 * l - m1;
}

// Q6_K: element 128h + 32q + l: low nibble in ql[64h + l + 32(q & 1)] (high nibble for q >= 2), top 2 bits in
// qh[32h + l] at bit 2q; sub-block scale scales[8h + 2q + l / 16].
float RoundQ6(BlockQ6_K* y, int index, float x) {
  const int h = index / 128, q = (index % 128) / 32, l = index % 32;
  const float d = Fp16ToFp32(y->d) * y->scales[index / 16];
  const int code = d ? NearestInt(std::clamp(x / d, -32.f, 31.f)) + 32 : 32;
  uint8_t& ql = y->ql[64 * h + l + 32 * (q & 1)];
  ql = q >= 2 ? static_cast<uint8_t>((ql & 0x0F) | ((code & 0xF) << 4))
              : static_cast<uint8_t>((ql & 0xF0) | (code & 0xF));
  uint8_t& qh = y->qh[32 * h + l];
  qh = static_cast<uint8_t>((qh & ~(3u << (2 * q))) | (((code >> 4) & 3) << (2 * q)));
  return d * static_cast<int8_t>(code - 32);
}

}  // namespace

bool IsKQuantGridType(GgmlType type) {
  return type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K;
}

absl::Status KQuantGrid::Check(GgmlType type) {
  if (IsKQuantGridType(type)) return absl::OkStatus();
  const TypeTraits* traits = FindType(type);
  return absl::InvalidArgumentError(StrCat("type: ", traits ? traits->name : "unknown",
                                           " has no fixed-grid rounding here (Q4_K, Q5_K and Q6_K have)"));
}

void KQuantGrid::Search(const float* x, const float* qw, void* block) const {
  switch (type_) {
    case GgmlType::kQ4_K:
      QuantizeQ4_K(x, block, 1, kQkK, qw);
      break;
    case GgmlType::kQ5_K:
      QuantizeQ5_K(x, block, 1, kQkK, qw);
      break;
    default:
      QuantizeQ6_K(x, block, 1, kQkK, qw);
      break;
  }
}

float KQuantGrid::RoundInto(void* block, int index, float x) const {
  switch (type_) {
    case GgmlType::kQ4_K:
      return RoundQ45<15>(static_cast<BlockQ4_K*>(block), index, x);
    case GgmlType::kQ5_K:
      return RoundQ45<31>(static_cast<BlockQ5_K*>(block), index, x);
    default:
      return RoundQ6(static_cast<BlockQ6_K*>(block), index, x);
  }
}

}  // namespace quark::exporter::gguf
