#include "bench/algorithms/mlp_bench.h"

#include <chrono>
#include <iostream>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/algorithms/mlp_block.h"
#include "bench/bench_clock.h"
#include "core/algorithms/smoothing.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/runtime/calibration_data.h"
#include "core/runtime/full_model.h"
#include "core/runtime/tokenizer.h"

namespace quark::bench {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Quark's Llama scaling_layers restricted to the MLP (core/quantize/scaling_pass.cc DefaultScalingLayers).
std::vector<ScalingLayer> MlpPairs(bool with_down) {
  std::vector<ScalingLayer> pairs = {
      {"post_attention_layernorm", {"mlp.gate_proj", "mlp.up_proj"}, "mlp.gate_proj", "mlp"}};
  if (with_down) pairs.push_back({"mlp.up_proj", {"mlp.down_proj"}, "mlp.down_proj", ""});
  return pairs;
}

const char* const kMlpLinears[] = {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};

OrderedJson PairsSummary(const std::vector<algorithms::ScalingResult>& results) {
  OrderedJson pairs = OrderedJson::array();
  for (const auto& r : results) {
    const at::Tensor s = r.scales.to(at::kDouble);
    pairs.push_back({{"prev_op", r.pair.prev_op},
                     {"layers", r.pair.layers},
                     {"ratio", r.ratio},
                     {"scale_min", s.min().item<double>()},
                     {"scale_max", s.max().item<double>()},
                     {"scale_mean", s.mean().item<double>()}});
  }
  return pairs;
}

// Writes the transformed float weights (`*_scaled`, the smoothed norm) and their quantized values.
int WriteOut(const std::string& path, const MlpOnlyLayer& layer, std::map<std::string, at::Tensor> quantized,
             const std::vector<algorithms::ScalingResult>& results, const std::string& algorithm) {
  std::map<std::string, at::Tensor> out = std::move(quantized);
  out["norm_weight"] = layer.post_attention_layernorm->weight();
  out["gate_proj_scaled"] = layer.mlp->gate_proj->weight();
  out["up_proj_scaled"] = layer.mlp->up_proj->weight();
  out["down_proj_scaled"] = layer.mlp->down_proj->weight();
  for (size_t i = 0; i < results.size(); ++i) out[fmt::format("scales_{}", i)] = results[i].scales;
  if (auto s = WriteTensors(path, out, {{"algorithm", algorithm}}); !s.ok()) {
    return std::cerr << "--out: " << s.message() << "\n", 1;
  }
  return 0;
}

absl::StatusOr<QuantSpec> AwqWeightSpec(const MlpFlags& f) {
  QuantSpec spec;
  switch (f.bits) {
    case 8: spec.dtype = f.sym ? DType::kInt8 : DType::kUInt8; break;
    case 4: spec.dtype = f.sym ? DType::kInt4 : DType::kUInt4; break;
    case 3: spec.dtype = DType::kInt3; break;
    default: return absl::InvalidArgumentError(fmt::format("--bits: {} is not 8, 4 or 3", f.bits));
  }
  spec.symmetric = f.sym;
  if (f.group_size > 0) {
    spec.qscheme = QScheme::kPerGroup;
    spec.group_size = f.group_size;
    spec.ch_axis = 1;
  } else {
    spec.qscheme = QScheme::kPerChannel;
    spec.ch_axis = 0;
  }
  return spec;
}

QuantSpec Int8PerTensor() {
  QuantSpec spec;
  spec.dtype = DType::kInt8;
  spec.qscheme = QScheme::kPerTensor;
  spec.symmetric = true;
  return spec;
}

algorithms::ScalingInputs InputsFor(MlpOnlyLayer& layer, const std::vector<at::Tensor>& samples) {
  static const runtime::LayerContext kNoContext;  // the MLP needs no RoPE tables or mask
  algorithms::ScalingInputs in;
  in.samples = &samples;
  in.run = [&layer](const at::Tensor& sample) { return layer.forward(sample, kNoContext); };
  in.context = [](int64_t) -> const runtime::LayerContext& { return kNoContext; };
  return in;
}

// Times AwqBestClip on gate, up and down with the inputs AwqLayer hands it: `normed` (the current norm's output) for
// gate/up and the float block's down_proj input divided by `down_scales` for down.
absl::StatusOr<double> ClipSearchSeconds(const MlpOnlyLayer& layer, const at::Tensor& normed,
                                         const at::Tensor& norm_scales, const at::Tensor& down_scales,
                                         const MlpBlockTensors& block, const QuantSpec& spec,
                                         const algorithms::AwqOptions& options) {
  const at::Tensor orig_normed = normed * norm_scales.view({1, -1});  // the float block's norm output
  const at::Tensor down_in = at::silu(at::matmul(orig_normed, block.gate_proj.t())) *
                             at::matmul(orig_normed, block.up_proj.t()) / down_scales.view({1, -1});
  const auto start = Clock::now();
  for (const auto& [name, in] : {std::pair<std::string, at::Tensor>{"mlp.gate_proj", normed},
                                 {"mlp.up_proj", normed}, {"mlp.down_proj", down_in}}) {
    QUARK_RETURN_IF_ERROR(algorithms::AwqBestClip(layer.FindLinear(name)->weight(), in, spec, options).status());
  }
  return Seconds(start);
}

}  // namespace

int RunAwq(const MlpFlags& f) {
  auto spec = AwqWeightSpec(f);
  if (!spec.ok()) return std::cerr << spec.status().message() << "\n", 2;
  auto block = ReadMlpBlock(f.input);
  if (!block.ok()) return std::cerr << block.status().message() << "\n", 2;
  MlpOnlyLayer layer(*block, f.eps);
  const BlockQuant quant{*spec, std::nullopt};
  const at::Tensor x = block->inputs;
  algorithms::AwqOptions options;
  options.grid_size = f.grid;
  if (f.clip_only) {  // the clip search alone on the unscaled block (the same work as inside AwqLayer)
    const at::Tensor ones = at::ones({x.size(1)}), ones_i = at::ones({block->gate_proj.size(0)});
    auto seconds = ClipSearchSeconds(layer, layer.post_attention_layernorm->forward(x), ones, ones_i, *block, *spec,
                                     options);
    if (!seconds.ok()) return std::cerr << "awq: " << seconds.status().message() << "\n", 1;
    std::cout << OrderedJson{{"algorithm", "awq-clip-only"}, {"implementation", "quarkd"},
                             {"threads", at::get_num_threads()}, {"clip_s", *seconds}}.dump()
              << std::endl;
    return 0;
  }
  auto rtn = QuantizedBlockOutput(layer, x, quant);
  if (!rtn.ok()) return std::cerr << "rtn: " << rtn.status().message() << "\n", 2;

  algorithms::LayerQuantSpecs specs;
  for (const char* name : kMlpLinears) specs[name].weight = *spec;
  const std::vector<at::Tensor> samples = {x.unsqueeze(0)};
  std::vector<at::Tensor> outputs;
  std::map<std::string, at::Tensor> clips;
  const auto start = Clock::now();
  auto results = algorithms::AwqLayer(layer, InputsFor(layer, samples), MlpPairs(true), specs, options, &outputs,
                                      &clips);
  const double algo_s = Seconds(start);
  if (!results.ok()) return std::cerr << "awq: " << results.status().message() << "\n", 1;
  const at::Tensor y = outputs.at(0).squeeze(0);
  std::map<std::string, at::Tensor> quantized;
  auto yq = QuantizedBlockOutput(layer, x, quant, &quantized);
  if (!yq.ok()) return std::cerr << "awq: " << yq.status().message() << "\n", 1;
  // The clip search's share of algo_s: AwqBestClip again on each linear with the inputs AwqLayer gave it (the float
  // block's inputs divided by the pair's scales), for timing only; the result is not used.
  double clip_s = -1;
  if (f.time_clip) {
    const at::Tensor normed = layer.post_attention_layernorm->forward(x);
    auto seconds = ClipSearchSeconds(layer, normed, (*results)[0].scales, (*results)[1].scales, *block, *spec, options);
    if (!seconds.ok()) return std::cerr << "awq: " << seconds.status().message() << "\n", 1;
    clip_s = *seconds;
  }
  OrderedJson clip_summary;
  for (const auto& [name, max_val] : clips) {
    clip_summary[name] = {max_val.min().item<double>(), max_val.max().item<double>()};
  }
  const OrderedJson line = {
      {"algorithm", "awq"},
      {"implementation", "quarkd"},
      {"hidden", x.size(1)},
      {"intermediate", block->gate_proj.size(0)},
      {"tokens", x.size(0)},
      {"threads", at::get_num_threads()},
      {"bits", f.bits},
      {"symmetric", f.sym},
      {"group_size", f.group_size},
      {"algo_s", algo_s},
      {"clip_s", clip_s},
      {"rel_output_error", RelativeError(y, *yq)},
      {"rtn_rel_output_error", RelativeError(y, *rtn)},
      {"pairs", PairsSummary(*results)},
      {"clip_range", clip_summary},
  };
  std::cout << line.dump() << std::endl;
  return f.out.empty() ? 0 : WriteOut(f.out, layer, std::move(quantized), *results, "awq");
}

int RunSmoothQuant(const MlpFlags& f) {
  if (f.pairs != "both" && f.pairs != "norm") {
    return std::cerr << "--pairs: \"" << f.pairs << "\" is not both or norm\n", 2;
  }
  if (!(f.alpha >= 0 && f.alpha <= 1)) return std::cerr << "--alpha: " << f.alpha << " is not in [0, 1]\n", 2;
  auto block = ReadMlpBlock(f.input);
  if (!block.ok()) return std::cerr << block.status().message() << "\n", 2;
  MlpOnlyLayer layer(*block, f.eps);
  // W8A8: int8 per-tensor symmetric weights and static per-tensor input activations of gate/up/down.
  const BlockQuant quant{Int8PerTensor(), Int8PerTensor()};
  const at::Tensor x = block->inputs;
  auto rtn = QuantizedBlockOutput(layer, x, quant);
  if (!rtn.ok()) return std::cerr << "rtn: " << rtn.status().message() << "\n", 2;

  const std::vector<at::Tensor> samples = {x.unsqueeze(0)};
  algorithms::SmoothQuantOptions options;
  options.alpha = static_cast<float>(f.alpha);
  options.scale_clamp_min = static_cast<float>(f.scale_clamp_min);
  // The float output to measure errors against, outside the timed part: SmoothQuant itself (like smoothquant's
  // get_act_scales) needs only the maxima at the linears' inputs, and stops the forward once it has them.
  const at::Tensor y = layer.forward(samples[0], {}).squeeze(0);
  const auto start = Clock::now();
  auto results = algorithms::SmoothQuantLayer(layer, InputsFor(layer, samples), MlpPairs(f.pairs == "both"), options,
                                              nullptr);
  const double algo_s = Seconds(start);
  if (!results.ok()) return std::cerr << "smoothquant: " << results.status().message() << "\n", 1;
  std::map<std::string, at::Tensor> quantized;
  auto yq = QuantizedBlockOutput(layer, x, quant, &quantized);
  if (!yq.ok()) return std::cerr << "smoothquant: " << yq.status().message() << "\n", 1;
  const OrderedJson line = {
      {"algorithm", "smoothquant"},
      {"implementation", "quarkd"},
      {"hidden", x.size(1)},
      {"intermediate", block->gate_proj.size(0)},
      {"tokens", x.size(0)},
      {"threads", at::get_num_threads()},
      {"scheme", "w8a8 int8 per-tensor static (Quark numerics: amax / 127.5)"},
      {"alpha", f.alpha},
      {"scale_clamp_min", f.scale_clamp_min},
      {"pairs_mode", f.pairs},
      {"algo_s", algo_s},
      {"rel_output_error", RelativeError(y, *yq)},
      {"rtn_rel_output_error", RelativeError(y, *rtn)},
      {"pairs", PairsSummary(*results)},
  };
  std::cout << line.dump() << std::endl;
  return f.out.empty() ? 0 : WriteOut(f.out, layer, std::move(quantized), *results, "smoothquant");
}

int RunDumpMlp(const MlpFlags& f) {
  auto lm = OpenModelAtLayer(f.model_dir, f.layer);
  if (!lm.ok()) return std::cerr << lm.status().message() << "\n", 2;
  runtime::TransformerModel& model = (*lm)->model();
  const auto& config = model.config();
  auto* target = dynamic_cast<runtime::LlamaDecoderLayer*>((*lm)->layers()[f.layer].get());
  if (target == nullptr) return std::cerr << "--model: not a Llama-family model\n", 2;
  auto tokenizer = runtime::Tokenizer::Open(f.model_dir + "/tokenizer.model", config.bos_token_id, config.eos_token_id);
  if (!tokenizer.ok()) return std::cerr << "--model: " << tokenizer.status().message() << "\n", 2;
  runtime::CalibrationOptions calib;
  calib.path = f.calib;
  calib.format = runtime::CalibrationFormat::kText;
  calib.num_samples = f.samples;
  calib.seq_len = f.seq_len;
  calib.seed = f.seed;
  auto set = runtime::LoadCalibrationSet(calib, tokenizer->get());
  if (!set.ok()) return std::cerr << "--calib: " << set.status().message() << "\n", 2;
  std::vector<at::Tensor> hidden_states;
  at::NoGradGuard no_grad;
  for (const at::Tensor& ids : set->samples) {
    auto embedded = model.Embed(ids);
    if (!embedded.ok()) return std::cerr << embedded.status().message() << "\n", 1;
    at::Tensor h = *embedded;
    const runtime::LayerContext& ctx = model.Context(ids.size(1));
    for (int l = 0; l < f.layer; ++l) h = (*lm)->layers()[l]->forward(h, ctx);
    // The MLP block's input: after the attention residual, before post_attention_layernorm.
    h = h + target->self_attn->forward(target->input_layernorm->forward(h), ctx);
    hidden_states.push_back(h.reshape({-1, h.size(-1)}).to(at::kFloat));
  }
  const std::map<std::string, at::Tensor> tensors = {
      {"norm_weight", target->post_attention_layernorm->weight()},
      {"gate_proj", target->mlp->gate_proj->weight()},
      {"up_proj", target->mlp->up_proj->weight()},
      {"down_proj", target->mlp->down_proj->weight()},
      {"inputs", at::cat(hidden_states, 0)},
  };
  const std::map<std::string, std::string> metadata = {
      {"source", f.model_dir},
      {"layer", std::to_string(f.layer)},
      {"rms_norm_eps", fmt::format("{}", config.rms_norm_eps)},
      {"calibration", fmt::format("{} windows of {} tokens from {}, seed {}", f.samples, f.seq_len, f.calib, f.seed)}};
  if (auto s = WriteTensors(f.out, tensors, metadata); !s.ok()) return std::cerr << "--out: " << s.message() << "\n", 1;
  const OrderedJson line = {{"wrote", f.out},
                            {"layer", f.layer},
                            {"tokens", tensors.at("inputs").size(0)},
                            {"hidden", config.hidden_size},
                            {"intermediate", target->mlp->gate_proj->out_features()},
                            {"rms_norm_eps", config.rms_norm_eps}};
  std::cout << line.dump() << std::endl;
  return 0;
}

}  // namespace quark::bench
