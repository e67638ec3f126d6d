#include "core/export/gguf_dense.h"

#include <map>

namespace quark::exporter::gguf {

std::string DenseGgufArchitecture(const checkpoint::ModelConfig& config) {
  if (config.model_type == "qwen3" || config.model_type == "phi3") return config.model_type;
  return "";
}

std::string DenseLayerTensorName(const std::string& relative_module) {
  static const auto* names = new std::map<std::string, std::string>{{"self_attn.qkv_proj", "attn_qkv"},
                                                                    {"mlp.gate_up_proj", "ffn_up"},
                                                                    {"self_attn.q_norm", "attn_q_norm"},
                                                                    {"self_attn.k_norm", "attn_k_norm"}};
  auto it = names->find(relative_module);
  return it == names->end() ? "" : it->second;
}

void AppendDenseMetadata(const checkpoint::ModelConfig& config, const std::string& arch, Metadata& md) {
  if (arch != "phi3") return;
  // Phi-3 4k/8k have no rope_scaling, so their original context is the context (the converter reads
  // original_max_position_embeddings, equal to max_position_embeddings in those configs); 0 = no window, as the
  // converter writes a null sliding_window.
  md.emplace_back(arch + ".rope.scaling.original_context_length",
                  Value::U32(static_cast<uint32_t>(config.max_position_embeddings)));
  md.emplace_back(arch + ".attention.sliding_window", Value::U32(static_cast<uint32_t>(config.sliding_window)));
}

}  // namespace quark::exporter::gguf
