#include "core/export/ct_moe_rules.h"

#include <map>

#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/json_read.h"
#include "core/export/ct_checker.h"

namespace quark::exporter {
namespace {

using Json = nlohmann::json;

bool Dynamic(const Json& a) { return a.is_object() && a.contains("dynamic") && a["dynamic"] != false; }
bool Nvfp4(const Json& x) {
  return JsonString(x, "type") == "float" && JsonInt(x, "num_bits") == 4 &&
         JsonString(x, "strategy") == "tensor_group" && JsonInt(x, "group_size") == 16;
}

}  // namespace

absl::Status CtSupportsExperts(const checkpoint::ModelConfig& model) {
  if (!checkpoint::HasRoutedExperts(model)) return absl::OkStatus();
  if (model.family == checkpoint::ArchFamily::kMoe) return absl::OkStatus();
  // DeepSeek-V3 names every routed expert too (mlp.experts.E.*); its MLA shards vLLM fuses (fused_qkv_a_proj) are
  // kept in one group by the writer's pre-check and the checker (FusedGroupKey).
  if (model.family == checkpoint::ArchFamily::kDeepseek) return absl::OkStatus();
  // Llama 4: the engine reads (and writes) the per-expert layout feed_forward.experts.E.{gate,up,down}_proj, which
  // vLLM's llama4.py maps onto its FusedMoE through make_expert_params_mapping for any quantization config (its
  // fused experts.gate_up_proj branch is for float checkpoints); llm-compressor's Llama 4 recipes write the same names.
  if (model.family == checkpoint::ArchFamily::kLlama4) return absl::OkStatus();
  if (model.family == checkpoint::ArchFamily::kGptOss) {
    // vLLM's gpt_oss.py sends every quant_method but "mxfp4" and "quark" to _load_weights_other, which copies the
    // fused float experts (mlp.experts.gate_up_proj [E, hidden, 2 I], down_proj) or per-expert float ones; it maps
    // no quantized expert tensor (weight_packed, weight_scale, ...), so a compressed-tensors export's experts would
    // be left unloaded.
    return absl::UnimplementedError(StrCat(
        "export_formats: compressed_tensors of a ", model.model_type,
        " model: vLLM's gpt_oss loader reads compressed-tensors checkpoints through _load_weights_other, which loads "
        "only float experts (fused gate_up_proj/down_proj tensors), not quantized ones; export hf_quark (vLLM's "
        "quark path loads per-expert quantized gpt-oss experts) or gguf"));
  }
  return absl::UnimplementedError(StrCat("export_formats: compressed_tensors of a ", model.model_type,
                                         " model: its checkpoint holds the experts fused ([experts, ...] tensors per "
                                         "projection); only per-expert layouts (mixtral, qwen2_moe, qwen3_moe, "
                                         "deepseek_v3, llama4_text) are written"));
}

absl::StatusOr<std::string> VllmCtMoeMethod(const Json& group, const std::string& format) {
  // get_moe_method's order: MX first (by the weights), then WNA16, NVFP4, fp8 W8A8, dynamic int8 W8A8.
  if (format == "mxfp4-pack-quantized") return std::string("CompressedTensorsW4A4Mxfp4MoEMethod");
  if (format == "mxfp8-quantized") return std::string("CompressedTensorsW8A8Mxfp8MoEMethod");
  const Json& w = group.contains("weights") ? group["weights"] : Json();
  const Json& a = group.contains("input_activations") ? group["input_activations"] : Json();
  const bool has_input = a.is_object();
  const std::string ws = JsonString(w, "strategy");
  if (!has_input && w.is_object() && !Dynamic(w) && (ws == "channel" || ws == "group")) {  // _is_wNa16_group_channel
    const int64_t bits = JsonInt(w, "num_bits");
    if (format != "pack-quantized" || (bits != 4 && bits != 8)) {
      return absl::FailedPreconditionError(StrCat("For Fused MoE layers, only format 'pack-quantized' and bits [4, 8] "
                                                  "are supported, but got format '", format, "' and bits ", bits));
    }
    return std::string("CompressedTensorsWNA16MarlinMoEMethod");
  }
  if (Nvfp4(w)) {
    if (has_input && !Nvfp4(a)) {
      return absl::FailedPreconditionError(
          "For NVFP4 weights, input quantization must also be NVFP4 format or None for NVFP4A16");
    }
    return std::string("CompressedTensorsW4A4Nvfp4MoEMethod");
  }
  if (auto linear = VllmCtScheme(group, format); linear.ok() && *linear == "CompressedTensorsW8A8Fp8") {
    return std::string("CompressedTensorsW8A8Fp8MoEMethod");  // _is_fp8_w8a8: the linear path's predicate
  }
  const bool int8_per_token = JsonString(w, "type") == "int" && JsonInt(w, "num_bits") == 8 && ws == "channel" &&
                              w.value("symmetric", false) && !Dynamic(w) && JsonString(a, "type") == "int" &&
                              JsonInt(a, "num_bits") == 8 && JsonString(a, "strategy") == "token" && Dynamic(a);
  if (int8_per_token) return std::string("CompressedTensorsW8A8Int8MoEMethod");  // _is_dynamic_token_w8a8
  return absl::FailedPreconditionError(
      StrCat("Unsupported FusedMoe scheme: weights ", w.dump(), ", input_activations ", a.dump()));
}

std::string MoeBlockOf(const std::string& module) {
  const size_t at = module.find(".experts.");
  return at == std::string::npos ? "" : module.substr(0, at + 8);
}

std::vector<std::string> CtMoeProblems(const Json& qc, const std::vector<std::string>& routed) {
  std::vector<std::string> out;
  std::map<std::string, std::pair<std::string, Json>> first;  // block -> (its first expert linear, that one's group)
  for (const std::string& module : routed) {
    const std::string block = MoeBlockOf(module);
    if (block.empty()) continue;
    const Json g = CtGroupFor(qc, module);
    auto [it, inserted] = first.try_emplace(block, module, g);
    if (!inserted && g != it->second.second) {
      out.push_back(StrCat(module, ": in a config group other than ", it->second.first,
                           "'s (vLLM loads a block's experts as one fused tensor per projection: one scheme for all)"));
    }
  }
  const std::string global_format = JsonString(qc, "format");
  for (const auto& [block, entry] : first) {
    const Json& g = entry.second;
    // vLLM resolves the block's scheme under its own projection names, whatever the checkpoint calls them (w1/w2/w3).
    for (const char* projection : {".0.gate_proj", ".0.up_proj", ".0.down_proj"}) {
      if (CtGroupFor(qc, block + projection) != g) {
        out.push_back(StrCat(block, projection, ": vLLM looks the experts' scheme up under this name and finds ",
                             CtGroupFor(qc, block + projection).is_null() ? "none" : "another group", " than ",
                             entry.first, "'s"));
      }
    }
    if (g.is_null()) continue;  // UnquantizedFusedMoEMethod
    const std::string format = g.contains("format") && g["format"].is_string() ? g["format"].get<std::string>()
                                                                              : global_format;
    if (auto method = VllmCtMoeMethod(g, format); !method.ok()) {
      out.push_back(StrCat(block, " (experts, group of ", entry.first, "): ", std::string(method.status().message())));
    }
  }
  return out;
}

}  // namespace quark::exporter
