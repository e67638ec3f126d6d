#include "core/export/hf_quark_moe_rules.h"

#include <map>

#include "core/base/strings.h"
#include "core/checkpoint/deepseek_layout.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/moe_layout.h"
#include "core/config/fused_group.h"
#include "core/export/hf_quark_checker.h"

namespace quark::exporter {
namespace {

// `name` against `reference`: the same exclusion, and the same resolved config when quantized.
void Agree(const nlohmann::ordered_json& qc, const std::string& name, const std::string& reference,
           const std::string& why, std::vector<std::string>& out) {
  const bool excluded = VllmExcluded(qc, reference);
  if (VllmExcluded(qc, name) != excluded) {
    out.push_back(StrCat(name, ": excluded differently from ", reference, " (", why, ")"));
  } else if (!excluded && VllmLayerConfig(qc, name) != VllmLayerConfig(qc, reference)) {
    out.push_back(StrCat(name, ": resolves to a config different from ", reference, " (", why, ")"));
  }
}

// The routed experts `block`.experts.E.{gate,up,down}_proj of one layer as vLLM's FusedMoE loads them: an expert's up
// agrees with its gate (w13), every expert with expert 0 (one scheme per layer).
void FusedExpertsAgree(const nlohmann::ordered_json& qc, const std::string& block, int64_t experts,
                       std::vector<std::string>& out) {
  const std::string first = block + ".experts.0.";
  for (int64_t e = 0; e < experts; ++e) {
    const std::string expert = StrCat(block, ".experts.", e, ".");
    Agree(qc, expert + "up_proj", expert + "gate_proj", "vLLM fuses an expert's gate and up into w13", out);
    if (e == 0) continue;
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      Agree(qc, expert + proj, first + proj, "vLLM's FusedMoE runs one scheme for every expert of a layer", out);
    }
  }
}

}  // namespace

std::vector<std::string> MoeConfigProblems(const nlohmann::ordered_json& qc, const checkpoint::ModelConfig& model) {
  std::vector<std::string> out;
  if (model.family != checkpoint::ArchFamily::kMoe) return out;
  const auto p = checkpoint::MoeExpertProjections(model);
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    const std::string prefix = checkpoint::LayerPrefix(model, i);
    for (const auto& group : {std::vector<std::string>{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}}) {
      for (size_t k = 1; k < group.size(); ++k) {
        Agree(qc, prefix + group[k], prefix + group[0], "vLLM fuses them into qkv_proj", out);
      }
    }
    const std::string shared = checkpoint::MoeSharedExpertName(model);
    if (!shared.empty()) {
      Agree(qc, prefix + shared + ".up_proj", prefix + shared + ".gate_proj", "vLLM fuses them into gate_up_proj", out);
    }
    const std::string first = prefix + checkpoint::MoeExpertName(model, 0) + ".";
    for (int64_t e = 0; e < model.num_experts; ++e) {
      const std::string expert = prefix + checkpoint::MoeExpertName(model, e) + ".";
      Agree(qc, expert + p.up, expert + p.gate, "vLLM fuses an expert's gate and up into w13", out);
      if (e == 0) continue;
      for (const std::string& proj : {p.gate, p.up, p.down}) {
        Agree(qc, expert + proj, first + proj, "vLLM's FusedMoE runs one scheme for every expert of a layer", out);
      }
    }
  }
  return out;
}

std::vector<std::string> MoeRouterProblems(const checkpoint::ModelConfig& model, const checkpoint::CheckpointReader& reader) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    for (const checkpoint::TensorSpec& router : checkpoint::LayerRouterTensors(model, i)) {
      auto ref = reader.Get(router.name);
      if (!ref.ok()) {
        out.push_back(StrCat(router.name, ": missing from the checkpoint (vLLM builds the router unquantized)"));
        continue;
      }
      const checkpoint::StDType dtype = ref->info->dtype;
      if (dtype != checkpoint::StDType::kF32 && dtype != checkpoint::StDType::kBF16 && dtype != checkpoint::StDType::kF16) {
        out.push_back(StrCat(router.name, ": dtype ", checkpoint::StDTypeName(dtype),
                             ", a router must stay float (vLLM builds it unquantized)"));
      }
      if (ref->info->shape != router.shape) {
        out.push_back(StrCat(router.name, ": shape [", StrJoin(ref->info->shape, ", "), "], expected [",
                             StrJoin(router.shape, ", "), "]"));
      }
      const std::string module = router.name.substr(0, router.name.rfind('.'));  // drop ".weight" (".bias", ...)
      for (const char* suffix : {".weight_scale", ".input_scale", ".weight_zero_point"}) {
        if (reader.Get(module + suffix).ok()) {
          out.push_back(StrCat(module, suffix, ": a router carries quantization scales (vLLM loads it unquantized)"));
        }
      }
    }
  }
  return out;
}

std::vector<std::string> DeepseekConfigProblems(const nlohmann::ordered_json& qc, const checkpoint::DeepseekConfig& model) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < model.base.num_hidden_layers; ++i) {
    const std::string prefix = checkpoint::LayerPrefix(model.base, i);
    // The shards vLLM fuses (FusedGroupKey: fused_qkv_a_proj with q_lora_rank, the dense MLP's or the shared experts'
    // gate_up_proj) agree with the first one.
    std::map<std::string, std::string> first_shard;
    for (const checkpoint::LinearSpec& linear : checkpoint::DeepseekLayerLinears(model, i)) {
      const std::string name = prefix + linear.relative_name, key = FusedGroupKey(name);
      if (linear.routed || key == name) continue;
      const auto [it, inserted] = first_shard.try_emplace(key, name);
      if (!inserted) {
        Agree(qc, name, it->second, StrCat("vLLM fuses them into ", key.substr(key.rfind('.') + 1), "_proj"), out);
      }
    }
    if (model.IsMoeLayer(i)) FusedExpertsAgree(qc, prefix + "mlp", model.n_routed_experts, out);
  }
  return out;
}

// Llama 4 text (#32).
std::vector<std::string> Llama4ConfigProblems(const nlohmann::ordered_json& qc, const checkpoint::Llama4Config& model) {
  std::vector<std::string> out;
  const char* const kGateUp = "vLLM fuses them into gate_up_proj";
  for (int64_t i = 0; i < model.base.num_hidden_layers; ++i) {
    const std::string prefix = checkpoint::LayerPrefix(model.base, i);
    for (const char* proj : {"self_attn.k_proj", "self_attn.v_proj"}) {
      Agree(qc, prefix + proj, prefix + "self_attn.q_proj", "vLLM fuses them into qkv_proj", out);
    }
    if (!model.IsMoeLayer(i)) {
      Agree(qc, prefix + "feed_forward.up_proj", prefix + "feed_forward.gate_proj", kGateUp, out);
      continue;
    }
    Agree(qc, prefix + "feed_forward.shared_expert.up_proj", prefix + "feed_forward.shared_expert.gate_proj", kGateUp, out);
    FusedExpertsAgree(qc, prefix + "feed_forward", model.num_local_experts, out);
  }
  return out;
}

// gpt-oss (#32).
std::vector<std::string> GptOssConfigProblems(const nlohmann::ordered_json& qc, const checkpoint::GptOssConfig& model) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < model.base.num_hidden_layers; ++i) {
    const std::string prefix = checkpoint::LayerPrefix(model.base, i);
    for (const char* proj : {"self_attn.k_proj", "self_attn.v_proj"}) {
      Agree(qc, prefix + proj, prefix + "self_attn.q_proj", "vLLM fuses them into qkv_proj", out);
    }
    for (int64_t e = 0; e < model.num_local_experts; ++e) {
      for (const char* proj : {"gate_up_proj", "down_proj"}) {
        const std::string name = StrCat(prefix, "mlp.experts.", e, ".", proj);
        const std::string first = StrCat(prefix, "mlp.experts.0.", proj);
        if (VllmExcluded(qc, name)) {
          out.push_back(StrCat(name, ": excluded, but vLLM's gpt_oss quark loader reads experts only quantized (a float "
                               "per-expert gate_up_proj loads as the w1 shard alone)"));
        } else if (e > 0 && !VllmExcluded(qc, first)) {  // an excluded expert 0 is named once, above
          Agree(qc, name, first, "vLLM's FusedMoE runs one scheme for every expert of a layer", out);
        }
      }
    }
  }
  return out;
}

}  // namespace quark::exporter
