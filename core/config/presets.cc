#include "core/config/presets.h"

#include <algorithm>

#include "core/base/strings.h"

namespace quark {
namespace {

// ---- Tensor specs, in Quark's spelling of each scheme (weights are [out, in]) ----

QuantSpec IntPerTensor(DType dtype, bool symmetric) {
  QuantSpec s;
  s.dtype = dtype;
  s.qscheme = QScheme::kPerTensor;
  s.symmetric = symmetric;
  return s;
}

QuantSpec IntPerChannelWeight(DType dtype, bool symmetric) {
  QuantSpec s = IntPerTensor(dtype, symmetric);
  s.qscheme = QScheme::kPerChannel;
  s.ch_axis = 0;  // one scale per output channel
  return s;
}

QuantSpec IntPerGroupWeight(DType dtype, bool symmetric, int group_size) {
  QuantSpec s = IntPerTensor(dtype, symmetric);
  s.qscheme = QScheme::kPerGroup;
  s.ch_axis = 1;  // groups run along in_features
  s.group_size = group_size;
  return s;
}

// Per-token dynamic activations: one scale per row of the [tokens, hidden] input.
QuantSpec PerTokenDynamic(DType dtype) {
  QuantSpec s = IntPerTensor(dtype, /*symmetric=*/true);
  s.qscheme = QScheme::kPerChannel;
  s.ch_axis = 1;
  s.is_dynamic = true;
  return s;
}

QuantSpec Fp8PerTensor() { return IntPerTensor(DType::kFp8E4M3, true); }

QuantSpec Fp8PerChannelWeight() { return IntPerChannelWeight(DType::kFp8E4M3, true); }

// OCP MX in Quark's current spelling: the element dtype, groups of 32 on the last axis, E8M0 shared scales.
QuantSpec Mx(DType element, bool dynamic) {
  QuantSpec s;
  s.dtype = element;
  s.qscheme = QScheme::kPerGroup;
  s.ch_axis = -1;
  s.group_size = 32;
  s.symmetric = true;
  s.is_dynamic = dynamic;
  s.observer = ObserverKind::kMxBlock;
  s.scale_format = ScaleFormat::kE8M0;
  s.scale_calculation_mode = ScaleCalculationMode::kEven;
  return s;
}

// NVFP4 (Quark's nvfp4): fp4 groups of 16 on the last axis, float8_e4m3fn block scales, float32 global scale.
QuantSpec Nvfp4(bool dynamic) {
  QuantSpec s;
  s.dtype = DType::kFp4;
  s.qscheme = QScheme::kPerGroup;
  s.ch_axis = -1;
  s.group_size = 16;
  s.is_dynamic = dynamic;
  s.scale_type = ScaleType::kFloat32;
  s.scale_format = ScaleFormat::kE4M3;
  return s;
}

// FP8 with 128x128 weight blocks (the DeepSeek recipe): amax / 448 per block, float32 scales.
QuantSpec Fp8BlockWeight() {
  QuantSpec s = Fp8PerTensor();
  s.qscheme = QScheme::kPerBlock;
  s.block_size = {128, 128};
  s.scale_type = ScaleType::kFloat32;
  return s;
}

// Dynamic fp8 activations per token-group of `group` along the hidden axis.
QuantSpec Fp8TokenGroupDynamic(int group = 128) {
  QuantSpec s = Fp8PerTensor();
  s.qscheme = QScheme::kPerGroup;
  s.ch_axis = -1;
  s.group_size = group;
  s.is_dynamic = true;
  return s;
}

// #30 E8M0 tiles (core/config/e8m0_tiles.h): fp8_e4m3 per [rows, cols] tile with a power-of-two scale (Quark's
// scale_type float8_e8m0fnu), the exponent from the tile amax as OCP MX rounds it (scale_calculation_mode even).
QuantSpec Fp8E8m0TileWeight(int rows, int cols) {
  QuantSpec s = Fp8BlockWeight();
  s.block_size = {rows, cols};
  s.scale_format = ScaleFormat::kE8M0;
  return s;
}

// #30 W4A8 (Quark's int4_fp8, formats-2026.md 1.7): a ProgressiveSpec weight, fp8_e4m3 per tensor then int4 per
// output channel (symmetric, float32 scales, half_even), and fp8_e4m3 per-tensor dynamic activations (float32).
QuantSpec Int4Fp8Weight() {
  QuantSpec s = IntPerChannelWeight(DType::kInt4, true);
  s.scale_type = ScaleType::kFloat32;
  s.fp8_first_stage = true;
  return s;
}

QuantSpec Fp8PerTensorDynamic() {
  QuantSpec s = Fp8PerTensor();
  s.scale_type = ScaleType::kFloat32;
  s.is_dynamic = true;
  return s;
}

QuantSpec Cast(DType dtype) {
  QuantSpec s;
  s.dtype = dtype;
  return s;
}

Config LlmConfig(std::optional<QuantSpec> weight, std::optional<QuantSpec> input = std::nullopt) {
  Config c;
  c.global_quant_config.weight = std::move(weight);
  c.global_quant_config.input_tensors = std::move(input);
  c.exclude = {"lm_head"};
  return c;
}

std::vector<Preset> BuildPresets() {
  std::vector<Preset> p;
  auto add = [&p](std::string name, std::string description, Config config, bool legacy = false) {
    p.push_back(Preset{std::move(name), std::move(description), legacy, std::move(config)});
  };
  const auto int8_w_tensor = IntPerTensor(DType::kInt8, true);
  const auto int8_a_tensor = IntPerTensor(DType::kInt8, true);

  add("int8", "W8A8 int8: weights per tensor, activations per tensor, symmetric, static",
      LlmConfig(int8_w_tensor, int8_a_tensor));
  add("fp8", "W8A8 fp8_e4m3: weights per tensor, activations per tensor, static",
      LlmConfig(Fp8PerTensor(), Fp8PerTensor()));
  add("ptpc_fp8", "fp8_e4m3 weights per channel, activations per token dynamic",
      LlmConfig(Fp8PerChannelWeight(), PerTokenDynamic(DType::kFp8E4M3)));
  for (int g : {32, 64, 128}) {
    add(StrCat("int4_wo_", g), StrCat("int4 symmetric weights per group of ", g, ", weight only"),
        LlmConfig(IntPerGroupWeight(DType::kInt4, true, g)));
  }
  add("int4_wo_per_channel", "int4 symmetric weights per channel, weight only",
      LlmConfig(IntPerChannelWeight(DType::kInt4, true)));
  for (int g : {32, 64, 128}) {
    add(StrCat("uint4_wo_", g), StrCat("uint4 asymmetric weights per group of ", g, ", weight only"),
        LlmConfig(IntPerGroupWeight(DType::kUInt4, false, g)));
  }
  add("uint4_wo_per_channel", "uint4 asymmetric weights per channel, weight only",
      LlmConfig(IntPerChannelWeight(DType::kUInt4, false)));
  {
    QuantSpec act = IntPerGroupWeight(DType::kInt4, true, 64);
    act.ch_axis = -1;
    act.is_dynamic = true;
    add("int4_wa_64", "int4 symmetric weights and activations per group of 64, activations dynamic",
        LlmConfig(IntPerGroupWeight(DType::kInt4, true, 64), act));
  }
  add("mxfp4", "OCP MXFP4 weights and activations (blocks of 32, E8M0 scales), activations dynamic",
      LlmConfig(Mx(DType::kFp4, false), Mx(DType::kFp4, true)));
  add("mxfp4_weight_only", "OCP MXFP4 weights, activations in floating point", LlmConfig(Mx(DType::kFp4, false)));
  add("mxfp6_e3m2", "OCP MXFP6 e3m2 weights and activations, activations dynamic",
      LlmConfig(Mx(DType::kFp6E3M2, false), Mx(DType::kFp6E3M2, true)));
  add("mxfp6_e2m3", "OCP MXFP6 e2m3 weights and activations, activations dynamic",
      LlmConfig(Mx(DType::kFp6E2M3, false), Mx(DType::kFp6E2M3, true)));
  add("mxfp4_mxfp6_e2m3", "OCP MXFP4 weights, MXFP6 e2m3 dynamic activations",
      LlmConfig(Mx(DType::kFp4, false), Mx(DType::kFp6E2M3, true)));
  add("mxfp4_fp8", "OCP MXFP4 weights, fp8_e4m3 per-tensor static activations",
      LlmConfig(Mx(DType::kFp4, false), Fp8PerTensor()));
  add("mxfp8", "OCP MXFP8 e4m3 weights and activations, activations dynamic",
      LlmConfig(Mx(DType::kFp8E4M3, false), Mx(DType::kFp8E4M3, true)));
  add("mxint8", "OCP MXINT8 weights and activations, activations dynamic",
      LlmConfig(Mx(DType::kInt8, false), Mx(DType::kInt8, true)));
  add("fp8_block", "fp8_e4m3 weights per 128x128 block, activations per token-group of 128 dynamic",
      LlmConfig(Fp8BlockWeight(), Fp8TokenGroupDynamic()));
  add("mxfp8_2d",
      "MXFP8 with 2-D scale blocks: fp8_e4m3 weights per 32x32 tile with E8M0 scales (vLLM QuarkW8A8Mxfp8), "
      "activations OCP MXFP8 dynamic (E8M0 scales per 32, as QuarkW8A8Mxfp8 quantizes them)",
      LlmConfig(Fp8E8m0TileWeight(32, 32), Mx(DType::kFp8E4M3, true)));
  add("fp8_block_e8m0",
      "fp8_e4m3 weights per 128x128 block with E8M0 (power-of-two) scales, DeepSeek's ue8m0 recipe, activations per "
      "token-group of 128 dynamic",
      LlmConfig(Fp8E8m0TileWeight(128, 128), Fp8TokenGroupDynamic()));
  add("nvfp4",
      "NVFP4 W4A4: fp4 weights and dynamic activations in groups of 16, fp8_e4m3 block scales, float32 global scale "
      "per tensor",
      LlmConfig(Nvfp4(false), Nvfp4(true)));
  add("nvfp4_weight_only", "NVFP4 W4A16: fp4 weights in groups of 16 (fp8_e4m3 block scales, float32 global scale)",
      LlmConfig(Nvfp4(false)));
  add("int4_fp8",
      "W4A8: weights fp8_e4m3 per tensor then int4 per channel (Quark's ProgressiveSpec), fp8_e4m3 per-tensor dynamic "
      "activations; vLLM loads it for MoE experts only",
      LlmConfig(Int4Fp8Weight(), Fp8PerTensorDynamic()));
  add("bfloat16", "weights and activations cast to bfloat16 and back", LlmConfig(Cast(DType::kBFloat16),
                                                                                  Cast(DType::kBFloat16)));

  // Legacy spellings of Quark's earlier LLM example.
  add("w_int8_a_int8_per_tensor_sym", "= int8", LlmConfig(int8_w_tensor, int8_a_tensor), true);
  add("w_int8_per_tensor_sym", "int8 symmetric weights per tensor, weight only", LlmConfig(int8_w_tensor), true);
  {
    QuantSpec dyn = int8_a_tensor;
    dyn.is_dynamic = true;
    add("w_int8_a_int8_per_tensor_sym_dynamic", "int8 weights per tensor, int8 activations per tensor dynamic",
        LlmConfig(int8_w_tensor, dyn), true);
  }
  add("w_uint8_a_uint8_per_tensor_asym", "uint8 asymmetric weights and activations per tensor, static",
      LlmConfig(IntPerTensor(DType::kUInt8, false), IntPerTensor(DType::kUInt8, false)), true);
  add("w_int8_per_channel_a_int8_per_tensor_sym", "int8 weights per channel, int8 activations per tensor, static",
      LlmConfig(IntPerChannelWeight(DType::kInt8, true), int8_a_tensor), true);
  add("w_int8_per_channel_a_int8_per_token_dynamic", "int8 weights per channel, int8 activations per token dynamic",
      LlmConfig(IntPerChannelWeight(DType::kInt8, true), PerTokenDynamic(DType::kInt8)), true);
  add("w_fp8_a_fp8", "= fp8", LlmConfig(Fp8PerTensor(), Fp8PerTensor()), true);
  add("w_int4_per_channel_sym", "= int4_wo_per_channel", LlmConfig(IntPerChannelWeight(DType::kInt4, true)), true);
  add("w_int4_per_group_sym", "= int4_wo_128", LlmConfig(IntPerGroupWeight(DType::kInt4, true, 128)), true);
  add("w_uint4_per_group_asym", "= uint4_wo_128", LlmConfig(IntPerGroupWeight(DType::kUInt4, false, 128)), true);
  add("w_uint4_a_bfloat16_per_group_asym", "uint4 asymmetric weights per group of 128, bfloat16 activations",
      LlmConfig(IntPerGroupWeight(DType::kUInt4, false, 128), Cast(DType::kBFloat16)), true);
  add("w_mxfp4_a_mxfp4", "= mxfp4", LlmConfig(Mx(DType::kFp4, false), Mx(DType::kFp4, true)), true);
  add("w_mxfp4_a_mxfp4_weight_only", "= mxfp4_weight_only", LlmConfig(Mx(DType::kFp4, false)), true);
  return p;
}

// Edit distance, for "did you mean" suggestions on unknown preset names.
size_t Distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

const std::vector<Preset>& AllPresets() {
  static const std::vector<Preset> presets = BuildPresets();
  return presets;
}

absl::StatusOr<Config> PresetConfig(std::string_view name) {
  const auto& presets = AllPresets();
  for (const auto& preset : presets) {
    if (preset.name == name) return preset.config;
  }
  std::vector<std::string> close;
  for (const auto& preset : presets) {
    if (Distance(name, preset.name) <= 3 || preset.name.find(std::string(name)) != std::string::npos) {
      close.push_back(preset.name);
    }
  }
  std::string hint = close.empty() ? " (quark presets lists them)" : " (did you mean " + StrJoin(close, ", ") + "?)";
  return absl::NotFoundError(StrCat("preset: unknown scheme \"", name, "\"", hint));
}

std::vector<std::string> KvCacheDtypes() { return {"fp8", "int8"}; }

absl::Status ApplyKvCacheDtype(std::string_view kv_cache_dtype, Config& config) {
  if (kv_cache_dtype.empty()) return absl::OkStatus();
  QuantSpec kv;
  if (kv_cache_dtype == "fp8") {
    kv = Fp8PerTensor();
  } else if (kv_cache_dtype == "int8") {
    kv = IntPerTensor(DType::kInt8, true);
  } else {
    return absl::InvalidArgumentError(
        StrCat("kv_cache_dtype: unknown \"", kv_cache_dtype, "\" (one of: fp8, int8)"));
  }
  // As Quark's LLM example does: the k_proj / v_proj patterns carry the layer's own config plus the
  // output (KV-cache) spec, both in layer_quant_config and in kv_cache_quant_config.
  for (const char* pattern : {"*k_proj", "*v_proj"}) {
    LayerQuantConfig layer = config.global_quant_config;
    if (auto it = config.layer_type_quant_config.find("Linear"); it != config.layer_type_quant_config.end()) {
      layer = it->second;
    }
    layer.output_tensors = kv;
    auto upsert = [&](std::vector<PatternQuantConfig>& entries) {
      auto existing = std::find_if(entries.begin(), entries.end(),
                                   [&](const PatternQuantConfig& e) { return e.pattern == pattern; });
      if (existing != entries.end()) {
        existing->config.output_tensors = kv;
      } else {
        entries.push_back(PatternQuantConfig{pattern, layer});
      }
    };
    upsert(config.layer_quant_config);
    upsert(config.kv_cache_quant_config);
  }
  return absl::OkStatus();
}

}  // namespace quark
