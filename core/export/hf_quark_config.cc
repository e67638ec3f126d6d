// The config an HF-quark export declares (hf_quark_config.h).
#include "core/export/hf_quark_config.h"

#include "core/config/e8m0_tiles.h"

namespace quark::exporter {
namespace {

// OCP MXFP8 e4m3 in blocks of 32 along the last (input) axis.
bool IsMxfp8Along(const QuantSpec& s) {
  return IsOcpMx(s) && s.ElementType() == DType::kFp8E4M3 && s.group_size.value_or(32) == 32 &&
         s.ch_axis.value_or(-1) != 0 && s.ch_axis.value_or(-1) != -2;
}

// MXFP8 weights as E8M0 tiles [1, 32]: the same codes and E8M0 bytes, the dequantization 2^(b - 127) * fp8.
QuantSpec AsTiles(const QuantSpec& mx) {
  QuantSpec s = mx;
  s.dtype = DType::kFp8E4M3;
  s.mx_element_dtype.reset();
  s.qscheme = QScheme::kPerBlock;
  s.block_size = {1, 32};
  s.group_size.reset();
  s.ch_axis.reset();
  s.symmetric = true;
  s.observer = ObserverKind::kMinMax;  // a tile's amax, as MX's block amax (E8m0TileIssues)
  s.scale_format = ScaleFormat::kE8M0;
  s.scale_type = ScaleType::kFloat32;  // written as float8_e8m0fnu (quark_json.cc)
  return s;
}

// MXINT8 in Quark's spelling (OCP_MXINT8Spec.to_quantization_spec: dtype mx, mx_element_dtype int8, group 32).
void SpellMxint8(std::optional<QuantSpec>& s) {
  if (!s || !IsOcpMx(*s) || s->ElementType() != DType::kInt8 || s->dtype == DType::kMx) return;
  s->dtype = DType::kMx;
  s->mx_element_dtype = DType::kInt8;
  s->scale_format = ScaleFormat::kFloat;  // dtype mx carries the E8M0 scales; Quark's spec names no scale_format
}

LayerQuantConfig ExportForm(LayerQuantConfig c) {
  if (c.weight && !c.weight->is_dynamic && IsMxfp8Along(*c.weight)) c.weight = AsTiles(*c.weight);
  for (std::optional<QuantSpec>* s : {&c.weight, &c.input_tensors, &c.output_tensors, &c.bias}) SpellMxint8(*s);
  return c;
}

}  // namespace

Config HfQuarkExportConfig(const Config& config) {
  Config out = config;
  out.global_quant_config = ExportForm(out.global_quant_config);
  for (auto& [type, layer] : out.layer_type_quant_config) layer = ExportForm(layer);
  for (auto* entries : {&out.layer_quant_config, &out.kv_cache_quant_config}) {
    for (PatternQuantConfig& e : *entries) e.config = ExportForm(e.config);
  }
  return out;
}

}  // namespace quark::exporter
