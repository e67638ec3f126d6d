#include "tests/export/gguf_moe_models.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>

#include <ATen/ATen.h>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/weight_source.h"

namespace quark::testing {
namespace {

namespace fs = std::filesystem;

// config.json, model.safetensors (F32, each tensor from `fill`) and a copy of `tokenizer_model` in `dir`.
absl::Status WriteModel(const checkpoint::ModelConfig& c, const std::string& dir, const std::string& tokenizer_model,
                        const std::function<absl::StatusOr<at::Tensor>(const checkpoint::TensorSpec&)>& fill) {
  fs::create_directories(dir);
  { std::ofstream(dir + "/config.json") << checkpoint::ModelConfigToJson(c); }
  const auto tensors = checkpoint::ModelTensors(c);
  std::vector<checkpoint::PlannedTensor> plan;
  for (const auto& t : tensors) plan.push_back({t.name, checkpoint::StDType::kF32, t.shape});
  QUARK_ASSIGN_OR_RETURN(auto writer, checkpoint::CheckpointWriter::Create(dir, plan));
  for (const auto& t : tensors) {
    QUARK_ASSIGN_OR_RETURN(at::Tensor v, fill(t));
    if (v.sizes().vec() != t.shape) return absl::InternalError(StrCat(t.name, ": made with the wrong shape"));
    v = v.to(at::kFloat).contiguous();
    QUARK_RETURN_IF_ERROR(writer->Write(t.name, std::string_view(static_cast<const char*>(v.data_ptr()), v.nbytes())));
  }
  QUARK_RETURN_IF_ERROR(writer->Finish());
  std::error_code ec;
  fs::copy_file(tokenizer_model, dir + "/tokenizer.model", fs::copy_options::overwrite_existing, ec);
  if (ec) return absl::InternalError(StrCat("copying ", tokenizer_model, ": ", ec.message()));
  return absl::OkStatus();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

absl::StatusOr<checkpoint::ModelConfig> MoeConfigOver(const checkpoint::ModelConfig& dense,
                                                      const std::string& model_type, int64_t experts,
                                                      int64_t expert_width) {
  checkpoint::ModelConfig c = dense;
  c.model_type = model_type;
  c.family = checkpoint::ArchFamily::kMoe;
  c.num_experts = experts;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = expert_width;
  if (model_type == "mixtral") c.intermediate_size = expert_width;  // mixtral's expert width is intermediate_size
  c.shared_expert_intermediate_size = model_type == "qwen2_moe" ? expert_width : 0;
  c.norm_topk_prob = model_type != "qwen2_moe";  // what llama.cpp's architecture does (gguf_moe.h)
  c.attention_bias = model_type == "qwen2_moe";
  c.o_proj_bias = false;
  c.mlp_bias = false;
  c.qk_norm = model_type == "qwen3_moe";
  c.sliding_window = 0;
  c.sliding_window_layers.clear();
  c.rope_scaling.reset();
  return checkpoint::ParseModelConfig(checkpoint::ModelConfigToJson(c));
}

absl::Status WriteSmallMoeModel(const std::string& model_type, const std::string& dir,
                                const std::string& tokenizer_model, bool tied) {
  checkpoint::ModelConfig dense;
  dense.tie_word_embeddings = tied;
  dense.model_type = "llama";
  dense.hidden_size = 64;
  dense.intermediate_size = 128;
  dense.num_hidden_layers = 2;
  dense.num_attention_heads = 4;
  dense.num_key_value_heads = 2;
  dense.head_dim = 16;
  dense.vocab_size = 512;
  dense.max_position_embeddings = 256;
  dense.rms_norm_eps = 1e-5;
  dense.bos_token_id = 1;
  dense.eos_token_id = 2;
  dense.torch_dtype = "float32";
  QUARK_ASSIGN_OR_RETURN(const checkpoint::ModelConfig c, MoeConfigOver(dense, model_type, 4, 64));
  at::manual_seed(23);
  return WriteModel(c, dir, tokenizer_model, [](const checkpoint::TensorSpec& t) -> absl::StatusOr<at::Tensor> {
    if (t.role == checkpoint::TensorRole::kNormWeight) return 1 + 0.1 * at::randn(t.shape);
    if (t.role == checkpoint::TensorRole::kEmbedding) return at::randn(t.shape);
    return at::randn(t.shape) * (t.role == checkpoint::TensorRole::kLinearBias ? 0.5 : 0.1);
  });
}

absl::Status WriteTransplantedMoeModel(const std::string& model_type, const std::string& donor_dir,
                                       const std::string& dir) {
  QUARK_ASSIGN_OR_RETURN(const checkpoint::ModelConfig dense, checkpoint::LoadModelConfig(donor_dir));
  QUARK_ASSIGN_OR_RETURN(const checkpoint::ModelConfig c,
                         MoeConfigOver(dense, model_type, 4, dense.intermediate_size));
  QUARK_ASSIGN_OR_RETURN(auto reader, checkpoint::CheckpointReader::Open(donor_dir));
  const runtime::CheckpointWeightSource donor(std::move(reader));
  at::manual_seed(29);
  // "model.layers.L.<block>.experts.E.<proj>.weight" / "...shared_expert.<proj>.weight" -> the donor's MLP tensor.
  static const std::regex expert(R"(model\.layers\.(\d+)\..*(?:experts\.\d+|shared_expert)\.(\w+)\.weight)");
  const std::map<std::string, std::string> dense_projection = {{"w1", "gate_proj"}, {"w3", "up_proj"},
                                                               {"w2", "down_proj"}, {"gate_proj", "gate_proj"},
                                                               {"up_proj", "up_proj"}, {"down_proj", "down_proj"}};
  return WriteModel(c, dir, donor_dir + "/tokenizer.model",
                    [&](const checkpoint::TensorSpec& t) -> absl::StatusOr<at::Tensor> {
    if (donor.Has(t.name)) return donor.Get(t.name, at::kFloat);
    std::smatch m;
    if (std::regex_match(t.name, m, expert)) {
      auto it = dense_projection.find(m[2].str());
      if (it == dense_projection.end()) return absl::InternalError(StrCat(t.name, ": unknown expert projection"));
      QUARK_ASSIGN_OR_RETURN(const at::Tensor mlp,
                             donor.Get(StrCat("model.layers.", m[1].str(), ".mlp.", it->second, ".weight"), at::kFloat));
      return mlp + 0.75 * mlp.std() * at::randn(mlp.sizes());
    }
    if (t.role == checkpoint::TensorRole::kNormWeight) return 1 + 0.05 * at::randn(t.shape);  // qwen3 q/k norms
    if (t.role == checkpoint::TensorRole::kLinearBias) return 0.02 * at::randn(t.shape);      // qwen2 q/k/v biases
    if (EndsWith(t.name, "shared_expert_gate.weight")) return 0.05 * at::randn(t.shape);
    if (EndsWith(t.name, ".gate.weight")) return 0.5 * at::randn(t.shape);  // the router
    return absl::InternalError(StrCat(t.name, ": not in the donor ", donor_dir, " and no rule makes it"));
  });
}

}  // namespace quark::testing
