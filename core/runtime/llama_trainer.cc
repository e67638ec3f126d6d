#include "core/runtime/llama_trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/attention.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/tokenizer.h"

namespace quark::runtime {

namespace fs = std::filesystem;
using checkpoint::ModelConfig;

namespace {

// RMSNorm with a trainable weight; the runtime's RmsNorm (attention.h) computes the same in float32.
class TrainableRmsNorm : public torch::nn::Module {
 public:
  TrainableRmsNorm(int64_t hidden, double eps) : eps_(eps) { weight = register_parameter("weight", at::ones({hidden})); }
  at::Tensor forward(const at::Tensor& x) {
    return weight * (x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps_));
  }
  at::Tensor weight;

 private:
  double eps_;
};

// The per-length constants of a forward: causal mask [T, T] and RoPE tables [T, head_dim], as the runtime builds
// them (TransformerModel::Context).
struct SequenceConstants {
  at::Tensor mask, cos, sin;
};

class TrainableAttention : public torch::nn::Module {
 public:
  explicit TrainableAttention(const ModelConfig& c)
      : heads_(c.num_attention_heads), kv_heads_(c.num_key_value_heads), head_dim_(c.head_dim) {
    const auto linear = [](int64_t in, int64_t out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); };
    q_proj = register_module("q_proj", linear(c.hidden_size, heads_ * head_dim_));
    k_proj = register_module("k_proj", linear(c.hidden_size, kv_heads_ * head_dim_));
    v_proj = register_module("v_proj", linear(c.hidden_size, kv_heads_ * head_dim_));
    o_proj = register_module("o_proj", linear(heads_ * head_dim_, c.hidden_size));
  }
  // x [B, T, hidden] -> [B, T, hidden]
  at::Tensor forward(const at::Tensor& x, const SequenceConstants& k_const) {
    const int64_t batch = x.size(0), seq = x.size(1);
    at::Tensor q = q_proj->forward(x).view({batch, seq, heads_, head_dim_}).transpose(1, 2);  // [B, H, T, D]
    at::Tensor k = k_proj->forward(x).view({batch, seq, kv_heads_, head_dim_}).transpose(1, 2);
    at::Tensor v = v_proj->forward(x).view({batch, seq, kv_heads_, head_dim_}).transpose(1, 2);
    q = ApplyRope(q, k_const.cos, k_const.sin);
    k = ApplyRope(k, k_const.cos, k_const.sin);
    // Query head h reads KV head h / (H / KV), HF's repeat_kv.
    const int64_t rep = heads_ / kv_heads_;
    if (rep > 1) {
      k = k.repeat_interleave(rep, 1);
      v = v.repeat_interleave(rep, 1);
    }
    const at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(head_dim_))) + k_const.mask;
    const at::Tensor attended = at::matmul(at::softmax(scores, -1), v);  // [B, H, T, D]
    return o_proj->forward(attended.transpose(1, 2).reshape({batch, seq, heads_ * head_dim_}));
  }
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  int64_t heads_, kv_heads_, head_dim_;
};

class TrainableMlp : public torch::nn::Module {
 public:
  explicit TrainableMlp(const ModelConfig& c) {
    const auto linear = [](int64_t in, int64_t out) { return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)); };
    gate_proj = register_module("gate_proj", linear(c.hidden_size, c.intermediate_size));
    up_proj = register_module("up_proj", linear(c.hidden_size, c.intermediate_size));
    down_proj = register_module("down_proj", linear(c.intermediate_size, c.hidden_size));
  }
  at::Tensor forward(const at::Tensor& x) { return down_proj->forward(at::silu(gate_proj->forward(x)) * up_proj->forward(x)); }
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};

class TrainableDecoderLayer : public torch::nn::Module {
 public:
  explicit TrainableDecoderLayer(const ModelConfig& c) {
    input_layernorm = register_module("input_layernorm", std::make_shared<TrainableRmsNorm>(c.hidden_size, c.rms_norm_eps));
    self_attn = register_module("self_attn", std::make_shared<TrainableAttention>(c));
    post_attention_layernorm =
        register_module("post_attention_layernorm", std::make_shared<TrainableRmsNorm>(c.hidden_size, c.rms_norm_eps));
    mlp = register_module("mlp", std::make_shared<TrainableMlp>(c));
  }
  at::Tensor forward(const at::Tensor& x, const SequenceConstants& constants) {
    const at::Tensor h = x + self_attn->forward(input_layernorm->forward(x), constants);
    return h + mlp->forward(post_attention_layernorm->forward(h));
  }
  std::shared_ptr<TrainableRmsNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<TrainableAttention> self_attn;
  std::shared_ptr<TrainableMlp> mlp;
};

// HF's "model." prefix: embed_tokens, layers.{i}, norm.
class TrainableBody : public torch::nn::Module {
 public:
  explicit TrainableBody(const ModelConfig& c) {
    embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab_size, c.hidden_size));
    layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(std::make_shared<TrainableDecoderLayer>(c));
    norm = register_module("norm", std::make_shared<TrainableRmsNorm>(c.hidden_size, c.rms_norm_eps));
  }
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  std::shared_ptr<TrainableRmsNorm> norm;
};

double LearningRate(const LlamaTrainingOptions& options, int64_t step) {
  const int64_t warmup = std::max<int64_t>(1, options.steps / 20);
  if (step <= warmup) return options.lr * static_cast<double>(step) / static_cast<double>(warmup);
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, options.steps - warmup));
  return options.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * progress)));
}

absl::StatusOr<at::ScalarType> ParseSaveDtype(const std::string& dtype, checkpoint::StDType* st, std::string* torch_name) {
  if (dtype == "f32" || dtype == "float32") {
    *st = checkpoint::StDType::kF32;
    *torch_name = "float32";
    return at::kFloat;
  }
  if (dtype == "bf16" || dtype == "bfloat16") {
    *st = checkpoint::StDType::kBF16;
    *torch_name = "bfloat16";
    return at::kBFloat16;
  }
  if (dtype == "f16" || dtype == "float16") {
    *st = checkpoint::StDType::kF16;
    *torch_name = "float16";
    return at::kHalf;
  }
  return absl::InvalidArgumentError(StrCat("dtype \"", dtype, "\" is not one of f32, bf16, f16"));
}

absl::Status CheckIds(const std::vector<int64_t>& ids, int64_t vocab) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(StrCat("token id ", ids[i], " at position ", i, " is outside [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// The whole causal LM: "model." body plus lm_head when the embeddings are not tied.
class LlamaTrainableModel : public torch::nn::Module {
 public:
  explicit LlamaTrainableModel(const ModelConfig& c) : config_(c) {
    model = register_module("model", std::make_shared<TrainableBody>(c));
    if (!c.tie_word_embeddings) {
      lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(c.hidden_size, c.vocab_size).bias(false)));
    }
  }
  // ids [B, T] int64 -> logits [B, T, vocab] float32
  at::Tensor forward(const at::Tensor& ids) {
    const SequenceConstants& constants = Constants(ids.size(1));
    at::Tensor h = model->embed_tokens->forward(ids);
    for (const auto& layer : *model->layers) h = layer->as<TrainableDecoderLayer>()->forward(h, constants);
    h = model->norm->forward(h);
    return at::matmul(h, (lm_head ? lm_head->weight : model->embed_tokens->weight).t());
  }
  std::shared_ptr<TrainableBody> model;
  torch::nn::Linear lm_head{nullptr};

 private:
  const SequenceConstants& Constants(int64_t seq_len) {
    auto it = constants_.find(seq_len);
    if (it != constants_.end()) return it->second;
    SequenceConstants c;
    c.mask = CausalMask(seq_len);
    RopeTables(config_, seq_len, at::kFloat, &c.cos, &c.sin);
    return constants_.emplace(seq_len, std::move(c)).first->second;
  }
  ModelConfig config_;
  std::map<int64_t, SequenceConstants> constants_;
};

LlamaTrainer::LlamaTrainer(ModelConfig config, std::shared_ptr<LlamaTrainableModel> model)
    : config_(std::move(config)), model_(std::move(model)) {}
LlamaTrainer::~LlamaTrainer() = default;

absl::StatusOr<std::unique_ptr<LlamaTrainer>> LlamaTrainer::Create(const ModelConfig& config, uint64_t seed) {
  if (config.family != checkpoint::ArchFamily::kLlama) return absl::InvalidArgumentError("model_type: the trainer builds Llama-family models only");
  if (config.qk_norm) {
    return absl::InvalidArgumentError(StrCat("model_type: \"", config.model_type, "\" has q/k norms the trainer does not build"));
  }
  if (config.sliding_window > 0) return absl::InvalidArgumentError(StrCat("sliding_window: ", config.sliding_window, " is not trained (0 only)"));
  if (config.attention_bias || config.o_proj_bias || config.mlp_bias) {
    return absl::InvalidArgumentError("attention_bias / mlp_bias: the trainer builds bias-free Llama linears only");
  }
  if (config.hidden_act != "silu") return absl::InvalidArgumentError(StrCat("hidden_act: \"", config.hidden_act, "\" is not silu"));
  if (config.hidden_size <= 0 || config.num_hidden_layers <= 0 || config.num_attention_heads <= 0 ||
      config.num_key_value_heads <= 0 || config.num_attention_heads % config.num_key_value_heads != 0 ||
      config.head_dim <= 0 || config.head_dim % 2 != 0 || config.vocab_size <= 0 || config.intermediate_size <= 0) {
    return absl::InvalidArgumentError(StrCat("config: sizes hidden ", config.hidden_size, ", layers ", config.num_hidden_layers,
                                             ", heads ", config.num_attention_heads, "/", config.num_key_value_heads,
                                             ", head_dim ", config.head_dim, " cannot be trained"));
  }
  try {
    auto model = std::make_shared<LlamaTrainableModel>(config);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    const double residual_scale = 1.0 / std::sqrt(2.0 * static_cast<double>(config.num_hidden_layers));
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {
      const std::string& name = item.key();
      at::Tensor& p = item.value();
      if (p.dim() == 1) {
        p.fill_(1.0);  // norm weights
        continue;
      }
      p.normal_(0.0, 0.02, generator);
      if (name.find("o_proj") != std::string::npos || name.find("down_proj") != std::string::npos) p.mul_(residual_scale);
    }
    return std::unique_ptr<LlamaTrainer>(new LlamaTrainer(config, std::move(model)));
  } catch (const std::exception& error) {
    return TorchErrorToStatus(error, "building the trainable model");
  }
}

int64_t LlamaTrainer::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : model_->parameters()) n += p.numel();
  return n;
}

absl::Status LlamaTrainer::Train(const std::vector<int64_t>& ids, const LlamaTrainingOptions& options,
                                 const std::function<void(const TrainingProgress&)>& progress) {
  if (options.steps <= 0 || options.batch <= 0 || options.seq_len <= 0 || !(options.lr > 0)) {
    return absl::InvalidArgumentError(StrCat("steps ", options.steps, ", batch ", options.batch, ", seq_len ",
                                             options.seq_len, " and lr ", options.lr, " must be positive"));
  }
  if (config_.max_position_embeddings > 0 && options.seq_len > config_.max_position_embeddings) {
    return absl::InvalidArgumentError(StrCat("seq_len: ", options.seq_len, " is above max_position_embeddings ",
                                             config_.max_position_embeddings));
  }
  const int64_t tokens = static_cast<int64_t>(ids.size());
  if (tokens < options.seq_len + 1) {
    return absl::InvalidArgumentError(StrCat("the text has ", tokens, " tokens, fewer than seq_len + 1 = ", options.seq_len + 1));
  }
  if (auto status = CheckIds(ids, config_.vocab_size); !status.ok()) return status;
  try {
    std::vector<torch::optim::OptimizerParamGroup> groups;
    std::vector<at::Tensor> decayed, plain;
    for (const auto& p : model_->parameters()) (p.dim() >= 2 ? decayed : plain).push_back(p);
    auto decayed_options = std::make_unique<torch::optim::AdamWOptions>(options.lr);
    decayed_options->betas({0.9, 0.95}).weight_decay(options.weight_decay);
    auto plain_options = std::make_unique<torch::optim::AdamWOptions>(options.lr);
    plain_options->betas({0.9, 0.95}).weight_decay(0.0);
    groups.emplace_back(decayed, std::move(decayed_options));
    groups.emplace_back(plain, std::move(plain_options));
    torch::optim::AdamW optimizer(std::move(groups), torch::optim::AdamWOptions(options.lr));
    const at::Tensor all_ids = at::tensor(ids, at::kLong);
    std::mt19937_64 rng(options.seed);
    const uint64_t starts = static_cast<uint64_t>(tokens - options.seq_len);  // windows of seq_len + 1 tokens
    const auto begin = std::chrono::steady_clock::now();
    model_->train();
    for (int64_t step = 1; step <= options.steps; ++step) {
      const double lr = LearningRate(options, step);
      for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
      std::vector<at::Tensor> rows;
      for (int64_t b = 0; b < options.batch; ++b) {
        rows.push_back(all_ids.narrow(0, static_cast<int64_t>(rng() % starts), options.seq_len + 1));
      }
      const at::Tensor batch = at::stack(rows);  // [B, T + 1]
      const at::Tensor inputs = batch.narrow(1, 0, options.seq_len);
      const at::Tensor targets = batch.narrow(1, 1, options.seq_len);
      const at::Tensor logits = model_->forward(inputs);  // [B, T, vocab]
      const at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, config_.vocab_size}), targets.reshape({-1}));
      optimizer.zero_grad();
      loss.backward();
      if (options.max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(model_->parameters(), options.max_grad_norm);
      optimizer.step();
      if (progress) {
        TrainingProgress p;
        p.step = step;
        p.steps = options.steps;
        p.loss = loss.item<double>();
        p.lr = lr;
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        progress(p);
      }
    }
    model_->eval();
  } catch (const std::exception& error) {
    return TorchErrorToStatus(error, "training");
  }
  return absl::OkStatus();
}

absl::StatusOr<PerplexityResult> LlamaTrainer::Evaluate(const std::vector<int64_t>& ids, const PerplexityOptions& options) {
  if (options.seq_len < 0 || options.max_windows < 0) {
    return absl::InvalidArgumentError(StrCat("seq_len = ", options.seq_len, " and max_windows = ", options.max_windows,
                                             " must not be negative"));
  }
  if (ids.size() < 2) return absl::InvalidArgumentError(StrCat("perplexity needs at least 2 tokens, got ", ids.size()));
  if (config_.max_position_embeddings > 0 && options.seq_len > config_.max_position_embeddings) {
    return absl::InvalidArgumentError(StrCat("seq_len: ", options.seq_len, " is above the model's max_position_embeddings (",
                                             config_.max_position_embeddings, ")"));
  }
  if (auto status = CheckIds(ids, config_.vocab_size); !status.ok()) return status;
  PerplexityResult result;
  result.tokens = static_cast<int64_t>(ids.size());
  result.seq_len = options.seq_len > 0 ? options.seq_len : std::min<int64_t>(2048, config_.max_position_embeddings);
  try {
    torch::NoGradGuard no_grad;
    const at::Tensor all_ids = at::tensor(ids, at::kLong);
    for (const auto& [start, length] : PerplexityWindows(result.tokens, result.seq_len, options.max_windows)) {
      const at::Tensor window = all_ids.narrow(0, start, length).unsqueeze(0);  // [1, T]
      const at::Tensor logits = model_->forward(window).squeeze(0).narrow(0, 0, length - 1);  // [T - 1, vocab]
      const at::Tensor targets = window.squeeze(0).narrow(0, 1, length - 1);
      const at::Tensor nll = -at::log_softmax(logits.to(at::kDouble), -1).gather(-1, targets.unsqueeze(-1));
      result.window_nll.push_back(nll.mean().item<double>());
    }
  } catch (const std::exception& error) {
    return TorchErrorToStatus(error, "evaluating the trainable model");
  }
  double sum = 0;
  for (double w : result.window_nll) sum += w;
  result.windows = static_cast<int64_t>(result.window_nll.size());
  result.mean_nll = sum / static_cast<double>(result.windows);
  result.ppl = std::exp(result.mean_nll);
  return result;
}

absl::Status LlamaTrainer::Save(const std::string& out_dir, const std::string& dtype, const std::string& tokenizer_path,
                                uint64_t max_shard_bytes) const {
  if (out_dir.empty()) return absl::InvalidArgumentError("out_dir is empty");
  checkpoint::StDType st_dtype;
  ModelConfig config = config_;
  auto scalar = ParseSaveDtype(dtype, &st_dtype, &config.torch_dtype);
  if (!scalar.ok()) return scalar.status();
  const auto tensors = checkpoint::ModelTensors(config);
  std::map<std::string, at::Tensor> parameters;
  for (const auto& item : model_->named_parameters()) parameters.emplace(item.key(), item.value());
  std::vector<checkpoint::PlannedTensor> plan;
  for (const auto& t : tensors) {
    auto it = parameters.find(t.name);
    if (it == parameters.end() || it->second.sizes().vec() != t.shape) {
      return absl::InternalError(StrCat("the trainable model has no tensor ", t.name, " of the config's shape"));
    }
    plan.push_back({t.name, st_dtype, t.shape});
  }
  if (plan.size() != parameters.size()) {
    return absl::InternalError(StrCat("the trainable model has ", parameters.size(), " tensors, the layout ", plan.size()));
  }
  checkpoint::CheckpointWriterOptions writer_options;
  writer_options.max_shard_bytes = max_shard_bytes;
  auto writer = checkpoint::CheckpointWriter::Create(out_dir, std::move(plan), writer_options);
  if (!writer.ok()) return writer.status();
  try {
    for (const auto& t : tensors) {
      const at::Tensor data = parameters.at(t.name).detach().to(*scalar).contiguous();
      const std::string_view bytes(static_cast<const char*>(data.data_ptr()), data.numel() * data.element_size());
      if (auto status = (*writer)->Write(t.name, bytes); !status.ok()) return status;
    }
  } catch (const std::exception& error) {
    return TorchErrorToStatus(error, "converting the trained weights");
  }
  if (auto status = (*writer)->Finish(); !status.ok()) return status;
  if (!tokenizer_path.empty()) {
    std::error_code ec;
    fs::copy_file(tokenizer_path, fs::path(out_dir) / "tokenizer.model", fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(StrCat("cannot copy ", tokenizer_path, ": ", ec.message()));
  }
  std::ofstream out(fs::path(out_dir) / "config.json", std::ios::trunc);
  out << checkpoint::ModelConfigToJson(config);
  if (!out) return absl::InternalError(StrCat("cannot write ", out_dir, "/config.json"));
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> TrainedModelConfig(const TrainedModelOptions& options) {
  if (options.model.arch != "llama") {
    return absl::InvalidArgumentError(StrCat("arch: \"", options.model.arch, "\" cannot be trained (llama only)"));
  }
  auto config = SyntheticConfig(options.model.arch, options.model.shape, options.model.dtype);
  if (!config.ok()) return config.status();
  if (options.hidden_size < 0 || options.hidden_size % 32 != 0) {
    return absl::InvalidArgumentError(StrCat("hidden_size: ", options.hidden_size, " is not a positive multiple of 32"));
  }
  if (options.num_layers < 0) return absl::InvalidArgumentError(StrCat("layers: ", options.num_layers, " is negative"));
  if (options.hidden_size > 0) {
    config->hidden_size = options.hidden_size;
    config->head_dim = 32;
    config->num_attention_heads = options.hidden_size / 32;
    config->num_key_value_heads = config->num_attention_heads % 2 == 0 ? config->num_attention_heads / 2 : config->num_attention_heads;
    config->intermediate_size = (8 * options.hidden_size / 3 + 31) / 32 * 32;
  }
  if (options.num_layers > 0) config->num_hidden_layers = options.num_layers;
  return config;
}

absl::StatusOr<TrainedModelReport> MakeTrainedModel(const TrainedModelOptions& options,
                                                    const std::function<void(const TrainingProgress&)>& progress) {
  auto config = TrainedModelConfig(options);
  if (!config.ok()) return config.status();
  if (options.model.tokenizer_path.empty()) return absl::InvalidArgumentError("tokenizer: training needs a tokenizer.model");
  if (options.model.out_dir.empty()) return absl::InvalidArgumentError("out_dir is empty");
  auto tokenizer = Tokenizer::Open(options.model.tokenizer_path, config->bos_token_id, config->eos_token_id);
  if (!tokenizer.ok()) return tokenizer.status();
  if ((*tokenizer)->vocab_size() > config->vocab_size) {
    return absl::InvalidArgumentError(StrCat("tokenizer ", options.model.tokenizer_path, " has ", (*tokenizer)->vocab_size(),
                                             " pieces, more than the vocab_size ", config->vocab_size, " of shape ",
                                             options.model.shape));
  }
  auto text = ReadTextFile(options.text_path);
  if (!text.ok()) return text.status();
  auto ids = (*tokenizer)->EncodeWithBos(*text);
  if (!ids.ok()) return ids.status();
  auto trainer = LlamaTrainer::Create(*config, options.model.seed);
  if (!trainer.ok()) return trainer.status();
  LlamaTrainingOptions training = options.training;
  training.seed = options.model.seed;
  TrainedModelReport report;
  report.parameters = (*trainer)->parameter_count();
  report.text_tokens = static_cast<int64_t>(ids->size());
  const int64_t tail = std::max<int64_t>(1, training.steps / 10);
  double tail_sum = 0;
  const auto track = [&](const TrainingProgress& p) {
    if (p.step > p.steps - tail) tail_sum += p.loss;
    report.seconds = p.seconds;
    if (progress) progress(p);
  };
  if (auto status = (*trainer)->Train(*ids, training, track); !status.ok()) {
    return absl::Status(status.code(), StrCat("training on ", options.text_path, ": ", std::string(status.message())));
  }
  report.final_loss = tail_sum / static_cast<double>(tail);
  if (auto status = (*trainer)->Save(options.model.out_dir, options.model.dtype, options.model.tokenizer_path,
                                     options.model.max_shard_bytes);
      !status.ok()) {
    return status;
  }
  return report;
}

}  // namespace quark::runtime
