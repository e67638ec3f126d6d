// The quantizable modules of an HF model folder, from config.json and safetensors headers only (no
// LibTorch, no weights read): what the gRPC server needs to validate a config against a model.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"

namespace quark::checkpoint {

/// The checkpoint's name for an HF tensor name: `name` itself, or without the "model." prefix (older OPT
/// checkpoints store "decoder.layers..."). Empty when neither is present.
std::string ResolveTensorName(const CheckpointReader& reader, const std::string& name);

/// Lists the modules of an opened model: the Embedding(s) then each layer's Linears then lm_head, with weight
/// shapes. Errors name the tensor: a weight missing from the checkpoint, or whose shape disagrees with config.json.
absl::StatusOr<std::vector<quark::ModuleInfo>> ListModules(const ModelConfig& config, const CheckpointReader& reader);

}  // namespace quark::checkpoint

namespace quark {

/// Opens `model_dir` (config.json + safetensors headers) and lists its quantizable modules.
absl::StatusOr<std::vector<ModuleInfo>> ListModelModules(const std::string& model_dir);

}  // namespace quark
