// The weight specs the GPTQ tests run (gptq_test, gptq_tensor_ops_test, gptq_cuda_test).
#pragma once

#include "core/config/presets.h"
#include "core/config/quant_spec.h"

namespace quark::algorithms::testing {

/// Integer weights per output channel (group_size <= 0) or per group of input columns.
inline QuantSpec IntSpec(DType dtype, bool symmetric, int group_size) {
  QuantSpec spec;
  spec.dtype = dtype;
  spec.symmetric = symmetric;
  if (group_size > 0) {
    spec.qscheme = QScheme::kPerGroup;
    spec.group_size = group_size;
    spec.ch_axis = 1;
  } else {
    spec.qscheme = QScheme::kPerChannel;
    spec.ch_axis = 0;
  }
  return spec;
}

inline QuantSpec Fp8PerChannel() {
  QuantSpec spec;
  spec.dtype = DType::kFp8E4M3;
  spec.qscheme = QScheme::kPerChannel;
  spec.ch_axis = 0;
  return spec;
}

inline QuantSpec Int8PerTensor() {
  QuantSpec spec;
  spec.dtype = DType::kInt8;
  spec.qscheme = QScheme::kPerTensor;
  return spec;
}

inline QuantSpec Mxfp4() {
  QuantSpec spec;
  spec.dtype = DType::kFp4;
  spec.qscheme = QScheme::kPerGroup;
  spec.group_size = 32;
  spec.scale_format = ScaleFormat::kE8M0;
  spec.observer = ObserverKind::kMxBlock;
  spec.scale_type = ScaleType::kFloat32;
  return spec;
}

/// W4A8 (Quark's int4_fp8 weight): an fp8 e4m3 stage per tensor, then symmetric int4 per output channel on its values.
inline QuantSpec W4A8() {
  QuantSpec spec = IntSpec(DType::kInt4, true, -1);
  spec.fp8_first_stage = true;
  return spec;
}

/// NVFP4 weights (the nvfp4_weight_only preset's): fp4 e2m1 in groups of 16 along the input, e4m3 group scales
/// under one float32 global scale.
inline QuantSpec Nvfp4() { return *PresetConfig("nvfp4_weight_only").value().global_quant_config.weight; }

/// fp8 e4m3 weights in 2-D tiles of [rows, cols] (the fp8_block preset's spec, other tile sizes).
inline QuantSpec Fp8Tiles(int rows, int cols) {
  QuantSpec spec = *PresetConfig("fp8_block").value().global_quant_config.weight;
  spec.block_size = {rows, cols};
  return spec;
}

/// Asymmetric uint8 weights in 2-D tiles of [rows, cols].
inline QuantSpec Uint8Tiles(int rows, int cols) {
  QuantSpec spec = Fp8Tiles(rows, cols);
  spec.dtype = DType::kUInt8;
  spec.symmetric = false;
  return spec;
}

}  // namespace quark::algorithms::testing
