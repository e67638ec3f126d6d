#include "tests/runtime/dense_arch_models.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/full_model.h"
#include "core/runtime/tensor_view.h"
#include "core/runtime/tokenizer.h"

namespace quark::runtime::testing {
namespace {

namespace fs = std::filesystem;

absl::Status WriteFolder(const checkpoint::ModelConfig& config, const std::string& dir,
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

// Records the mean over tokens and heads of each head's RMS in a linear's output.
class HeadRmsLinear : public LinearLike {
 public:
  HeadRmsLinear(std::shared_ptr<LinearLike> inner, int64_t head_dim) : inner_(std::move(inner)), head_dim_(head_dim) {}
  at::Tensor forward(const at::Tensor& input) override {
    at::Tensor y = inner_->forward(input);
    const at::Tensor heads = y.to(at::kDouble).reshape({-1, head_dim_});
    sum_ += heads.pow(2).mean(1).sqrt().sum().item<double>();
    count_ += heads.size(0);
    return y;
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  at::Tensor weight() const override { return inner_->weight(); }
  at::Tensor bias() const override { return inner_->bias(); }
  double mean() const { return count_ > 0 ? sum_ / count_ : 1.0; }

 private:
  std::shared_ptr<LinearLike> inner_;
  int64_t head_dim_;
  double sum_ = 0;
  int64_t count_ = 0;
};

// Per layer, the trained Llama's mean q and k head RMS over a TinyStories-like sentence.
absl::StatusOr<std::vector<std::pair<double, double>>> MeasureHeadRms(const std::string& llama_dir, int64_t head_dim) {
  auto lm = CausalLm::Open(llama_dir);
  if (!lm.ok()) return lm.status();
  auto tokenizer = Tokenizer::Open((fs::path(llama_dir) / "tokenizer.model").string());
  if (!tokenizer.ok()) return tokenizer.status();
  auto ids = (*tokenizer)->EncodeWithBos(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog. "
      "One day, she saw a big red ball under a tree. She ran to get it and said, \"Look, Mom! I found a ball!\"");
  if (!ids.ok()) return ids.status();
  std::vector<std::pair<std::shared_ptr<HeadRmsLinear>, std::shared_ptr<HeadRmsLinear>>> recorders;
  for (const auto& layer : (*lm)->layers()) {
    auto q = std::make_shared<HeadRmsLinear>(layer->FindLinear("self_attn.q_proj"), head_dim);
    auto k = std::make_shared<HeadRmsLinear>(layer->FindLinear("self_attn.k_proj"), head_dim);
    if (auto status = layer->ReplaceLinear("self_attn.q_proj", q); !status.ok()) return status;
    if (auto status = layer->ReplaceLinear("self_attn.k_proj", k); !status.ok()) return status;
    recorders.emplace_back(q, k);
  }
  auto logits = (*lm)->Forward(at::tensor(*ids, at::kLong).unsqueeze(0));
  if (!logits.ok()) return logits.status();
  std::vector<std::pair<double, double>> out;
  for (const auto& [q, k] : recorders) out.emplace_back(q->mean(), k->mean());
  return out;
}

}  // namespace

absl::Status WriteRandomDenseModel(const checkpoint::ModelConfig& config, const std::string& dir, uint64_t seed,
                                   double weight_std) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::map<std::string, at::Tensor> tensors;
  for (const auto& spec : checkpoint::ModelTensors(config)) {
    switch (spec.role) {
      case checkpoint::TensorRole::kNormWeight: tensors[spec.name] = 1 + at::normal(0.0, 0.1, spec.shape, generator); break;
      case checkpoint::TensorRole::kNormBias:
      case checkpoint::TensorRole::kLinearBias: tensors[spec.name] = at::normal(0.0, 0.02, spec.shape, generator); break;
      default: tensors[spec.name] = at::normal(0.0, weight_std, spec.shape, generator); break;
    }
  }
  return WriteFolder(config, dir, tensors);
}

absl::Status TransplantTinyLlama(const std::string& llama_dir, const std::string& model_type, const std::string& dir,
                                 bool repeat_kv_heads) {
  auto source_config = checkpoint::LoadModelConfig(llama_dir);
  if (!source_config.ok()) return source_config.status();
  auto reader = checkpoint::CheckpointReader::Open(llama_dir);
  if (!reader.ok()) return reader.status();
  const auto get = [&](const std::string& name) -> at::Tensor {
    auto ref = (*reader)->Get(name);
    if (!ref.ok()) throw std::runtime_error(std::string(ref.status().message()));
    return ViewTensor(*ref).value().to(at::kFloat).clone();
  };
  checkpoint::ModelConfig config = *source_config;
  const int64_t kv_repeats = repeat_kv_heads ? config.num_attention_heads / config.num_key_value_heads : 1;
  if (repeat_kv_heads) config.num_key_value_heads = config.num_attention_heads;
  // k_proj / v_proj rows [kv_heads * head_dim, hidden], each KV head's rows repeated once per query head it serves.
  const auto get_kv = [&](const std::string& name) -> at::Tensor {
    const at::Tensor w = get(name);
    const int64_t kv_heads = w.size(0) / config.head_dim;
    return w.view({kv_heads, 1, config.head_dim, -1})
        .expand({kv_heads, kv_repeats, config.head_dim, w.size(1)})
        .reshape({kv_heads * kv_repeats * config.head_dim, w.size(1)});
  };
  config.model_type = model_type;
  if (model_type == "phi3") {
    config.family = checkpoint::ArchFamily::kPhi3;
  } else if (model_type == "qwen3") {
    config.qk_norm = true;
  } else {
    return absl::InvalidArgumentError(StrCat("model_type \"", model_type, "\" is not qwen3 or phi3"));
  }
  if (repeat_kv_heads && model_type != "phi3") {
    return absl::InvalidArgumentError("repeat_kv_heads: only the phi3 transplant (its fused qkv_proj) repeats them");
  }
  auto generator = at::make_generator<at::CPUGeneratorImpl>(18);
  std::vector<std::pair<double, double>> rms;
  if (config.qk_norm) {
    auto measured = MeasureHeadRms(llama_dir, source_config->head_dim);
    if (!measured.ok()) return measured.status();
    rms = *std::move(measured);
  }
  std::map<std::string, at::Tensor> tensors;
  try {
    for (const auto& spec : checkpoint::ModelTensors(config)) {
      const std::string& name = spec.name;
      const auto replace = [&](const std::string& from, const std::string& to) {
        std::string s = name;
        s.replace(s.find(from), from.size(), to);
        return s;
      };
      if (name.find("qkv_proj.weight") != std::string::npos) {
        tensors[name] = at::cat({get(replace("qkv_proj", "q_proj")), get_kv(replace("qkv_proj", "k_proj")),
                                 get_kv(replace("qkv_proj", "v_proj"))}, 0);
      } else if (name.find("gate_up_proj.weight") != std::string::npos) {
        tensors[name] = at::cat({get(replace("gate_up_proj", "gate_proj")), get(replace("gate_up_proj", "up_proj"))}, 0);
      } else if (name.find("q_norm") != std::string::npos || name.find("k_norm") != std::string::npos) {
        // RMSNorm makes each head's q (k) unit-RMS; the Llama's heads are not. A weight equal to the heads' RMS as
        // the trained Llama computes them keeps its attention temperatures (a unit weight would not: the model
        // would then be far from trained).
        const int64_t layer = std::stoll(name.substr(std::string("model.layers.").size()));
        const bool is_q = name.find("q_norm") != std::string::npos;
        tensors[name] = (is_q ? rms[layer].first : rms[layer].second) * (1 + at::normal(0.0, 0.05, spec.shape, generator));
      } else {
        tensors[name] = get(name);
      }
    }
  } catch (const std::exception& error) {
    return absl::InternalError(error.what());
  }
  if (auto status = WriteFolder(config, dir, tensors); !status.ok()) return status;
  std::error_code ec;
  fs::copy_file(fs::path(llama_dir) / "tokenizer.model", fs::path(dir) / "tokenizer.model",
                fs::copy_options::overwrite_existing, ec);
  return ec ? absl::InternalError(StrCat("copying tokenizer.model: ", ec.message())) : absl::OkStatus();
}

}  // namespace quark::runtime::testing
