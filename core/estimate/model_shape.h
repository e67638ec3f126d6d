// What the estimator needs to know about a model, read from config.json and the safetensors headers only (no
// weights are read, no LibTorch): every tensor's name, dtype, shape and bytes, the quantizable modules, and the
// size of the other files an export copies (tokenizer, generation config).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/dtype.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"

namespace quark::estimate {

struct TensorShape {
  std::string name;
  checkpoint::StDType dtype = checkpoint::StDType::kF32;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  int64_t layer = -1;  // the decoder layer ("...layers.N.") or -1 (embeddings, final norm, lm_head)
};

struct ModelShape {
  checkpoint::ModelConfig config;
  std::vector<TensorShape> tensors;
  std::vector<ModuleInfo> modules;   // as ListModelModules gives them
  checkpoint::StDType model_dtype = checkpoint::StDType::kF32;  // the dtype of most weight bytes
  uint64_t weight_bytes = 0;         // all tensor data
  uint64_t other_file_bytes = 0;     // files of the folder other than *.safetensors and the index
  int64_t num_layers = 0;
  /// Parameters of the largest decoder layer, and of all layers together.
  int64_t max_layer_params = 0;
  int64_t layer_params_total = 0;
  int64_t params_total = 0;
};

/// Reads `model_dir` (config.json + the safetensors headers). Errors name the file or tensor.
absl::StatusOr<ModelShape> ReadModelShape(const std::string& model_dir);

/// The decoder layer index in a tensor or module name ("model.layers.12.mlp.up_proj" -> 12), or -1.
int64_t LayerIndex(const std::string& name);

}  // namespace quark::estimate
