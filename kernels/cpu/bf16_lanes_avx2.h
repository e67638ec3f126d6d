// Hand-written AVX2 loops for bfloat16 data, for the entries of Bf16LaneTable that weights spend their time in.
#pragma once

#include "kernels/cpu/lane_table.h"

namespace quark::kernels {

/// `generic` (the compiler-vectorized bfloat16 loops of lane_ops.h, AVX2 build) with its hot entries replaced by
/// hand-written AVX2 loops that give the same bits. Defined only where lane_ops_avx2.cc is compiled.
Bf16LaneTable HandWrittenAvx2Bf16Lanes(const Bf16LaneTable& generic);

}  // namespace quark::kernels
