#include "core/quantize/gptq_pass.h"

#include <set>

#include "core/algorithms/asymmetric_layer.h"
#include "core/algorithms/gptq_kquant.h"
#include "core/base/log.h"
#include "core/base/glob.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/deepseek_layout.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/checkpoint/llama4_layout.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/moe_layout.h"
#include "core/config/fused_group.h"
#include "core/config/quant_types.h"
#include "core/export/gguf_kquant_grid.h"
#include "core/export/scale_dtype.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/expert_streaming.h"
#include "core/runtime/layer_forward.h"
#include "core/runtime/layer_streamer.h"

namespace quark::quantize {

GptqAlgo ResolveGptqDefaults(GptqAlgo algo, const checkpoint::ModelConfig& model) {
  if (algo.inside_layer_modules.empty() && model.family == checkpoint::ArchFamily::kMoe) {
    // Attention as Llama's template, then the shared expert, then every expert's up, gate, down (one entry each
    // over all experts: each expert's linears get their own Hessian, over the tokens routed or topped up to it).
    algo.inside_layer_modules = {"self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj", "self_attn.o_proj"};
    const std::string shared = checkpoint::MoeSharedExpertName(model);
    if (!shared.empty()) {
      for (const char* p : {".up_proj", ".gate_proj", ".down_proj"}) algo.inside_layer_modules.push_back(shared + p);
    }
    const auto names = checkpoint::MoeExpertProjections(model);
    for (const std::string& p : {names.up, names.gate, names.down}) {
      algo.inside_layer_modules.push_back(checkpoint::MoeBlockName(model) + ".experts.*." + p);
    }
  }
  if (algo.inside_layer_modules.empty() && model.family == checkpoint::ArchFamily::kDeepseek) {
    algo.inside_layer_modules = checkpoint::DeepseekGptqModules(*model.deepseek);
  }
  if (algo.inside_layer_modules.empty() && model.family == checkpoint::ArchFamily::kLlama4) {
    algo.inside_layer_modules = checkpoint::Llama4GptqModules(*model.llama4);
  }
  if (algo.inside_layer_modules.empty() && model.family == checkpoint::ArchFamily::kGptOss) {
    algo.inside_layer_modules = checkpoint::GptOssGptqModules();
  }
  if (algo.inside_layer_modules.empty() && model.family == checkpoint::ArchFamily::kPhi3) {
    // Phi-3's fused modules: one GPTQ each, in forward order.
    algo.inside_layer_modules = {"self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"};
  }
  if (algo.inside_layer_modules.empty()) {
    // Quark's templates: k, v, q first (they share an input), then the attention output, then the MLP.
    algo.inside_layer_modules =
        model.family == checkpoint::ArchFamily::kOpt ? std::vector<std::string>{"self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj",
                                                     "self_attn.out_proj", "fc1", "fc2"}
                          : std::vector<std::string>{"self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj",
                                                     "self_attn.o_proj", "mlp.up_proj", "mlp.gate_proj",
                                                     "mlp.down_proj"};
  }
  if (algo.model_decoder_layers.empty()) algo.model_decoder_layers = checkpoint::DecoderLayersName(model);
  return algo;
}

absl::StatusOr<std::unique_ptr<GptqPass>> GptqPass::Create(const GptqAlgo& algo, const LayerPlan& plan,
                                                           const checkpoint::ModelConfig& model, std::string path) {
  std::unique_ptr<GptqPass> pass(new GptqPass());
  pass->algo_ = algo;
  pass->plan_ = plan;
  pass->model_ = model;
  pass->path_ = std::move(path);
  const std::string& p = pass->path_;
  if (algo.model_decoder_layers != checkpoint::DecoderLayersName(model)) {
    return absl::InvalidArgumentError(StrCat(p, ".model_decoder_layers: \"", algo.model_decoder_layers,
                                             "\" is not this model's decoder layers (\"", checkpoint::DecoderLayersName(model),
                                             "\")"));
  }
  if (algo.desc_act && !algo.static_groups) {
    return absl::InvalidArgumentError(StrCat(p, ".static_groups: desc_act needs static_groups"));
  }
  const std::string prefix = checkpoint::LayerPrefix(model, 0);
  const auto linears = checkpoint::LayerLinears(model);
  for (size_t i = 0; i < algo.inside_layer_modules.size(); ++i) {
    bool matched = false;
    for (const auto& linear : linears) {
      matched |= GlobMatch("*" + algo.inside_layer_modules[i], prefix + linear.relative_name);
    }
    if (!matched) {
      return absl::InvalidArgumentError(StrCat(p, ".inside_layer_modules[", i, "]: \"", algo.inside_layer_modules[i],
                                               "\" matches no linear of a decoder layer"));
    }
  }
  return pass;
}

void GptqPass::UseKQuantTargets(std::shared_ptr<exporter::gguf::PreEncodedTensors> pre_encoded, bool with_imatrix) {
  pre_encoded_ = std::move(pre_encoded);
  kquant_imatrix_ = with_imatrix;
  if (algo_.desc_act) {
    log::Get("gptq")->info("{}: K-quant-aware GPTQ walks the columns in order (desc_act does not apply to K-quants)",
                           path_);
  }
}

std::optional<algorithms::GptqTarget> GptqPass::KQuantTarget(const std::string& name, const std::string& relative_name) {
  const std::string tensor = name + ".weight";
  const std::optional<exporter::gguf::GgmlType> type = pre_encoded_->PlannedType(tensor);
  if (!type || !exporter::gguf::IsKQuantGridType(*type)) {
    log::Get("gptq")->info("{}: GGUF type {}: quantized by llama.cpp's rules at export, not by K-quant GPTQ", tensor,
                           type ? exporter::gguf::FindType(*type)->name : "none");
    return std::nullopt;
  }
  algorithms::GptqTarget target;
  target.relative_name = relative_name;
  target.quantize = [this, tensor, type = *type](const at::Tensor& weight, const algorithms::GptqFactor& factor,
                                                  const at::Tensor& diagonal) -> absl::StatusOr<at::Tensor> {
    const at::Tensor qw = kquant_imatrix_ ? (diagonal.to(at::kFloat) / 2).contiguous() : at::Tensor();
    QUARK_ASSIGN_OR_RETURN(algorithms::GptqKQuantResult result, algorithms::GptqKQuantizeWeight(weight, factor, type, qw));
    pre_encoded_->Put(tensor, exporter::gguf::PreEncodedTensor{type, weight.size(0), weight.size(1),
                                                               std::move(result.blocks)});
    kquant_weights_[tensor] = result.weight;
    return result.weight.to(weight.scalar_type());
  };
  return target;
}

absl::StatusOr<algorithms::GptqLayerPlan> GptqPass::PlanFor(const runtime::DecoderLayer& layer) {
  algorithms::GptqLayerPlan plan;
  const auto linears = checkpoint::LayerLinears(model_, layer.index());
  for (const auto& linear : linears) {
    if (plan.input_order.empty() || plan.input_order.back() != linear.input) plan.input_order.push_back(linear.input);
  }
  // NVFP4 shards share a global scale from their float weights, taken before GPTQ rounds (and changes) any of them.
  const std::map<std::string, float> nvfp4_amax = SharedNvfp4Amax(plan_, layer);
  std::set<std::string> taken;  // Quark quantizes a module once, for the first entry that matches it
  for (const std::string& entry : algo_.inside_layer_modules) {
    std::vector<algorithms::GptqTarget> step;
    for (const auto& linear : linears) {
      const std::string name = layer.prefix() + linear.relative_name;
      if (!GlobMatch("*" + entry, name) || taken.count(name) > 0) continue;
      if (kquant()) {
        std::optional<algorithms::GptqTarget> target = KQuantTarget(name, linear.relative_name);
        if (!target) continue;
        target->input = linear.input;
        target->routed = linear.routed;
        step.push_back(*std::move(target));
        taken.insert(name);
        continue;
      }
      const LayerAssignment* a = plan_.Find(name);
      if (a == nullptr || a->source == ConfigSource::kExcluded || !a->config.weight) continue;
      if (IsCastType(a->config.weight->dtype)) continue;
      auto current = layer.FindLinear(linear.relative_name);
      if (current == nullptr) return absl::InvalidArgumentError(StrCat(name, ": no such linear in the layer"));
      // A streamed expert knows its dtype without loading its weight.
      const auto streamed = std::dynamic_pointer_cast<runtime::StreamedLinear>(current);
      const at::ScalarType dtype = streamed ? streamed->dtype() : current->weight().scalar_type();
      algorithms::GptqTarget target;
      target.relative_name = linear.relative_name;
      target.input = linear.input;
      target.routed = linear.routed;
      target.spec = exporter::WeightSpecForExport(*a->config.weight, dtype);
      if (target.spec.IsNvfp4()) {
        const auto amax = nvfp4_amax.find(Nvfp4GlobalScaleKey(name));
        if (amax == nvfp4_amax.end()) return absl::InternalError(StrCat(name, ": no NVFP4 global amax for the module"));
        target.nvfp4_global_amax = amax->second;
      }
      step.push_back(std::move(target));
      taken.insert(name);
    }
    if (!step.empty()) plan.steps.push_back(std::move(step));
  }
  plan.min_expert_tokens = min_expert_tokens_;
  return plan;
}

absl::StatusOr<CalibratedParams> GptqPass::Run(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& samples,
                                               runtime::TransformerModel& model,
                                               const algorithms::GptqLayerCallbacks& callbacks) {
  QUARK_ASSIGN_OR_RETURN(const algorithms::GptqLayerPlan plan, PlanFor(layer));
  algorithms::GptqOptions options;
  options.damp_percent = algo_.damp_percent;
  options.block_size = algo_.block_size;
  // K-quant super-blocks are runs of 256 consecutive columns: GPTQ walks them in order (Quark's desc_act default
  // does not apply; UseKQuantTargets says so in the log).
  options.act_order = algo_.desc_act && !kquant();
  options.static_groups = algo_.static_groups;
  absl::StatusOr<std::map<std::string, QuantParams>> params;
  if (algo_.method == HessianMethod::kGptq) {
    const algorithms::LayerForward forward = [&](const at::Tensor& sample) {
      runtime::ForwardSample(layer, sample, model);
    };
    algorithms::GptqLayerCallbacks with_spill = callbacks;
    if (expert_spill_) {
      with_spill.keep_streamed_weight = [spill = expert_spill_](const std::string& tensor, const at::Tensor& weight,
                                                                const QuantSpec* spec, const QuantParams* params) {
        return spill->Put(tensor, weight, spec, params);
      };
    }
    params = algorithms::GptqQuantizeLayer(layer, samples, forward, plan, options, with_spill, model.activations());
  } else {
    if (layer.index() == 0 || float_inputs_.size() != samples.size()) float_inputs_ = samples;
    // Its outputs are the float stream's next inputs, kept with the activations.
    const algorithms::LayerForwardOutput forward = [&](const at::Tensor& sample) {
      return runtime::ForwardAndHold(layer, sample, model);
    };
    algorithms::AsymmetricOptions asymmetric;
    asymmetric.method = algo_.method;
    asymmetric.gptq = options;
    asymmetric.alpha = algo_.alpha;
    asymmetric.beta = algo_.beta;
    params = algorithms::AsymmetricQuantizeLayer(layer, samples, float_inputs_, forward, plan, asymmetric, callbacks);
  }
  if (!params.ok()) {
    return absl::Status(params.status().code(), StrCat(path_, " (", AlgoName(AlgoConfig(algo_)), "): ",
                                                       std::string(params.status().message())));
  }
  CalibratedParams out;
  for (auto& [name, p] : *params) out[name].weight = std::move(p);
  return out;
}

absl::Status GptqPass::Advance(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& samples,
                               runtime::TransformerModel& model) {
  if (algo_.method == HessianMethod::kGptq) return absl::OkStatus();
  if (layer.index() == 0 || float_inputs_.size() != samples.size()) float_inputs_ = samples;
  try {
    for (at::Tensor& sample : float_inputs_) sample = runtime::ForwardAndHold(layer, sample, model);
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, StrCat("float forward of ", layer.prefix()));
  }
  return absl::OkStatus();
}

}  // namespace quark::quantize
