#include "core/export/onnx_quant_nodes.h"

#include <limits>

#include "core/base/strings.h"
#include "core/config/e8m0_tiles.h"  // #30
#include "core/numerics/quant_layout.h"

namespace quark::exporter::onnx_export {
namespace {

using Attr = OnnxGraph::Attr;

absl::Status Refuse(const std::string& module, const char* field, const std::string& why) {
  return absl::InvalidArgumentError(StrCat(module, ".", field, ": ", why));
}

// The ONNX element type codes of `dtype` are stored in, when a QuantizeLinear / DequantizeLinear can carry it.
std::optional<int32_t> QuantOnnxType(DType dtype) {
  switch (dtype) {
    case DType::kInt8:
      return kOnnxInt8;
    case DType::kUInt8:
      return kOnnxUInt8;
    case DType::kInt4:
      return kOnnxInt4;
    case DType::kUInt4:
      return kOnnxUInt4;
    case DType::kFp8E4M3:
      return kOnnxFloat8E4M3FN;
    case DType::kFp8E5M2:
      return kOnnxFloat8E5M2;
    default:
      return std::nullopt;
  }
}

// int3 / int2 weight codes fit an int8 DequantizeLinear exactly (the codes are already on their grid).
int32_t WeightOnnxType(DType dtype) {
  if (dtype == DType::kInt3 || dtype == DType::kInt2) return kOnnxInt8;
  return *QuantOnnxType(dtype);
}

int TypeOpset(int32_t onnx_type) {
  if (onnx_type == kOnnxInt4 || onnx_type == kOnnxUInt4) return 21;
  if (onnx_type == kOnnxFloat8E4M3FN || onnx_type == kOnnxFloat8E5M2) return 19;
  return 17;
}

bool IsFloat8(int32_t onnx_type) { return onnx_type == kOnnxFloat8E4M3FN || onnx_type == kOnnxFloat8E5M2; }

absl::StatusOr<int> SpecOpset(const std::string& module, const char* field, const QuantSpec& spec, bool is_weight) {
  if (IsE8m0Tiles(spec)) {  // #30, before MX (IsMx() is true for it)
    return Refuse(module, field, "E8M0 tiles (fp8_e4m3 per 2-D block with power-of-two scales) have no ONNX "
                                 "DequantizeLinear form (its blocks run along one axis); export it as hf_quark");
  }
  if (spec.IsMx()) {
    return Refuse(module, field, StrCat("MX (", Name(spec.ElementType()), " with shared E8M0 block scales) has no ",
                                        "ONNX QuantizeLinear/DequantizeLinear form; export it as hf_quark"));
  }
  if (IsCastType(spec.dtype)) return 17;
  if (spec.IsProgressive()) {  // #30 W4A8: ((q * s1) * s0) is two rescalings, a DequantizeLinear has one
    return Refuse(module, field, "W4A8's two-stage weight (fp8, then int4 per channel) has no single "
                                 "DequantizeLinear form; export it as hf_quark");
  }
  if (spec.dtype == DType::kFp6E3M2 || spec.dtype == DType::kFp6E2M3 || spec.dtype == DType::kFp4) {
    return Refuse(module, field, StrCat("dtype ", Name(spec.dtype), " has no ONNX element type at opset <= 21"));
  }
  if (!spec.symmetric && spec.zero_point_type == ZeroPointType::kFloat32) {
    return Refuse(module, field, "zero_point_type float32: ONNX zero points are integers of the quantized type");
  }
  const bool dynamic = !is_weight && spec.is_dynamic;
  if (!is_weight && !dynamic && spec.qscheme == QScheme::kPerGroup) {
    return Refuse(module, field, "static per_group activations have no ONNX QuantizeLinear form");
  }
  int opset = 17;
  if (auto t = QuantOnnxType(spec.ElementType())) {
    opset = TypeOpset(*t);
  } else if (IsFloatFormat(spec.ElementType())) {
    return Refuse(module, field, StrCat("dtype ", Name(spec.dtype), " has no ONNX element type"));
  }
  if (is_weight && spec.qscheme == QScheme::kPerGroup) opset = std::max(opset, 21);  // block_size
  return opset;
}

// Codes of 4-bit types two per byte, the first element in the low nibble (ONNX's INT4/UINT4 layout).
at::Tensor PackNibbles(const at::Tensor& codes) {
  at::Tensor flat = codes.contiguous().view(-1).to(at::kInt).bitwise_and(0xF);
  if (flat.numel() % 2 != 0) flat = at::cat({flat, at::zeros({1}, at::kInt)});
  const at::Tensor pairs = flat.view({-1, 2});
  return pairs.select(1, 0).bitwise_or(pairs.select(1, 1).bitwise_left_shift(4)).to(at::kByte).contiguous();
}

// Codes (or zero points) as the bytes of `onnx_type`.
at::Tensor CodeBytes(const at::Tensor& codes, int32_t onnx_type) {
  if (onnx_type == kOnnxInt4 || onnx_type == kOnnxUInt4) return PackNibbles(codes);
  if (onnx_type == kOnnxInt8) return codes.to(at::kChar).contiguous();
  return codes.to(at::kByte).contiguous();
}

std::string ScalarOrShape(const std::vector<int64_t>& dims) { return dims.empty() ? "()" : ShapeString(dims); }

}  // namespace

absl::StatusOr<int> RequiredOpset(const std::string& module, const LayerQuantConfig& config, int64_t out_features,
                                  int64_t in_features) {
  int opset = 17;
  const std::pair<const std::optional<QuantSpec>*, const char*> fields[] = {
      {&config.weight, "weight"}, {&config.input_tensors, "input_tensors"}, {&config.output_tensors, "output_tensors"}};
  for (const auto& [spec, field] : fields) {
    if (!spec->has_value()) continue;
    auto o = SpecOpset(module, field, **spec, spec == &config.weight);
    if (!o.ok()) return o.status();
    opset = std::max(opset, *o);
  }
  if (config.weight && !IsCastType(config.weight->dtype)) {
    if (auto layout = ResolveLayout(*config.weight, TensorRole::kWeight, {out_features, in_features}); !layout.ok()) {
      return Refuse(module, "weight", std::string(layout.status().message()));
    }
  }
  return opset;
}

absl::StatusOr<std::string> FloatWeightValue(OnnxGraph& g, const std::string& name, const at::Tensor& weight) {
  return g.FloatInitializer(name, weight.to(at::kFloat).t().contiguous());
}

absl::StatusOr<std::string> WeightValue(OnnxGraph& g, const LinearExportData& data) {
  const std::string base = data.module + ".weight";
  if (!data.config.weight) return FloatWeightValue(g, base, data.weight);
  const QuantSpec& spec = *data.config.weight;
  if (IsCastType(spec.dtype)) {
    // The weight already went through the cast and back: storing it in the cast type is exact.
    const bool bf16 = spec.dtype == DType::kBFloat16;
    const at::Tensor w = data.weight.t().to(bf16 ? at::kBFloat16 : at::kHalf).contiguous();
    auto init = g.Initializer(base, bf16 ? kOnnxBFloat16 : kOnnxFloat16, w.sizes().vec(), w);
    if (!init.ok()) return init.status();
    return g.Op("Cast", {*init}, base + "_float", {OnnxGraph::Int("to", kOnnxFloat)});
  }
  const RealQuantized& q = data.weight_codes;
  if (!q.codes.defined() || q.codes.dim() != 2) {
    return absl::InvalidArgumentError(StrCat(data.module, ".weight_codes: missing or not [out, in]"));
  }
  auto layout = ResolveLayout(spec, TensorRole::kWeight, q.codes.sizes());
  if (!layout.ok()) return Refuse(data.module, "weight", std::string(layout.status().message()));
  const int32_t type = WeightOnnxType(spec.ElementType());
  const at::Tensor codes = q.codes.t().contiguous();  // [in, out]
  auto w = g.Initializer(base + "_quantized", type, codes.sizes().vec(), CodeBytes(codes, type));
  if (!w.ok()) return w.status();
  // Scales and zero points in the transposed layout: per channel keeps its vector with the axis flipped; per group
  // along `in` transposes (out, in/g) to (in/g, out), along `out` it already is (in, out/g).
  at::Tensor scale = q.scale.to(at::kFloat), zero = q.zero_point;
  std::vector<Attr> attrs;
  if (layout->granularity == Granularity::kPerChannel) {
    attrs.push_back(OnnxGraph::Int("axis", 1 - layout->axis));
  } else if (layout->granularity == Granularity::kPerGroup) {
    if (layout->axis == 1) {
      scale = scale.t();
      zero = zero.defined() ? zero.t() : zero;
    }
    attrs.push_back(OnnxGraph::Int("axis", 1 - layout->axis));
    attrs.push_back(OnnxGraph::Int("block_size", layout->group_size > 0 ? layout->group_size
                                                                         : q.codes.size(layout->axis)));
  } else if (layout->granularity != Granularity::kPerTensor) {
    return Refuse(data.module, "weight", "granularity has no DequantizeLinear form");
  }
  scale = scale.contiguous();
  auto s = g.Initializer(base + "_scale", kOnnxFloat, scale.sizes().vec(), scale);
  if (!s.ok()) return s.status();
  std::string zp;
  if (!IsFloat8(type)) {  // float8 DequantizeLinear takes no zero point
    const at::Tensor z = zero.defined() ? zero.contiguous() : at::zeros(scale.sizes(), at::kInt);
    if (z.sizes() != scale.sizes()) {
      return absl::InvalidArgumentError(StrCat(data.module, ".weight_zero_point: shape ", ScalarOrShape(z.sizes().vec()),
                                               " differs from the scale's ", ScalarOrShape(scale.sizes().vec())));
    }
    auto zi = g.Initializer(base + "_zero_point", type, z.sizes().vec(), CodeBytes(z, type));
    if (!zi.ok()) return zi.status();
    zp = *zi;
  }
  return g.Op("DequantizeLinear", {*w, *s, zp}, base + "_dequantized", std::move(attrs));
}

namespace {

// round(v) by the spec's round_method: ONNX Round is half to even.
std::string RoundBy(OnnxGraph& g, const std::string& v, RoundMethod method, const std::string& name) {
  switch (method) {
    case RoundMethod::kHalfEven:
      return g.Op("Round", {v}, name + "_round");
    case RoundMethod::kFloor:
      return g.Op("Floor", {v}, name + "_floor");
    case RoundMethod::kRound: {  // half away from zero: sign(v) * floor(|v| + 0.5)
      const std::string up = g.Op("Floor", {g.Op("Add", {g.Op("Abs", {v}, name + "_abs"), g.ConstF32(0.5f)},
                                                 name + "_half")}, name + "_floor");
      return g.Op("Mul", {g.Op("Sign", {v}, name + "_sign"), up}, name + "_round");
    }
  }
  return v;
}

// Scale (and integer zero point, as float) of `x` reduced over `axes` (empty = all), numerics.md's formulas.
std::pair<std::string, std::string> DynamicParams(OnnxGraph& g, const std::string& x, const std::vector<int64_t>& axes,
                                                  const QuantSpec& spec, const std::string& name) {
  const float eps = std::numeric_limits<float>::epsilon();
  const bool keep = !axes.empty();
  const DType el = spec.ElementType();
  if (IsFloatFormat(el)) {
    // s = amax / fmax, a zero scale replaced by eps.
    const float fmax = el == DType::kFp8E4M3 ? 448.0f : 57344.0f;
    const std::string amax = g.Reduce("ReduceMax", g.Op("Abs", {x}, name + "_abs"), axes, keep, name + "_amax");
    const std::string s = g.Op("Div", {amax, g.ConstF32(fmax)}, name + "_s");
    const std::string zero = g.Op("Equal", {s, g.ConstF32(0.0f)}, name + "_is_zero");
    return {g.Op("Where", {zero, g.ConstF32(eps), s}, name + "_scale"), ""};
  }
  const auto [qmin, qmax] = IntegerRange(el);
  const float span = static_cast<float>(qmax - qmin);
  const std::string lo = g.Op("Min", {g.Reduce("ReduceMin", x, axes, keep, name + "_min"), g.ConstF32(0.0f)}, name + "_mn");
  const std::string hi = g.Op("Max", {g.Reduce("ReduceMax", x, axes, keep, name + "_max"), g.ConstF32(0.0f)}, name + "_mx");
  if (spec.symmetric) {
    // s = max(max(-mn, mx) / ((qmax - qmin) / 2), eps), z = 0.
    const std::string m = g.Op("Max", {g.Op("Neg", {lo}, name + "_neg"), hi}, name + "_absmax");
    const std::string s = g.Op("Div", {m, g.ConstF32(span / 2.0f)}, name + "_s");
    return {g.Op("Max", {s, g.ConstF32(eps)}, name + "_scale"), ""};
  }
  // s = max((mx - mn) / (qmax - qmin), eps), z = clamp(qmin - round(mn / s), qmin, qmax).
  const std::string s = g.Op("Max", {g.Op("Div", {g.Op("Sub", {hi, lo}, name + "_range"), g.ConstF32(span)}, name + "_s"),
                                     g.ConstF32(eps)}, name + "_scale");
  const std::string r = g.Op("Round", {g.Op("Div", {lo, s}, name + "_mn_s")}, name + "_mn_round");
  const std::string z = g.Op("Clip", {g.Op("Sub", {g.ConstF32(static_cast<float>(qmin)), r}, name + "_z"),
                                      g.ConstF32(static_cast<float>(qmin)), g.ConstF32(static_cast<float>(qmax))},
                             name + "_zero_point");
  return {s, z};
}

// x quantized and dequantized with float scale `s` (and zero point `z`, float, may be ""), both broadcasting
// against x, as the engine computes it: integers clamp(round(x * (1/s)) + z, qmin, qmax), floats the format's grid
// of clamp(x / s, +-fmax) (a saturating Cast to float8).
absl::StatusOr<std::string> FakeQuantArithmetic(OnnxGraph& g, const std::string& x, const std::string& s,
                                                const std::string& z, const QuantSpec& spec, const std::string& name) {
  const DType el = spec.ElementType();
  if (IsFloatFormat(el)) {
    const int32_t t = *QuantOnnxType(el);
    const std::string scaled = g.Op("Div", {x, s}, name + "_scaled");
    const std::string f8 = g.Op("Cast", {scaled}, name + "_f8", {OnnxGraph::Int("to", t), OnnxGraph::Int("saturate", 1)});
    return g.Op("Mul", {g.Op("Cast", {f8}, name + "_f32", {OnnxGraph::Int("to", kOnnxFloat)}), s}, name + "_dq");
  }
  const auto [qmin, qmax] = IntegerRange(el);
  std::string q = RoundBy(g, g.Op("Mul", {x, g.Op("Reciprocal", {s}, name + "_inv")}, name + "_scaled"),
                          spec.round_method, name);
  if (!z.empty()) q = g.Op("Add", {q, z}, name + "_shift");
  q = g.Op("Clip", {q, g.ConstF32(static_cast<float>(qmin)), g.ConstF32(static_cast<float>(qmax))}, name + "_q");
  if (!z.empty()) q = g.Op("Sub", {q, z}, name + "_unshift");
  return g.Op("Mul", {q, s}, name + "_dq");
}

absl::StatusOr<std::string> DynamicActivation(OnnxGraph& g, const std::string& x, int64_t width, const QuantSpec& spec,
                                              const std::string& name) {
  auto layout = ResolveLayout(spec, TensorRole::kActivation, {1, width});
  if (!layout.ok()) return layout.status();
  if (layout->granularity == Granularity::kPerTensor) {
    auto [s, z] = DynamicParams(g, x, {}, spec, name);
    return FakeQuantArithmetic(g, x, s, z, spec, name);
  }
  if (layout->granularity == Granularity::kPerToken) {
    auto [s, z] = DynamicParams(g, x, {-1}, spec, name);
    return FakeQuantArithmetic(g, x, s, z, spec, name);
  }
  if (layout->granularity == Granularity::kPerGroup && layout->axis == 1) {
    // Groups of the last axis: [..., width] -> [..., width / g, g], one scale per group.
    const int64_t group = layout->group_size > 0 ? layout->group_size : width;
    const std::string shape = g.Op("Shape", {x}, name + "_shape");
    const std::string grouped = g.Op("Reshape", {x, g.ConstI64({0, 0, width / group, group})}, name + "_grouped");
    auto [s, z] = DynamicParams(g, grouped, {-1}, spec, name);
    auto dq = FakeQuantArithmetic(g, grouped, s, z, spec, name);
    if (!dq.ok()) return dq.status();
    return g.Op("Reshape", {*dq, shape}, name + "_ungrouped");
  }
  return absl::InvalidArgumentError(StrCat("dynamic ", Name(spec.qscheme), " on axis ", layout->axis,
                                           " has no ONNX form here"));
}

}  // namespace

absl::StatusOr<std::string> QuantizeActivation(OnnxGraph& g, const std::string& x, int64_t width,
                                               const QuantSpec& spec, const std::optional<QuantParams>& params,
                                               const std::string& name) {
  if (IsCastType(spec.dtype)) {
    const int32_t t = spec.dtype == DType::kBFloat16 ? kOnnxBFloat16 : kOnnxFloat16;
    const std::string narrow = g.Op("Cast", {x}, name + "_cast", {OnnxGraph::Int("to", t)});
    return g.Op("Cast", {narrow}, name + "_uncast", {OnnxGraph::Int("to", kOnnxFloat)});
  }
  if (spec.is_dynamic) {
    auto y = DynamicActivation(g, x, width, spec, name);
    if (!y.ok()) return absl::InvalidArgumentError(StrCat(name, ": ", std::string(y.status().message())));
    return y;
  }
  if (!params) return absl::FailedPreconditionError(StrCat(name, ": static activation without calibrated parameters"));
  const at::Tensor scale = params->scale.to(at::kFloat).contiguous();
  const auto type = QuantOnnxType(spec.ElementType());
  if (!type || spec.round_method != RoundMethod::kHalfEven) {
    // int3 / int2 ranges and other roundings than QuantizeLinear's half-to-even: the same arithmetic as the engine.
    auto s = g.FloatInitializer(name + "_scale", scale);
    if (!s.ok()) return s.status();
    std::string z;
    if (params->zero_point.defined() && params->zero_point.ne(0).any().item<bool>()) {
      auto zi = g.FloatInitializer(name + "_zero_point", params->zero_point.to(at::kFloat));
      if (!zi.ok()) return zi.status();
      z = *zi;
    }
    return FakeQuantArithmetic(g, x, *s, z, spec, name);
  }
  std::vector<Attr> attrs;
  if (scale.dim() == 1) attrs.push_back(OnnxGraph::Int("axis", -1));  // static per channel: the hidden axis
  auto s = g.Initializer(name + "_scale", kOnnxFloat, scale.sizes().vec(), scale);
  if (!s.ok()) return s.status();
  // The zero point also fixes QuantizeLinear's output type: always written (zeros for symmetric and float8).
  const at::Tensor zero = params->zero_point.defined() ? params->zero_point : at::zeros(scale.sizes(), at::kInt);
  const at::Tensor zbytes = IsFloat8(*type) ? at::zeros(scale.sizes(), at::kByte) : CodeBytes(zero, *type);
  auto z = g.Initializer(name + "_zero_point", *type, scale.sizes().vec(), zbytes);
  if (!z.ok()) return z.status();
  std::vector<Attr> qattrs = attrs;
  if (IsFloat8(*type)) qattrs.push_back(OnnxGraph::Int("saturate", 1));
  const std::string q = g.Op("QuantizeLinear", {x, *s, *z}, name + "_quantized", std::move(qattrs));
  return g.Op("DequantizeLinear", {q, *s, *z}, name + "_dequantized", std::move(attrs));
}

}  // namespace quark::exporter::onnx_export
