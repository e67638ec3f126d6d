#include "tests/runtime/gemma_models.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/tensor_view.h"

namespace quark::runtime::testing {
namespace {

namespace fs = std::filesystem;

absl::Status WriteGemmaFolder(const checkpoint::ModelConfig& config, const std::string& dir,
                              const std::map<std::string, at::Tensor>& tensors) {
  std::vector<checkpoint::PlannedTensor> plan;
  for (const auto& spec : checkpoint::ModelTensors(config)) {
    auto it = tensors.find(spec.name);
    if (it == tensors.end()) return absl::InternalError(StrCat("no tensor for ", spec.name));
    if (it->second.sizes().vec() != spec.shape) return absl::InternalError(StrCat(spec.name, " has the wrong shape"));
    plan.push_back({spec.name, checkpoint::StDType::kF32, spec.shape});
  }
  auto writer = checkpoint::CheckpointWriter::Create(dir, std::move(plan));
  if (!writer.ok()) return writer.status();
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor t = tensor.to(at::kFloat).contiguous();
    if (auto status = (*writer)->Write(name, std::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes()));
        !status.ok()) {
      return status;
    }
  }
  if (auto status = (*writer)->Finish(); !status.ok()) return status;
  std::ofstream out(fs::path(dir) / "config.json", std::ios::trunc);
  out << checkpoint::ModelConfigToJson(config);
  return out ? absl::OkStatus() : absl::InternalError(StrCat("cannot write ", dir, "/config.json"));
}

void SetGemmaDefaults(checkpoint::ModelConfig& c, const std::string& model_type, int64_t window) {
  const bool gemma2 = model_type == "gemma2";
  c.model_type = model_type;
  c.family = checkpoint::ArchFamily::kGemma;
  c.hidden_act = "gelu_pytorch_tanh";
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = true;
  c.attention_bias = c.o_proj_bias = c.mlp_bias = false;
  c.query_pre_attn_scalar = static_cast<double>(c.head_dim);
  c.attn_logit_softcapping = gemma2 ? 50.0 : 0.0;
  c.final_logit_softcapping = gemma2 ? 30.0 : 0.0;
  c.rope_theta = gemma2 ? 10000.0 : 1000000.0;
  c.rope_local_base_freq = gemma2 ? 0.0 : 10000.0;
  c.sliding_window = window;
  c.sliding_window_layers.clear();
  const int64_t pattern = gemma2 ? 2 : 6;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) c.sliding_window_layers.push_back((i + 1) % pattern != 0);
}

}  // namespace

checkpoint::ModelConfig TinyGemmaConfig(const std::string& model_type, int64_t window, bool rope_scaling) {
  checkpoint::ModelConfig c;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = model_type == "gemma2" ? 4 : 6;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 512;
  c.max_position_embeddings = 512;
  c.bos_token_id = 2;
  c.eos_token_id = 1;
  SetGemmaDefaults(c, model_type, window);
  if (rope_scaling) c.rope_scaling = checkpoint::RopeScaling{"linear", 8.0};
  return c;
}

absl::Status WriteRandomGemmaModel(const checkpoint::ModelConfig& config, const std::string& dir, uint64_t seed,
                                   double weight_std) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::map<std::string, at::Tensor> tensors;
  for (const auto& spec : checkpoint::ModelTensors(config)) {
    const double std = spec.role == checkpoint::TensorRole::kNormWeight ? 0.2 : weight_std;
    tensors[spec.name] = at::normal(0.0, std, spec.shape, generator);
  }
  return WriteGemmaFolder(config, dir, tensors);
}

absl::StatusOr<checkpoint::ModelConfig> TransplantTinyLlamaToGemma(const std::string& llama_dir,
                                                                   const std::string& model_type,
                                                                   const std::string& dir, int64_t window) {
  if (model_type != "gemma2" && model_type != "gemma3_text") {
    return absl::InvalidArgumentError(StrCat("model_type \"", model_type, "\" is not gemma2 or gemma3_text"));
  }
  auto source = checkpoint::LoadModelConfig(llama_dir);
  if (!source.ok()) return source.status();
  auto reader = checkpoint::CheckpointReader::Open(llama_dir);
  if (!reader.ok()) return reader.status();
  const auto get = [&](const std::string& name) -> at::Tensor {
    auto ref = (*reader)->Get(name);
    if (!ref.ok()) throw std::runtime_error(std::string(ref.status().message()));
    return ViewTensor(*ref).value().to(at::kFloat).clone();
  };
  checkpoint::ModelConfig config = *source;
  const int64_t source_layers = source->num_hidden_layers;
  config.num_hidden_layers = model_type == "gemma2" ? source_layers : 6;
  SetGemmaDefaults(config, model_type, window);
  config.rms_norm_eps = source->rms_norm_eps;  // the eps its norms were trained with
  auto generator = at::make_generator<at::CPUGeneratorImpl>(18);
  std::map<std::string, at::Tensor> tensors;
  try {
    tensors["model.embed_tokens.weight"] = get("lm_head.weight");
    tensors["model.norm.weight"] = get("model.norm.weight") - 1;
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
      const std::string to = checkpoint::LayerPrefix(config, i);
      const std::string from = checkpoint::LayerPrefix(*source, i % source_layers);
      for (const auto& linear : checkpoint::LayerLinears(config)) {
        tensors[to + linear.relative_name + ".weight"] = get(from + linear.relative_name + ".weight");
      }
      tensors[to + "input_layernorm.weight"] = get(from + "input_layernorm.weight") - 1;
      tensors[to + "pre_feedforward_layernorm.weight"] = get(from + "post_attention_layernorm.weight") - 1;
      for (const auto& norm : checkpoint::LayerNormTensors(config, i)) {
        if (!tensors.count(norm.name)) tensors[norm.name] = at::normal(0.0, 0.05, norm.shape, generator);
      }
    }
  } catch (const std::exception& error) {
    return absl::InternalError(error.what());
  }
  if (auto status = WriteGemmaFolder(config, dir, tensors); !status.ok()) return status;
  std::error_code ec;
  fs::copy_file(fs::path(llama_dir) / "tokenizer.model", fs::path(dir) / "tokenizer.model",
                fs::copy_options::overwrite_existing, ec);
  if (ec) return absl::InternalError(StrCat("copying tokenizer.model: ", ec.message()));
  return config;
}

}  // namespace quark::runtime::testing
