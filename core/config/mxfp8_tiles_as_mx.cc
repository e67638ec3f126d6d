#include "core/config/mxfp8_tiles_as_mx.h"

#include "core/config/e8m0_tiles.h"

namespace quark {
namespace {

bool IsTileOfOneRowOf32(const QuantSpec& w) {
  return IsE8m0Tiles(w) && w.block_size == std::vector<int>{1, 32} && w.dtype == DType::kFp8E4M3 && w.symmetric &&
         !w.is_dynamic && w.observer == ObserverKind::kMinMax && !w.group_size && !w.mx_element_dtype;
}

bool IsMxfp8DynamicInputOf32(const QuantSpec& in) {
  return IsOcpMx(in) && in.ElementType() == DType::kFp8E4M3 && in.qscheme == QScheme::kPerGroup &&
         in.group_size.value_or(0) == 32 && in.ch_axis.value_or(-1) == -1 && in.is_dynamic && in.symmetric;
}

void SpellAsMx(LayerQuantConfig& layer) {
  if (!IsExportedMxfp8Layer(layer)) return;
  QuantSpec& w = *layer.weight;  // the inverse of hf_quark_config.cc's AsTiles
  w.qscheme = QScheme::kPerGroup;
  w.block_size.clear();
  w.group_size = 32;
  w.ch_axis = -1;
  w.observer = ObserverKind::kMxBlock;
  w.scale_type = ScaleType::kFloat;
  w.scale_format = ScaleFormat::kE8M0;
}

}  // namespace

bool IsExportedMxfp8Layer(const LayerQuantConfig& layer) {
  return layer.weight && layer.input_tensors && IsTileOfOneRowOf32(*layer.weight) &&
         IsMxfp8DynamicInputOf32(*layer.input_tensors);
}

Config WithExportedMxfp8AsMx(Config config) {
  SpellAsMx(config.global_quant_config);
  for (auto& [type, layer] : config.layer_type_quant_config) SpellAsMx(layer);
  for (PatternQuantConfig& entry : config.layer_quant_config) SpellAsMx(entry.config);
  return config;
}

}  // namespace quark
