#include "core/config/quant_spec.h"

#include <tuple>

#include "core/base/overloaded.h"

namespace quark {
namespace {

auto Tie(const QuantSpec& s) {
  return std::tie(s.dtype, s.qscheme, s.ch_axis, s.group_size, s.block_size, s.symmetric, s.is_dynamic, s.observer, s.scale_type,
                  s.round_method, s.scale_format, s.scale_calculation_mode, s.mx_element_dtype, s.zero_point_type,
                  s.percentile, s.fp8_first_stage);
}

}  // namespace

bool operator==(const QuantSpec& a, const QuantSpec& b) { return Tie(a) == Tie(b); }

bool operator==(const LayerQuantConfig& a, const LayerQuantConfig& b) {
  return a.input_tensors == b.input_tensors && a.output_tensors == b.output_tensors && a.weight == b.weight &&
         a.bias == b.bias;
}

bool operator==(const PatternQuantConfig& a, const PatternQuantConfig& b) {
  return a.pattern == b.pattern && a.config == b.config;
}

bool operator==(const ScalingLayer& a, const ScalingLayer& b) {
  return std::tie(a.prev_op, a.layers, a.inp, a.module2inspect) ==
         std::tie(b.prev_op, b.layers, b.inp, b.module2inspect);
}

bool operator==(const SmoothQuantAlgo& a, const SmoothQuantAlgo& b) {
  return std::tie(a.alpha, a.scale_clamp_min, a.scaling_layers, a.model_decoder_layers) ==
         std::tie(b.alpha, b.scale_clamp_min, b.scaling_layers, b.model_decoder_layers);
}

bool operator==(const AutoSmoothQuantAlgo& a, const AutoSmoothQuantAlgo& b) {
  return std::tie(a.scaling_layers, a.compute_scale_loss, a.model_decoder_layers) ==
         std::tie(b.scaling_layers, b.compute_scale_loss, b.model_decoder_layers);
}

bool operator==(const AwqAlgo& a, const AwqAlgo& b) {
  return std::tie(a.scaling_layers, a.model_decoder_layers, a.grid_size) ==
         std::tie(b.scaling_layers, b.model_decoder_layers, b.grid_size);
}

bool operator==(const GptqAlgo& a, const GptqAlgo& b) {
  return std::tie(a.damp_percent, a.desc_act, a.static_groups, a.true_sequential, a.inside_layer_modules,
                  a.model_decoder_layers, a.block_size, a.method, a.alpha, a.beta) ==
         std::tie(b.damp_percent, b.desc_act, b.static_groups, b.true_sequential, b.inside_layer_modules,
                  b.model_decoder_layers, b.block_size, b.method, b.alpha, b.beta);
}

bool operator==(const RotationAlgo& a, const RotationAlgo& b) {
  return std::tie(a.random, a.scaling_layers, a.r2, a.r4, a.trainable, a.learning_rate, a.max_steps,
                  a.train_batch_size, a.seed, a.max_memory_bytes) ==
         std::tie(b.random, b.scaling_layers, b.r2, b.r4, b.trainable, b.learning_rate, b.max_steps,
                  b.train_batch_size, b.seed, b.max_memory_bytes);
}

bool operator==(const AutoRoundAlgo& a, const AutoRoundAlgo& b) {
  return std::tie(a.iters, a.lr, a.minmax_lr, a.batch_size, a.gradient_accumulate_steps, a.enable_minmax_tuning,
                  a.not_use_best_mse, a.seed, a.model_decoder_layers) ==
         std::tie(b.iters, b.lr, b.minmax_lr, b.batch_size, b.gradient_accumulate_steps, b.enable_minmax_tuning,
                  b.not_use_best_mse, b.seed, b.model_decoder_layers);
}

std::string_view AlgoName(const AlgoConfig& algo) {
  return std::visit(Overloaded{
                        [](const SmoothQuantAlgo&) { return std::string_view("smooth"); },
                        [](const AutoSmoothQuantAlgo&) { return std::string_view("autosmoothquant"); },
                        [](const AwqAlgo&) { return std::string_view("awq"); },
                        [](const GptqAlgo& a) {
                          return std::string_view(a.method == HessianMethod::kGptaq    ? "gptaq"
                                                  : a.method == HessianMethod::kQronos ? "qronos"
                                                                                       : "gptq");
                        },
                        [](const RotationAlgo&) { return std::string_view("rotation"); },
                        [](const AutoRoundAlgo&) { return std::string_view("autoround"); },
                    },
                    algo);
}

bool operator==(const Config& a, const Config& b) {
  return a.global_quant_config == b.global_quant_config && a.layer_type_quant_config == b.layer_type_quant_config &&
         a.layer_quant_config == b.layer_quant_config && a.kv_cache_quant_config == b.kv_cache_quant_config &&
         a.exclude == b.exclude && a.algo_config == b.algo_config && a.quant_mode == b.quant_mode &&
         a.pack_method == b.pack_method && a.min_kv_scale == b.min_kv_scale;
}

}  // namespace quark
