#include "core/quantize/scaling_pass.h"

#include <algorithm>
#include <optional>
#include <set>
#include <variant>

#include "core/algorithms/moe_scaling.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/moe_layout.h"
#include "core/config/quant_types.h"
#include "core/export/scale_dtype.h"
#include "core/quantize/gguf_fake_quant.h"
#include "core/runtime/layer_forward.h"

namespace quark::quantize {
namespace {

bool IsOptModel(const checkpoint::ModelConfig& model) { return model.family == checkpoint::ArchFamily::kOpt; }

// The relative names of the layer's norms ("input_layernorm") and linears ("self_attn.q_proj").
std::set<std::string> NormNames(const checkpoint::ModelConfig& model) {
  std::set<std::string> names;
  const std::string prefix = checkpoint::LayerPrefix(model, 0);
  for (const auto& t : checkpoint::LayerNormTensors(model, 0)) {
    std::string name = t.name.substr(prefix.size());
    names.insert(name.substr(0, name.rfind('.')));
  }
  return names;
}

std::set<std::string> LinearNames(const checkpoint::ModelConfig& model) {
  std::set<std::string> names;
  for (const auto& l : checkpoint::LayerLinears(model)) names.insert(l.relative_name);
  return names;
}

const std::vector<ScalingLayer>& PairsOf(const AlgoConfig& algo) {
  if (const auto* a = std::get_if<SmoothQuantAlgo>(&algo)) return a->scaling_layers;
  if (const auto* a = std::get_if<AutoSmoothQuantAlgo>(&algo)) return a->scaling_layers;
  return std::get<AwqAlgo>(algo).scaling_layers;
}

const std::string& DecoderLayersOf(const AlgoConfig& algo) {
  if (const auto* a = std::get_if<SmoothQuantAlgo>(&algo)) return a->model_decoder_layers;
  if (const auto* a = std::get_if<AutoSmoothQuantAlgo>(&algo)) return a->model_decoder_layers;
  return std::get<AwqAlgo>(algo).model_decoder_layers;
}

// A norm's output channels divided by s leave the layer's function unchanged only if every linear that reads the
// norm takes s back into its input columns, and no other linear does: Quark applies whatever a scaling_layers entry
// says, so a pair that lists q_proj but not k_proj and v_proj silently changes the model it then quantizes.
absl::Status CheckNormReaders(const ScalingLayer& pair, const std::string& path, const checkpoint::ModelConfig& model) {
  std::vector<std::string> readers;
  for (const checkpoint::LinearSpec& linear : checkpoint::LayerLinears(model)) {
    if (linear.input == pair.prev_op) readers.push_back(linear.relative_name);
  }
  for (size_t i = 0; i < pair.layers.size(); ++i) {
    if (std::find(readers.begin(), readers.end(), pair.layers[i]) == readers.end()) {
      return absl::InvalidArgumentError(StrCat(path, ".layers[", i, "]: \"", pair.layers[i], "\" does not read \"",
                                               pair.prev_op, "\": multiplying its input columns by the scale would "
                                               "change the layer's function"));
    }
  }
  for (const std::string& reader : readers) {
    if (std::find(pair.layers.begin(), pair.layers.end(), reader) == pair.layers.end()) {
      return absl::InvalidArgumentError(StrCat(path, ".layers: leaves out \"", reader, "\", which reads \"",
                                               pair.prev_op, "\" too: dividing the norm by the scale would change its "
                                               "input (list every linear that reads the norm)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPairNames(const ScalingLayer& pair, const std::string& path, const std::set<std::string>& norms,
                            const std::set<std::string>& linears, bool has_mlp_module,
                            const checkpoint::ModelConfig& model) {
  const auto unknown = [&](const std::string& field, const std::string& name, const char* what) {
    return absl::InvalidArgumentError(StrCat(path, ".", field, ": \"", name, "\" is not ", what, " of a decoder layer"));
  };
  if (!norms.count(pair.prev_op) && !linears.count(pair.prev_op)) {
    return unknown("prev_op", pair.prev_op, "a norm or a linear");
  }
  if (pair.layers.empty()) return absl::InvalidArgumentError(StrCat(path, ".layers: empty"));
  // In front of an MoE block the routers read the norm too, and every expert's gate/up must be listed.
  const std::optional<algorithms::MoeBlockReaders> moe = algorithms::MoeReadersOf(model, pair.prev_op);
  for (size_t i = 0; i < pair.layers.size(); ++i) {
    const bool router = moe && std::count(moe->routers.begin(), moe->routers.end(), pair.layers[i]) > 0;
    if (!linears.count(pair.layers[i]) && !router) {
      return unknown(StrCat("layers[", i, "]"), pair.layers[i], moe ? "a linear or a router" : "a linear");
    }
  }
  if (moe) return algorithms::CheckMoePair(*moe, pair, path);
  if (norms.count(pair.prev_op)) QUARK_RETURN_IF_ERROR(CheckNormReaders(pair, path, model));
  // Phi-3's fused q | k | v: only its v rows have a linear reader (o_proj, through the attention).
  if (pair.prev_op == "self_attn.qkv_proj") {
    for (size_t i = 0; i < pair.layers.size(); ++i) {
      if (i > 0 || pair.layers[i] != "self_attn.o_proj") {
        return absl::InvalidArgumentError(StrCat(path, ".layers[", i, "]: \"", pair.layers[i], "\": \"", pair.prev_op,
                                                 "\" scales only into [\"self_attn.o_proj\"] (its v rows)"));
      }
    }
  }
  if (!pair.inp.empty() && !linears.count(pair.inp)) return unknown("inp", pair.inp, "a linear");
  const std::string& m = pair.module2inspect;
  if (!m.empty() && m != "self_attn" && !(m == "mlp" && has_mlp_module) && !linears.count(m)) {
    return unknown("module2inspect", m, "self_attn, mlp or a linear");
  }
  return absl::OkStatus();
}

std::string ScalesSummary(const std::string& algo, const algorithms::ScalingResult& r) {
  std::string line = StrCat(algo, " ", r.pair.prev_op, " -> ", StrJoin(r.pair.layers, ","));
  if (r.ratio >= 0) line += StrCat(" ratio ", r.ratio);
  const at::Tensor s = r.scales.to(at::kFloat);
  return StrCat(line, " scales [", s.min().item<float>(), ", ", s.max().item<float>(), "]");
}

}  // namespace

std::vector<ScalingLayer> DefaultScalingLayers(const checkpoint::ModelConfig& model) {
  // v_proj -> o_proj only when the shapes match (Quark's template condition): no grouped KV heads, square head space.
  const bool square_attention = model.num_key_value_heads * model.head_dim == model.hidden_size &&
                                model.num_attention_heads * model.head_dim == model.hidden_size;
  std::vector<ScalingLayer> pairs;
  if (IsOptModel(model)) {
    pairs.push_back({"self_attn_layer_norm", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
                     "self_attn.q_proj", "self_attn"});
    if (square_attention) pairs.push_back({"self_attn.v_proj", {"self_attn.out_proj"}, "self_attn.out_proj", ""});
    pairs.push_back({"final_layer_norm", {"fc1"}, "fc1", ""});
    pairs.push_back({"fc1", {"fc2"}, "fc2", ""});
    return pairs;
  }
  if (model.family == checkpoint::ArchFamily::kGemma) {
    // Gemma: the MLP reads pre_feedforward_layernorm (post_attention_layernorm normalizes the attention output and
    // feeds no linear). The norms scale by (1 + w); RmsNorm::DivideOutputs folds 1/s as w' = (1 + w) / s - 1.
    pairs.push_back({"input_layernorm", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
                     "self_attn.q_proj", "self_attn"});
    if (square_attention) pairs.push_back({"self_attn.v_proj", {"self_attn.o_proj"}, "self_attn.o_proj", ""});
    pairs.push_back({"pre_feedforward_layernorm", {"mlp.gate_proj", "mlp.up_proj"}, "mlp.gate_proj", "mlp"});
    pairs.push_back({"mlp.up_proj", {"mlp.down_proj"}, "mlp.down_proj", ""});
    return pairs;
  }
  if (model.family == checkpoint::ArchFamily::kMoe) {
    // The attention pairs as Llama's; post_attention_layernorm -> every expert's gate/up (and the shared expert's),
    // with the routers, which read that norm too, taking the scale exactly (moe_scaling.h), the statistic over the
    // block's input and the block's output inspected; each expert's (and the shared expert's) up -> down, over the
    // tokens that expert saw (routed or topped up).
    pairs.push_back({"input_layernorm", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
                     "self_attn.q_proj", "self_attn"});
    if (square_attention) pairs.push_back({"self_attn.v_proj", {"self_attn.o_proj"}, "self_attn.o_proj", ""});
    const auto readers = algorithms::MoeReadersOf(model, "post_attention_layernorm");
    ScalingLayer block_pair{"post_attention_layernorm", readers->linears, readers->block_name, readers->block_name};
    pairs.push_back(algorithms::CompleteMoePair(*readers, std::move(block_pair)));
    const std::string shared = checkpoint::MoeSharedExpertName(model);
    if (!shared.empty()) pairs.push_back({shared + ".up_proj", {shared + ".down_proj"}, shared + ".down_proj", ""});
    const auto names = checkpoint::MoeExpertProjections(model);
    for (int64_t e = 0; e < model.num_experts; ++e) {
      const std::string expert = checkpoint::MoeExpertName(model, e) + ".";
      pairs.push_back({expert + names.up, {expert + names.down}, expert + names.down, ""});
    }
    return pairs;
  }
  if (model.family == checkpoint::ArchFamily::kPhi3) {
    // Phi-3's fused linears (AutoAWQ's phi3 template). qkv -> o (under the v -> o condition above) divides only the
    // v rows of qkv_proj, gate_up -> down only the up rows of gate_up_proj (ApplyScaling's fused rules): both exact.
    pairs.push_back({"input_layernorm", {"self_attn.qkv_proj"}, "self_attn.qkv_proj", "self_attn"});
    if (square_attention) pairs.push_back({"self_attn.qkv_proj", {"self_attn.o_proj"}, "self_attn.o_proj", ""});
    pairs.push_back({"post_attention_layernorm", {"mlp.gate_up_proj"}, "mlp.gate_up_proj", "mlp"});
    pairs.push_back({"mlp.gate_up_proj", {"mlp.down_proj"}, "mlp.down_proj", ""});
    return pairs;
  }
  pairs.push_back({"input_layernorm", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}, "self_attn.q_proj",
                   "self_attn"});
  if (square_attention) pairs.push_back({"self_attn.v_proj", {"self_attn.o_proj"}, "self_attn.o_proj", ""});
  pairs.push_back({"post_attention_layernorm", {"mlp.gate_proj", "mlp.up_proj"}, "mlp.gate_proj", "mlp"});
  pairs.push_back({"mlp.up_proj", {"mlp.down_proj"}, "mlp.down_proj", ""});
  return pairs;
}

bool IsScalingAlgo(const AlgoConfig& algo) {
  return std::holds_alternative<SmoothQuantAlgo>(algo) || std::holds_alternative<AutoSmoothQuantAlgo>(algo) ||
         std::holds_alternative<AwqAlgo>(algo);
}

AlgoConfig ResolveScalingDefaults(AlgoConfig algo, const checkpoint::ModelConfig& model) {
  std::visit(
      [&](auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, SmoothQuantAlgo> || std::is_same_v<T, AutoSmoothQuantAlgo> ||
                      std::is_same_v<T, AwqAlgo>) {
          if (a.scaling_layers.empty()) a.scaling_layers = DefaultScalingLayers(model);
          // A pair in front of an MoE block scales the routers too, listed or not: recorded as applied.
          for (ScalingLayer& pair : a.scaling_layers) {
            if (auto moe = algorithms::MoeReadersOf(model, pair.prev_op)) pair = algorithms::CompleteMoePair(*moe, pair);
          }
          if (a.model_decoder_layers.empty()) a.model_decoder_layers = checkpoint::DecoderLayersName(model);
        }
      },
      algo);
  return algo;
}

absl::StatusOr<std::unique_ptr<ScalingPass>> ScalingPass::Create(
    const std::vector<std::pair<size_t, AlgoConfig>>& algos, const LayerPlan& plan,
    const checkpoint::ModelConfig& model) {
  std::unique_ptr<ScalingPass> pass(new ScalingPass());
  pass->algos_ = algos;
  pass->plan_ = plan;
  pass->model_ = model;
  const std::set<std::string> norms = NormNames(model), linears = LinearNames(model);
  for (const auto& [index, algo] : algos) {
    const std::string path = StrCat("algo_config[", index, "]");
    if (model.family == checkpoint::ArchFamily::kDeepseek) {
      // MLA's pairs (q_a/kv_a after input_layernorm, kv_b after kv_a_layernorm) and the dense-then-MoE layers need
      // per-layer templates the pass does not have yet.
      return absl::UnimplementedError(StrCat(path, ": SmoothQuant/AWQ scaling of ", model.model_type,
                                             " is not supported (no scaling template for MLA and its dense-then-MoE "
                                             "layers); RTN, fp8 and GPTQ are"));
    }
    if (model.family == checkpoint::ArchFamily::kLlama4) {
      // Dense and MoE layers interleave, and the router's sigmoid weight scales the experts' input: no template yet.
      return absl::UnimplementedError(StrCat(path, ": SmoothQuant/AWQ scaling of ", model.model_type,
                                             " is not supported (no scaling template for its interleaved dense and MoE "
                                             "layers); RTN, fp8 and GPTQ are"));
    }
    if (model.family == checkpoint::ArchFamily::kGptOss) {
      // The experts' biases and the clamped SwiGLU on interleaved gate/up columns: no template (Quark has none either).
      return absl::UnimplementedError(StrCat(path, ": SmoothQuant/AWQ scaling of ", model.model_type,
                                             " is not supported (no scaling template for its biased experts and "
                                             "clamped SwiGLU); RTN, fp8 and GPTQ are"));
    }
    if (DecoderLayersOf(algo) != checkpoint::DecoderLayersName(model)) {
      return absl::InvalidArgumentError(StrCat(path, ".model_decoder_layers: \"", DecoderLayersOf(algo),
                                               "\" is not this model's decoder layers (\"", checkpoint::DecoderLayersName(model),
                                               "\")"));
    }
    const auto& pairs = PairsOf(algo);
    for (size_t i = 0; i < pairs.size(); ++i) {
      QUARK_RETURN_IF_ERROR(
          CheckPairNames(pairs[i], StrCat(path, ".scaling_layers[", i, "]"), norms, linears, !IsOptModel(model), model));
    }
  }
  return pass;
}

algorithms::LayerQuantSpecs ScalingPass::SpecsFor(const runtime::DecoderLayer& layer) const {
  if (!gguf_types_.empty()) {
    std::map<std::string, std::string> linears;
    for (const auto& linear : layer.NamedLinears()) linears[linear.relative_name] = linear.name;
    return GgufSearchSpecs(linears, gguf_types_);
  }
  algorithms::LayerQuantSpecs specs;
  for (const auto& linear : layer.NamedLinears()) {
    const LayerAssignment* a = plan_.Find(linear.name);
    if (a == nullptr || a->source == ConfigSource::kExcluded) continue;
    algorithms::LinearQuantSpecs s;
    if (a->config.weight && !IsCastType(a->config.weight->dtype)) {
      s.weight = exporter::WeightSpecForExport(*a->config.weight, linear.linear->weight().scalar_type());
    }
    if (a->config.input_tensors && !IsCastType(a->config.input_tensors->dtype)) s.input = a->config.input_tensors;
    specs[linear.relative_name] = s;
  }
  return specs;
}

absl::StatusOr<ScalingLayerResult> ScalingPass::Run(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs,
                                                    runtime::TransformerModel& model,
                                                    const ScalingCallbacks& callbacks) {
  // Layer 0's inputs are the embeddings, the same in the float and the quantized model.
  if (layer.index() == 0 || float_inputs_.size() != inputs.size()) float_inputs_ = inputs;
  algorithms::ScalingInputs in;
  in.samples = &float_inputs_;
  in.activations = model.activations();
  in.run = [&](const at::Tensor& sample) { return runtime::ForwardAndHold(layer, sample, model); };
  in.context = [&](int64_t seq_len) -> const runtime::LayerContext& { return model.Context(seq_len); };
  in.heads = {model_.num_attention_heads, model_.num_key_value_heads};
  in.min_expert_tokens = min_expert_tokens_;
  ScalingLayerResult result;
  in.coverage = &result.coverage;
  const algorithms::LayerQuantSpecs specs = SpecsFor(layer);
  std::vector<at::Tensor> float_outputs;
  for (const auto& [index, algo] : algos_) {
    if (callbacks.cancelled && callbacks.cancelled()) {
      return absl::CancelledError(StrCat("cancelled in ", layer.prefix(), " before algo_config[", index, "]"));
    }
    const std::string name(AlgoName(algo));
    if (callbacks.on_step) callbacks.on_step(name);
    // The float function of the layer does not change: the first algorithm's recording pass gives the outputs.
    std::vector<at::Tensor>* outputs = float_outputs.empty() ? &float_outputs : nullptr;
    // Quark's AWQ and AutoSmoothQuant scale only the linears it quantizes: pairs that touch another are left out
    // (an MoE block's routers, never quantized, are scaled exactly and do not count).
    const auto quantized_pairs = [&](const std::vector<ScalingLayer>& all) {
      std::vector<ScalingLayer> pairs;
      for (const auto& pair : all) {
        bool quantized = true;
        for (const auto& l : pair.layers) {
          if (algorithms::IsRouter(layer, l)) continue;
          quantized &= specs.count(l) > 0 && specs.at(l).weight.has_value();
        }
        if (quantized) pairs.push_back(pair);
      }
      return pairs;
    };
    absl::StatusOr<std::vector<algorithms::ScalingResult>> applied;
    if (const auto* a = std::get_if<SmoothQuantAlgo>(&algo)) {
      applied = algorithms::SmoothQuantLayer(layer, in, a->scaling_layers, {a->alpha, a->scale_clamp_min}, outputs);
    } else if (const auto* a = std::get_if<AutoSmoothQuantAlgo>(&algo)) {
      applied = algorithms::AutoSmoothQuantLayer(layer, in, quantized_pairs(a->scaling_layers), specs,
                                                 a->compute_scale_loss, outputs);
    } else {
      const auto& awq = std::get<AwqAlgo>(algo);
      algorithms::AwqOptions options;
      options.grid_size = awq.grid_size;
      options.search_batch_bytes = search_batch_bytes_;
      applied = algorithms::AwqLayer(layer, in, quantized_pairs(awq.scaling_layers), specs, options, outputs);
    }
    if (!applied.ok()) {
      return absl::Status(applied.status().code(), StrCat("algo_config[", index, "] (", name, ") in ", layer.prefix(),
                                                          ": ", std::string(applied.status().message())));
    }
    for (const auto& r : *applied) result.summary.push_back(ScalesSummary(name, r));
  }
  float_inputs_ = std::move(float_outputs);
  for (auto& [relative, tensor] : algorithms::LayerTensors(layer)) result.tensors[layer.prefix() + relative] = tensor;
  return result;
}

absl::Status ScalingPass::Advance(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs,
                                  runtime::TransformerModel& model) {
  if (layer.index() == 0 || float_inputs_.size() != inputs.size()) float_inputs_ = inputs;
  for (at::Tensor& sample : float_inputs_) sample = runtime::ForwardAndHold(layer, sample, model);
  return absl::OkStatus();
}

}  // namespace quark::quantize
