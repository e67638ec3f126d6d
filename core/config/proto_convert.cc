#include "core/config/proto_convert.h"

#include "core/base/strings.h"
#include "core/base/status_macros.h"
#include "core/base/overloaded.h"

namespace quark {
namespace {

namespace pb = ::quark::v1;

// The public overloads (header) stay visible next to this file's private ones.
using ::quark::FromProto;
using ::quark::ToProto;

// Each table lists (engine value, proto value); index 0 of a proto enum is UNSPECIFIED and means "default".
template <typename Engine, typename Proto, size_t N>
using EnumTable = std::array<std::pair<Engine, Proto>, N>;

constexpr EnumTable<DType, pb::DataType, 14> kDTypes{{
    {DType::kInt8, pb::DATA_TYPE_INT8},         {DType::kUInt8, pb::DATA_TYPE_UINT8},
    {DType::kInt4, pb::DATA_TYPE_INT4},         {DType::kUInt4, pb::DATA_TYPE_UINT4},
    {DType::kInt3, pb::DATA_TYPE_INT3},         {DType::kInt2, pb::DATA_TYPE_INT2},
    {DType::kFp8E4M3, pb::DATA_TYPE_FP8_E4M3},  {DType::kFp8E5M2, pb::DATA_TYPE_FP8_E5M2},
    {DType::kFp6E3M2, pb::DATA_TYPE_FP6_E3M2},  {DType::kFp6E2M3, pb::DATA_TYPE_FP6_E2M3},
    {DType::kFp4, pb::DATA_TYPE_FP4},           {DType::kMx, pb::DATA_TYPE_MX},
    {DType::kBFloat16, pb::DATA_TYPE_BFLOAT16}, {DType::kFloat16, pb::DATA_TYPE_FLOAT16},
}};
constexpr EnumTable<QScheme, pb::QScheme, 4> kQSchemes{{
    {QScheme::kPerTensor, pb::QSCHEME_PER_TENSOR},
    {QScheme::kPerChannel, pb::QSCHEME_PER_CHANNEL},
    {QScheme::kPerGroup, pb::QSCHEME_PER_GROUP},
    {QScheme::kPerBlock, pb::QSCHEME_PER_BLOCK},
}};
constexpr EnumTable<ObserverKind, pb::ObserverType, 5> kObservers{{
    {ObserverKind::kMinMax, pb::OBSERVER_TYPE_MIN_MAX},
    {ObserverKind::kPercentile, pb::OBSERVER_TYPE_PERCENTILE},
    {ObserverKind::kMse, pb::OBSERVER_TYPE_MSE},
    {ObserverKind::kMxBlock, pb::OBSERVER_TYPE_MX_BLOCK},
    {ObserverKind::kImatrixMse, pb::OBSERVER_TYPE_IMATRIX_MSE},  // #35
}};
constexpr EnumTable<ScaleType, pb::ScaleType, 5> kScaleTypes{{
    {ScaleType::kFloat, pb::SCALE_TYPE_FLOAT},       {ScaleType::kFloat32, pb::SCALE_TYPE_FLOAT32},
    {ScaleType::kFloat16, pb::SCALE_TYPE_FLOAT16},   {ScaleType::kBFloat16, pb::SCALE_TYPE_BFLOAT16},
    {ScaleType::kPof2, pb::SCALE_TYPE_POF2},
}};
constexpr EnumTable<RoundMethod, pb::RoundMethod, 3> kRounds{{
    {RoundMethod::kHalfEven, pb::ROUND_METHOD_HALF_EVEN},
    {RoundMethod::kRound, pb::ROUND_METHOD_ROUND},
    {RoundMethod::kFloor, pb::ROUND_METHOD_FLOOR},
}};
constexpr EnumTable<ScaleFormat, pb::ScaleFormat, 3> kScaleFormats{{
    {ScaleFormat::kFloat, pb::SCALE_FORMAT_FLOAT}, {ScaleFormat::kE8M0, pb::SCALE_FORMAT_E8M0},
    {ScaleFormat::kE4M3, pb::SCALE_FORMAT_E4M3},
}};
constexpr EnumTable<ScaleCalculationMode, pb::ScaleCalculationMode, 3> kScaleCalcs{{
    {ScaleCalculationMode::kEven, pb::SCALE_CALCULATION_MODE_EVEN},
    {ScaleCalculationMode::kFloor, pb::SCALE_CALCULATION_MODE_FLOOR},
    {ScaleCalculationMode::kCeil, pb::SCALE_CALCULATION_MODE_CEIL},
}};
constexpr EnumTable<ZeroPointType, pb::ZeroPointType, 2> kZeroPoints{{
    {ZeroPointType::kInt32, pb::ZERO_POINT_TYPE_INT32}, {ZeroPointType::kFloat32, pb::ZERO_POINT_TYPE_FLOAT32},
}};
constexpr EnumTable<QuantMode, pb::QuantMode, 2> kQuantModes{{
    {QuantMode::kEager, pb::QUANT_MODE_EAGER}, {QuantMode::kFxGraph, pb::QUANT_MODE_FX_GRAPH},
}};
constexpr EnumTable<PackMethod, pb::PackMethod, 2> kPackMethods{{
    {PackMethod::kReorder, pb::PACK_METHOD_REORDER}, {PackMethod::kOrder, pb::PACK_METHOD_ORDER},
}};

template <typename Engine, typename Proto, size_t N>
Proto ToProtoEnum(const EnumTable<Engine, Proto, N>& table, Engine v) {
  for (const auto& [engine, proto] : table) {
    if (engine == v) return proto;
  }
  return static_cast<Proto>(0);
}

// Unspecified (0) keeps `fallback`; an out-of-range number (from a newer client) is an error.
template <typename Engine, typename Proto, size_t N>
absl::Status FromProtoEnum(const EnumTable<Engine, Proto, N>& table, int v, const std::string& field, Engine fallback,
                           Engine& out) {
  if (v == 0) {
    out = fallback;
    return absl::OkStatus();
  }
  for (const auto& [engine, proto] : table) {
    if (static_cast<int>(proto) == v) {
      out = engine;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(StrCat(field, ": unknown enum value ", v));
}

pb::ScalingLayer ToProto(const ScalingLayer& l) {
  pb::ScalingLayer out;
  out.set_prev_op(l.prev_op);
  for (const auto& name : l.layers) out.add_layers(name);
  out.set_inp(l.inp);
  out.set_module2inspect(l.module2inspect);
  return out;
}

template <typename Repeated>
std::vector<ScalingLayer> FromProto(const Repeated& layers) {
  std::vector<ScalingLayer> out;
  for (const auto& l : layers) {
    out.push_back(ScalingLayer{l.prev_op(), {l.layers().begin(), l.layers().end()}, l.inp(), l.module2inspect()});
  }
  return out;
}

// --- #35 GPTAQ / Qronos: Quark 0.13's fields (GPTAQConfig, QronosConfig) ---
void AsymmetricToProto(const GptqAlgo& a, pb::AlgoConfig& out) {
  const auto fill = [&](auto* p) {
    p->set_alpha(a.alpha);
    p->set_desc_act(a.desc_act);
    p->set_static_groups(a.static_groups);
    p->set_block_size(a.block_size);
    for (const auto& m : a.inside_layer_modules) p->add_inside_layer_modules(m);
    p->set_model_decoder_layers(a.model_decoder_layers);
  };
  if (a.method == HessianMethod::kQronos) {
    fill(out.mutable_qronos());
    out.mutable_qronos()->set_beta(a.beta);
  } else {
    fill(out.mutable_gptaq());
    out.mutable_gptaq()->set_damp_percent(a.damp_percent);
  }
}

// Unset fields take Quark's defaults (GptqAlgo's, with Qronos's alpha 1e-3).
template <typename P>
GptqAlgo AsymmetricFromProto(const P& p, HessianMethod method) {
  GptqAlgo out;
  out.method = method;
  out.alpha = method == HessianMethod::kQronos ? 1e-3 : 0.25;
  if (p.has_alpha()) out.alpha = p.alpha();
  if (p.has_desc_act()) out.desc_act = p.desc_act();
  if (p.has_static_groups()) out.static_groups = p.static_groups();
  if (p.block_size() != 0) out.block_size = p.block_size();
  out.inside_layer_modules.assign(p.inside_layer_modules().begin(), p.inside_layer_modules().end());
  out.model_decoder_layers = p.model_decoder_layers();
  return out;
}
// --- end GPTAQ / Qronos ---

pb::AlgoConfig ToProto(const AlgoConfig& algo) {
  pb::AlgoConfig out;
  std::visit(Overloaded{
                 [&](const SmoothQuantAlgo& a) {
                   auto* p = out.mutable_smoothquant();
                   p->set_alpha(a.alpha);
                   p->set_scale_clamp_min(a.scale_clamp_min);
                   for (const auto& l : a.scaling_layers) *p->add_scaling_layers() = ToProto(l);
                   p->set_model_decoder_layers(a.model_decoder_layers);
                 },
                 [&](const AutoSmoothQuantAlgo& a) {
                   auto* p = out.mutable_autosmoothquant();
                   for (const auto& l : a.scaling_layers) *p->add_scaling_layers() = ToProto(l);
                   p->set_compute_scale_loss(a.compute_scale_loss);
                   p->set_model_decoder_layers(a.model_decoder_layers);
                 },
                 [&](const AwqAlgo& a) {
                   auto* p = out.mutable_awq();
                   for (const auto& l : a.scaling_layers) *p->add_scaling_layers() = ToProto(l);
                   p->set_model_decoder_layers(a.model_decoder_layers);
                   p->set_grid_size(a.grid_size);
                 },
                 [&](const GptqAlgo& a) {
                   if (a.method != HessianMethod::kGptq) return AsymmetricToProto(a, out);  // #35 GPTAQ / Qronos
                   auto* p = out.mutable_gptq();
                   p->set_damp_percent(a.damp_percent);
                   p->set_desc_act(a.desc_act);
                   p->set_static_groups(a.static_groups);
                   p->set_true_sequential(a.true_sequential);
                   for (const auto& m : a.inside_layer_modules) p->add_inside_layer_modules(m);
                   p->set_model_decoder_layers(a.model_decoder_layers);
                   p->set_block_size(a.block_size);
                 },
                 [&](const RotationAlgo& a) {
                   auto* p = out.mutable_rotation();
                   p->set_random(a.random);
                   for (const auto& l : a.scaling_layers) *p->add_scaling_layers() = ToProto(l);
                   // #35 learned rotation: the optional fields only away from their defaults (unset = default).
                   const RotationAlgo d;
                   if (a.r2 != d.r2) p->set_r2(a.r2);
                   p->set_r4(a.r4);
                   p->set_trainable(a.trainable);
                   if (a.learning_rate != d.learning_rate) p->set_learning_rate(a.learning_rate);
                   if (a.max_steps != d.max_steps) p->set_max_steps(a.max_steps);
                   if (a.train_batch_size != d.train_batch_size) p->set_train_batch_size(a.train_batch_size);
                   p->set_seed(a.seed);
                   if (a.max_memory_bytes != d.max_memory_bytes) p->set_max_memory_bytes(a.max_memory_bytes);
                 },
                 [&](const AutoRoundAlgo& a) {  // #35 AutoRound
                   auto* p = out.mutable_autoround();
                   p->set_iters(a.iters);
                   if (a.lr) p->set_lr(*a.lr);
                   if (a.minmax_lr) p->set_minmax_lr(*a.minmax_lr);
                   p->set_batch_size(a.batch_size);
                   p->set_gradient_accumulate_steps(a.gradient_accumulate_steps);
                   p->set_enable_minmax_tuning(a.enable_minmax_tuning);
                   p->set_not_use_best_mse(a.not_use_best_mse);
                   p->set_seed(a.seed);
                   p->set_model_decoder_layers(a.model_decoder_layers);
                 },
             },
             algo);
  return out;
}

absl::StatusOr<std::vector<PatternQuantConfig>> FromProto(
    const google::protobuf::RepeatedPtrField<pb::LayerPatternConfig>& entries, const std::string& field) {
  std::vector<PatternQuantConfig> out;
  for (int i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (e.pattern().empty()) return absl::InvalidArgumentError(StrCat(field, "[", i, "].pattern: required"));
    auto layer = FromProto(e.config(), StrCat(field, "[", e.pattern(), "]"));
    if (!layer.ok()) return layer.status();
    out.push_back(PatternQuantConfig{e.pattern(), *std::move(layer)});
  }
  return out;
}

}  // namespace

pb::QuantizationSpec ToProto(const QuantSpec& s) {
  pb::QuantizationSpec out;
  out.set_dtype(ToProtoEnum(kDTypes, s.dtype));
  out.set_qscheme(ToProtoEnum(kQSchemes, s.qscheme));
  if (s.ch_axis) out.set_ch_axis(*s.ch_axis);
  if (s.group_size) out.set_group_size(*s.group_size);
  for (int b : s.block_size) out.add_block_size(b);
  out.set_symmetric(s.symmetric);
  out.set_is_dynamic(s.is_dynamic);
  out.set_observer(ToProtoEnum(kObservers, s.observer));
  out.set_scale_type(ToProtoEnum(kScaleTypes, s.scale_type));
  out.set_round_method(ToProtoEnum(kRounds, s.round_method));
  out.set_scale_format(ToProtoEnum(kScaleFormats, s.scale_format));
  out.set_scale_calculation_mode(ToProtoEnum(kScaleCalcs, s.scale_calculation_mode));
  if (s.mx_element_dtype) out.set_mx_element_dtype(ToProtoEnum(kDTypes, *s.mx_element_dtype));
  out.set_zero_point_type(ToProtoEnum(kZeroPoints, s.zero_point_type));
  if (s.observer == ObserverKind::kPercentile) out.set_percentile(s.percentile);
  out.set_fp8_first_stage(s.fp8_first_stage);  // #30 W4A8
  return out;
}

pb::QuantizationConfig ToProto(const LayerQuantConfig& c) {
  pb::QuantizationConfig out;
  if (c.input_tensors) *out.mutable_input_tensors() = ToProto(*c.input_tensors);
  if (c.output_tensors) *out.mutable_output_tensors() = ToProto(*c.output_tensors);
  if (c.weight) *out.mutable_weight() = ToProto(*c.weight);
  if (c.bias) *out.mutable_bias() = ToProto(*c.bias);
  return out;
}

pb::Config ToProto(const Config& c) {
  pb::Config out;
  *out.mutable_global_quant_config() = ToProto(c.global_quant_config);
  for (const auto& [type, layer] : c.layer_type_quant_config) (*out.mutable_layer_type_quant_config())[type] = ToProto(layer);
  for (const auto& e : c.layer_quant_config) {
    auto* p = out.add_layer_quant_config();
    p->set_pattern(e.pattern);
    *p->mutable_config() = ToProto(e.config);
  }
  for (const auto& e : c.kv_cache_quant_config) {
    auto* p = out.add_kv_cache_quant_config();
    p->set_pattern(e.pattern);
    *p->mutable_config() = ToProto(e.config);
  }
  for (const auto& e : c.exclude) out.add_exclude(e);
  for (const auto& a : c.algo_config) *out.add_algo_config() = ToProto(a);
  out.set_quant_mode(ToProtoEnum(kQuantModes, c.quant_mode));
  out.mutable_export_options()->set_pack_method(ToProtoEnum(kPackMethods, c.pack_method));
  out.mutable_export_options()->set_min_kv_scale(c.min_kv_scale);
  return out;
}

absl::StatusOr<QuantSpec> FromProto(const pb::QuantizationSpec& p, const std::string& path) {
  QuantSpec s;
  if (p.dtype() == pb::DATA_TYPE_UNSPECIFIED) return absl::InvalidArgumentError(path + ".dtype: required");
  QUARK_RETURN_IF_ERROR(FromProtoEnum(kDTypes, p.dtype(), path + ".dtype", DType::kInt8, s.dtype));
  QUARK_RETURN_IF_ERROR(FromProtoEnum(kQSchemes, p.qscheme(), path + ".qscheme", QScheme::kPerTensor, s.qscheme));
  if (p.has_ch_axis()) s.ch_axis = p.ch_axis();
  if (p.has_group_size()) s.group_size = p.group_size();
  s.block_size.assign(p.block_size().begin(), p.block_size().end());
  s.symmetric = p.has_symmetric() ? p.symmetric() : true;
  s.is_dynamic = p.is_dynamic();
  s.fp8_first_stage = p.fp8_first_stage();  // #30 W4A8
  const ObserverKind default_observer =
      p.scale_format() == pb::SCALE_FORMAT_E8M0 || p.dtype() == pb::DATA_TYPE_MX ? ObserverKind::kMxBlock
                                                                                   : ObserverKind::kMinMax;
  QUARK_RETURN_IF_ERROR(FromProtoEnum(kObservers, p.observer(), path + ".observer", default_observer, s.observer));
  QUARK_RETURN_IF_ERROR(FromProtoEnum(kScaleTypes, p.scale_type(), path + ".scale_type", ScaleType::kFloat, s.scale_type));
  QUARK_RETURN_IF_ERROR(
      FromProtoEnum(kRounds, p.round_method(), path + ".round_method", RoundMethod::kHalfEven, s.round_method));
  QUARK_RETURN_IF_ERROR(
      FromProtoEnum(kScaleFormats, p.scale_format(), path + ".scale_format", ScaleFormat::kFloat, s.scale_format));
  QUARK_RETURN_IF_ERROR(FromProtoEnum(kScaleCalcs, p.scale_calculation_mode(), path + ".scale_calculation_mode",
                                      ScaleCalculationMode::kEven, s.scale_calculation_mode));
  if (p.mx_element_dtype() != pb::DATA_TYPE_UNSPECIFIED) {
    DType element = DType::kFp4;
    QUARK_RETURN_IF_ERROR(
        FromProtoEnum(kDTypes, p.mx_element_dtype(), path + ".mx_element_dtype", DType::kFp4, element));
    s.mx_element_dtype = element;
  }
  QUARK_RETURN_IF_ERROR(FromProtoEnum(kZeroPoints, p.zero_point_type(), path + ".zero_point_type",
                                      ZeroPointType::kInt32, s.zero_point_type));
  if (p.has_percentile()) s.percentile = p.percentile();
  return s;
}

absl::StatusOr<LayerQuantConfig> FromProto(const pb::QuantizationConfig& p, const std::string& path) {
  LayerQuantConfig c;
  struct Field {
    bool present;
    const pb::QuantizationSpec& spec;
    const char* name;
    std::optional<QuantSpec>* target;
  };
  for (const Field& f : {Field{p.has_input_tensors(), p.input_tensors(), "input_tensors", &c.input_tensors},
                         Field{p.has_output_tensors(), p.output_tensors(), "output_tensors", &c.output_tensors},
                         Field{p.has_weight(), p.weight(), "weight", &c.weight},
                         Field{p.has_bias(), p.bias(), "bias", &c.bias}}) {
    if (!f.present) continue;
    auto spec = FromProto(f.spec, path + "." + f.name);
    if (!spec.ok()) return spec.status();
    *f.target = *std::move(spec);
  }
  return c;
}

absl::StatusOr<Config> FromProto(const pb::Config& p) {
  Config c;
  auto global = FromProto(p.global_quant_config(), "global_quant_config");
  if (!global.ok()) return global.status();
  c.global_quant_config = *std::move(global);
  for (const auto& [type, layer] : p.layer_type_quant_config()) {
    auto converted = FromProto(layer, StrCat("layer_type_quant_config[", type, "]"));
    if (!converted.ok()) return converted.status();
    c.layer_type_quant_config[type] = *std::move(converted);
  }
  auto layers = FromProto(p.layer_quant_config(), "layer_quant_config");
  if (!layers.ok()) return layers.status();
  c.layer_quant_config = *std::move(layers);
  auto kv = FromProto(p.kv_cache_quant_config(), "kv_cache_quant_config");
  if (!kv.ok()) return kv.status();
  c.kv_cache_quant_config = *std::move(kv);
  c.exclude.assign(p.exclude().begin(), p.exclude().end());
  for (int i = 0; i < p.algo_config_size(); ++i) {
    auto algo = FromProto(p.algo_config(i), StrCat("algo_config[", i, "]"));
    if (!algo.ok()) return algo.status();
    c.algo_config.push_back(*std::move(algo));
  }
  QUARK_RETURN_IF_ERROR(FromProtoEnum(kQuantModes, p.quant_mode(), "quant_mode", QuantMode::kEager, c.quant_mode));
  QUARK_RETURN_IF_ERROR(FromProtoEnum(kPackMethods, p.export_options().pack_method(), "export_options.pack_method",
                                      PackMethod::kReorder, c.pack_method));
  c.min_kv_scale = p.export_options().min_kv_scale();
  return c;
}

// Zero in a proto3 scalar means "not set": the algorithm's documented default applies.
absl::StatusOr<AlgoConfig> FromProto(const pb::AlgoConfig& a, const std::string& path) {
  switch (a.algo_case()) {
    case pb::AlgoConfig::kSmoothquant: {
      SmoothQuantAlgo out;
      const auto& p = a.smoothquant();
      if (p.has_alpha()) out.alpha = p.alpha();
      if (p.scale_clamp_min() != 0) out.scale_clamp_min = p.scale_clamp_min();
      out.scaling_layers = FromProto(p.scaling_layers());
      out.model_decoder_layers = p.model_decoder_layers();
      return AlgoConfig(out);
    }
    case pb::AlgoConfig::kAutosmoothquant: {
      AutoSmoothQuantAlgo out;
      const auto& p = a.autosmoothquant();
      out.scaling_layers = FromProto(p.scaling_layers());
      if (!p.compute_scale_loss().empty()) out.compute_scale_loss = p.compute_scale_loss();
      out.model_decoder_layers = p.model_decoder_layers();
      return AlgoConfig(out);
    }
    case pb::AlgoConfig::kAwq: {
      AwqAlgo out;
      const auto& p = a.awq();
      out.scaling_layers = FromProto(p.scaling_layers());
      out.model_decoder_layers = p.model_decoder_layers();
      if (p.grid_size() != 0) out.grid_size = p.grid_size();
      return AlgoConfig(out);
    }
    case pb::AlgoConfig::kGptq: {
      GptqAlgo out;
      const auto& p = a.gptq();
      if (p.damp_percent() != 0) out.damp_percent = p.damp_percent();
      if (p.has_desc_act()) out.desc_act = p.desc_act();
      if (p.has_static_groups()) out.static_groups = p.static_groups();
      if (p.has_true_sequential()) out.true_sequential = p.true_sequential();
      out.inside_layer_modules.assign(p.inside_layer_modules().begin(), p.inside_layer_modules().end());
      out.model_decoder_layers = p.model_decoder_layers();
      if (p.block_size() != 0) out.block_size = p.block_size();
      return AlgoConfig(out);
    }
    case pb::AlgoConfig::kRotation: {
      RotationAlgo out;
      const auto& p = a.rotation();
      out.random = p.random();
      out.scaling_layers = FromProto(p.scaling_layers());
      if (p.has_r2()) out.r2 = p.r2();
      out.r4 = p.r4();
      out.trainable = p.trainable();  // #35 learned rotation; unset arguments keep Quark's script's defaults
      if (p.has_learning_rate()) out.learning_rate = p.learning_rate();
      if (p.has_max_steps()) out.max_steps = p.max_steps();
      if (p.has_train_batch_size()) out.train_batch_size = p.train_batch_size();
      out.seed = p.seed();
      if (p.has_max_memory_bytes()) out.max_memory_bytes = p.max_memory_bytes();
      return AlgoConfig(out);
    }
    case pb::AlgoConfig::kAutoround: {  // #35 AutoRound
      AutoRoundAlgo out;
      const auto& p = a.autoround();
      if (p.iters() != 0) out.iters = p.iters();
      if (p.has_lr()) out.lr = p.lr();
      if (p.has_minmax_lr()) out.minmax_lr = p.minmax_lr();
      if (p.batch_size() != 0) out.batch_size = p.batch_size();
      if (p.gradient_accumulate_steps() != 0) out.gradient_accumulate_steps = p.gradient_accumulate_steps();
      if (p.has_enable_minmax_tuning()) out.enable_minmax_tuning = p.enable_minmax_tuning();
      out.not_use_best_mse = p.not_use_best_mse();
      if (p.has_seed()) out.seed = p.seed();
      out.model_decoder_layers = p.model_decoder_layers();
      return AlgoConfig(out);
    }
    case pb::AlgoConfig::kGptaq: {  // #35 GPTAQ
      GptqAlgo out = AsymmetricFromProto(a.gptaq(), HessianMethod::kGptaq);
      if (a.gptaq().has_damp_percent()) out.damp_percent = a.gptaq().damp_percent();
      return AlgoConfig(out);
    }
    case pb::AlgoConfig::kQronos: {  // #35 Qronos
      GptqAlgo out = AsymmetricFromProto(a.qronos(), HessianMethod::kQronos);
      if (a.qronos().has_beta()) out.beta = a.qronos().beta();
      return AlgoConfig(out);
    }
    case pb::AlgoConfig::ALGO_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(path + ": no algorithm set (one of smoothquant, autosmoothquant, awq, gptq, gptaq, "
                                           "qronos, rotation, autoround)");
}

}  // namespace quark
