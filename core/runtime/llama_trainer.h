// Trains a small Llama in-process (LibTorch autograd, AdamW, causal-LM cross-entropy), so that the demo and the
// tests quantize a model that has learnt something instead of random weights.
//
// Why this is not the inference runtime (llama_layer.h, LayerStreamer): the runtime holds its weights as plain
// tensors (often read-only mmap views of the safetensors) and loads one decoder layer at a time, so no layer's
// weights exist while another runs; training needs every weight at once as an autograd leaf with its gradient and
// AdamW's moments. The forward here computes the same function as the runtime's Llama (RMSNorm in float32,
// rotate-half RoPE from the same RopeTables with the config's rope_theta and scaling, grouped KV heads, SiLU MLP,
// tied or untied head); llama_trainer_test.cc holds the two to 1e-4 in mean NLL on the saved checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/synthetic_model.h"

namespace quark::runtime {

struct LlamaTrainingOptions {
  int64_t steps = 200;
  /// Peak AdamW learning rate: linear warm-up over the first 5% of steps, then cosine decay to 10% of it.
  double lr = 3e-3;
  /// Tokens per training sample (each sample is a random window of seq_len + 1 tokens of the text).
  int64_t seq_len = 128;
  int64_t batch = 16;
  /// Decoupled weight decay on matrices and embeddings (norm weights are not decayed).
  double weight_decay = 0.1;
  /// Gradient clipping by global norm (0 = none).
  double max_grad_norm = 1.0;
  /// Seeds the sample windows (the weights are seeded at Create()).
  uint64_t seed = 0;
};

struct TrainingProgress {
  int64_t step = 0;   // 1-based, of `steps`
  int64_t steps = 0;
  double loss = 0;    // this step's batch loss (mean NLL, nats)
  double lr = 0;
  double seconds = 0; // since training began
};

class LlamaTrainableModel;

/// Not thread-safe; one trainer per thread.
class LlamaTrainer {
 public:
  /// A model of `config` (family Llama, no sliding window, float32 weights) with weights drawn from `seed`:
  /// linears and embeddings ~ N(0, 0.02^2), o_proj and down_proj scaled by 1/sqrt(2 * layers), norms 1.
  /// InvalidArgument naming the config field that the trainer cannot build.
  static absl::StatusOr<std::unique_ptr<LlamaTrainer>> Create(const checkpoint::ModelConfig& config, uint64_t seed);
  ~LlamaTrainer();

  /// Trains on `ids` (the tokenized text, BOS first). InvalidArgument naming the option when steps, batch, seq_len
  /// or lr is not positive, seq_len is above max_position_embeddings, or the text has fewer than seq_len + 1 tokens,
  /// or an id is outside the vocabulary. `progress` (optional) is called after every step.
  absl::Status Train(const std::vector<int64_t>& ids, const LlamaTrainingOptions& options,
                     const std::function<void(const TrainingProgress&)>& progress = {});

  /// Perplexity of `ids` by the runtime's protocol (perplexity.h: windows, max_windows, seq_len 0 = min(2048,
  /// max_position_embeddings)), computed by this module's own forward. `options.hooks` is ignored.
  absl::StatusOr<PerplexityResult> Evaluate(const std::vector<int64_t>& ids, const PerplexityOptions& options = {});

  /// Writes the HF folder the runtime reads: model.safetensors (sharded past max_shard_bytes) with the weights in
  /// `dtype` ("f32", "bf16" or "f16"), config.json (torch_dtype set to match), and `tokenizer_path` copied as
  /// tokenizer.model when not empty.
  absl::Status Save(const std::string& out_dir, const std::string& dtype, const std::string& tokenizer_path = "",
                    uint64_t max_shard_bytes = 5'000'000'000ull) const;

  const checkpoint::ModelConfig& config() const { return config_; }
  int64_t parameter_count() const;

 private:
  LlamaTrainer(checkpoint::ModelConfig config, std::shared_ptr<LlamaTrainableModel> model);
  checkpoint::ModelConfig config_;
  std::shared_ptr<LlamaTrainableModel> model_;
};

struct TrainedModelOptions {
  /// arch must be "llama"; tokenizer_path is required (it tokenizes the text and is copied beside the weights).
  SyntheticModelOptions model;
  /// The training text (UTF-8 file).
  std::string text_path;
  /// Overrides of the shape (0 = the shape's own): hidden_size (a multiple of 32; heads of 32 dims, half as many KV
  /// heads, intermediate size 8/3 * hidden rounded up to 32) and the number of decoder layers.
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  LlamaTrainingOptions training;
};

struct TrainedModelReport {
  int64_t parameters = 0;
  int64_t text_tokens = 0;   // BOS included
  double final_loss = 0;     // mean batch loss of the last 10% of steps
  double seconds = 0;
};

/// The config of `options` (shape, dtype and the overrides above). InvalidArgument naming the bad option.
absl::StatusOr<checkpoint::ModelConfig> TrainedModelConfig(const TrainedModelOptions& options);

/// Tokenizes the text, trains a model of TrainedModelConfig(options) seeded with options.model.seed (the sample
/// windows too), and writes the folder to options.model.out_dir. Errors name the option or path.
absl::StatusOr<TrainedModelReport> MakeTrainedModel(const TrainedModelOptions& options,
                                                    const std::function<void(const TrainingProgress&)>& progress = {});

}  // namespace quark::runtime
