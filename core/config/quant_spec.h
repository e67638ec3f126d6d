// The engine's own, plain C++ form of the quantization Config. The proto form
// (proto/quark/v1/config.proto) converts to and from it in proto_convert.h only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/config/quant_types.h"

namespace quark {

/// How one tensor is quantized (Quark's QuantizationSpec).
struct QuantSpec {
  DType dtype = DType::kInt8;
  QScheme qscheme = QScheme::kPerTensor;
  /// Channel axis: per_channel's channel, per_group's grouped axis. Unset = the default for the tensor
  /// (weights: 0 per channel, -1 per group; activations: -1).
  std::optional<int> ch_axis;
  /// per_group only (and MX): elements per group; -1 = the whole row.
  std::optional<int> group_size;
  /// per_block only: [rows, cols] of one weight tile (Quark's block_size, e.g. [128, 128]).
  std::vector<int> block_size;
  bool symmetric = true;
  bool is_dynamic = false;
  ObserverKind observer = ObserverKind::kMinMax;
  ScaleType scale_type = ScaleType::kFloat;
  RoundMethod round_method = RoundMethod::kHalfEven;
  ScaleFormat scale_format = ScaleFormat::kFloat;
  ScaleCalculationMode scale_calculation_mode = ScaleCalculationMode::kEven;
  /// Legacy `dtype: mx` only: the element type (fp8_e4m3, fp8_e5m2, fp6_*, fp4, int8).
  std::optional<DType> mx_element_dtype;
  ZeroPointType zero_point_type = ZeroPointType::kInt32;
  /// Percentile observer only.
  double percentile = 99.99999999;
  /// #30 W4A8: Quark's ProgressiveSpec [FP8E4M3PerTensorSpec, this spec] (`int4_fp8`): the tensor is first quantized
  /// to fp8_e4m3 per tensor (static, s0 = amax / 448 in float32) and this spec (int4 per channel, symmetric) quantizes
  /// the fp8 values; x' = (q * s1) * s0. Only that first stage exists (validation names the field otherwise).
  bool fp8_first_stage = false;

  /// OCP MX: a shared E8M0 scale over blocks (new spelling: scale_format e8m0; legacy: dtype mx).
  bool IsMx() const { return dtype == DType::kMx || scale_format == ScaleFormat::kE8M0; }
  /// NVFP4: fp4 groups of 16 with float8_e4m3fn block scales under a float32 global scale.
  bool IsNvfp4() const { return scale_format == ScaleFormat::kE4M3; }
  /// W4A8: an fp8_e4m3 per-tensor first stage before this spec (Quark's ProgressiveSpec).
  bool IsProgressive() const { return fp8_first_stage; }
  /// The element type of the grid: mx_element_dtype for legacy MX, else dtype.
  DType ElementType() const {
    return dtype == DType::kMx && mx_element_dtype ? *mx_element_dtype : dtype;
  }
};

bool operator==(const QuantSpec& a, const QuantSpec& b);
inline bool operator!=(const QuantSpec& a, const QuantSpec& b) { return !(a == b); }

/// Specs for the tensors of one module (Quark's QuantizationConfig). Unset = left in floating point.
struct LayerQuantConfig {
  std::optional<QuantSpec> input_tensors;
  std::optional<QuantSpec> output_tensors;
  std::optional<QuantSpec> weight;
  std::optional<QuantSpec> bias;

  bool Empty() const { return !input_tensors && !output_tensors && !weight && !bias; }
};

bool operator==(const LayerQuantConfig& a, const LayerQuantConfig& b);
inline bool operator!=(const LayerQuantConfig& a, const LayerQuantConfig& b) { return !(a == b); }

/// One ordered entry of layer_quant_config / kv_cache_quant_config (first match wins).
struct PatternQuantConfig {
  std::string pattern;  // fnmatch over module names
  LayerQuantConfig config;
};

bool operator==(const PatternQuantConfig& a, const PatternQuantConfig& b);

/// One {prev_op, layers, inp} entry of an algorithm's scaling_layers.
struct ScalingLayer {
  std::string prev_op;
  std::vector<std::string> layers;
  std::string inp;
  std::string module2inspect;
};

bool operator==(const ScalingLayer& a, const ScalingLayer& b);

struct SmoothQuantAlgo {
  float alpha = 1.0f;
  float scale_clamp_min = 1e-3f;
  std::vector<ScalingLayer> scaling_layers;
  std::string model_decoder_layers;
};

struct AutoSmoothQuantAlgo {
  std::vector<ScalingLayer> scaling_layers;
  std::string compute_scale_loss = "MSE";
  std::string model_decoder_layers;
};

struct AwqAlgo {
  std::vector<ScalingLayer> scaling_layers;
  std::string model_decoder_layers;
  int grid_size = 20;
};

/// GPTQ and the algorithms Quark builds on its column loop (GPTAQConfig, QronosConfig): one pass, one entry.
enum class HessianMethod { kGptq, kGptaq, kQronos };

struct GptqAlgo {
  float damp_percent = 0.01f;  // gptq, gptaq (qronos damps by alpha instead)
  bool desc_act = true;
  bool static_groups = true;
  bool true_sequential = true;
  std::vector<std::string> inside_layer_modules;
  std::string model_decoder_layers;
  int block_size = 128;
  // #35 GPTAQ / Qronos (Quark 0.13's names and defaults).
  HessianMethod method = HessianMethod::kGptq;
  /// gptaq: the weight of the asymmetric term (0.25); qronos: the damping as a share of H's largest eigenvalue
  /// (1e-3). Set to the method's default where the entry leaves it out.
  double alpha = 0.25;
  double beta = 1e4;  // qronos: the Cholesky stabilisation factor
};

/// Quark's RotationConfig (offline R1, and R2 per head). Quark 0.13's keys r1 / r3 / r4 / online_r1_rotation /
/// random_r1 / random_r2 are read at the values this engine implements (quark_json.cc); `random` is the older key
/// both random_r* replace.
struct RotationAlgo {
  bool random = false;
  std::vector<ScalingLayer> scaling_layers;
  /// Quark's r2: also rotate each attention head's value space. Quark's dataclass defaults it to false; this engine
  /// has always applied R2 with R1 (Quark <= 0.11's rotation), so an entry without the key keeps it on.
  bool r2 = true;
  /// Quark's r4 (#35 item 4, SpinQuant's R4): an online Hadamard H of the MLP width on each down_proj's input: the
  /// weight becomes W H offline and the forward computes x H before down_proj's input quantizer (x H H^T W^T = x W^T).
  /// vLLM applies it online only through compressed-tensors' transform_config, so the other exports refuse it.
  bool r4 = false;
  // #35 item 4: Quark's `trainable` (SpinQuant's Cayley SGD on R1, and on R2 when r2) trained on the job's
  // calibration windows. Quark reads its training arguments from its rotation script (HF TrainingArguments:
  // learning_rate, max_steps, per-device train_batch_size) rather than RotationConfig; they are read here under those
  // names with the same defaults. seed and max_memory_bytes are this engine's (Quark has neither).
  bool trainable = false;
  double learning_rate = 1.5;
  int64_t max_steps = 100;
  int64_t train_batch_size = 1;
  uint64_t seed = 0;
  int64_t max_memory_bytes = int64_t{8} << 30;
};

// --- AutoRound (#35 item 2) ---
/// Intel auto-round's SignRound (auto_round/autoround.py), per decoder block: rounding offsets V in [-0.5, 0.5] and
/// clipping factors of the group minimum / maximum in [0.5, 1] (enable_minmax_tuning) trained with signed gradient
/// steps on the block output MSE. Names and defaults are auto-round's (Quark has no AutoRound entry); unset learning
/// rates are auto-round's None: lr = 1 / iters, minmax_lr = lr.
struct AutoRoundAlgo {
  int iters = 200;
  std::optional<float> lr;
  std::optional<float> minmax_lr;
  int batch_size = 8;
  int gradient_accumulate_steps = 1;
  bool enable_minmax_tuning = true;
  bool not_use_best_mse = false;  // true: keep the last iteration's values instead of the lowest-loss ones
  int seed = 42;                  // the order of the calibration samples in the batches
  std::string model_decoder_layers;
};
// --- end AutoRound ---

bool operator==(const SmoothQuantAlgo& a, const SmoothQuantAlgo& b);
bool operator==(const AutoSmoothQuantAlgo& a, const AutoSmoothQuantAlgo& b);
bool operator==(const AwqAlgo& a, const AwqAlgo& b);
bool operator==(const GptqAlgo& a, const GptqAlgo& b);
bool operator==(const RotationAlgo& a, const RotationAlgo& b);
bool operator==(const AutoRoundAlgo& a, const AutoRoundAlgo& b);

using AlgoConfig = std::variant<SmoothQuantAlgo, AutoSmoothQuantAlgo, AwqAlgo, GptqAlgo, RotationAlgo, AutoRoundAlgo>;

/// Quark's name of an algorithm ("smooth", "autosmoothquant", "awq", "gptq", "gptaq", "qronos", "rotation"; auto-round's
/// "autoround").
std::string_view AlgoName(const AlgoConfig& algo);

/// The whole quantization Config (Quark's Config).
struct Config {
  LayerQuantConfig global_quant_config;
  std::map<std::string, LayerQuantConfig> layer_type_quant_config;  // "Linear", "Embedding", ...
  std::vector<PatternQuantConfig> layer_quant_config;
  std::vector<PatternQuantConfig> kv_cache_quant_config;
  std::vector<std::string> exclude;
  std::vector<AlgoConfig> algo_config;
  QuantMode quant_mode = QuantMode::kEager;
  PackMethod pack_method = PackMethod::kReorder;
  float min_kv_scale = 0.0f;
};

bool operator==(const Config& a, const Config& b);
inline bool operator!=(const Config& a, const Config& b) { return !(a == b); }

}  // namespace quark
