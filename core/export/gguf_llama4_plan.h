// Llama 4's GGUF tensors (gguf_llama4.h) from the config alone, without weights or LibTorch: what llama.cpp's llama4
// cannot express (refused naming the field), and every tensor's name, ggml shape and type in file order. The writer
// checks its file against this plan; the estimator (core/estimate/artifact_size.cc) sizes the artifact by it.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint/llama4_config.h"
#include "core/export/gguf_file.h"

namespace quark::exporter::gguf {

/// What llama.cpp's llama4 hard-codes (llama_model_llama4::load_arch_hparams): chunked attention with chunks of 8192
/// on three layers of four, NoPE every 4th layer (n_no_rope_layer_step), temperature tuning floor 8192 and scale 0.1,
/// and the L2 QK norm unless the model has 128 experts (Maverick).
inline constexpr int64_t kLlama4Chunk = 8192, kLlama4NoRopeStep = 4, kLlama4MaverickExperts = 128;
inline constexpr double kLlama4FloorScale = 8192, kLlama4AttnScale = 0.1;

/// llama.cpp's MoE layers are those with (i + 1) % interleave_moe_layer_step == 0: the step `config`'s moe_layers
/// follow, or 0 when they follow none.
int64_t Llama4MoeStep(const checkpoint::Llama4Config& config);

/// HF's names inside decoder layer `i` -> llama.cpp's, in file order, for the tensors taken as they are (the norms,
/// attention, the dense MLP or the shared expert, the router); the routed experts' stacks follow them.
std::vector<std::pair<std::string, std::string>> Llama4LayerGgufNames(const checkpoint::Llama4Config& config, int64_t i);

/// INVALID_ARGUMENT naming the config field when llama.cpp's llama4 cannot express `config` (gguf_llama4.h).
absl::Status CheckLlama4Gguf(const checkpoint::Llama4Config& config);

/// Every tensor of the llama4 GGUF of `config` with its float weights in `type` (F32 or Q8_0) and the routed experts of
/// the projections in `mxfp4_modules` in MXFP4 (offsets unset). INVALID_ARGUMENT for another type, CheckLlama4Gguf's
/// refusals and experts partly MXFP4 (naming the expert).
absl::StatusOr<std::vector<TensorInfo>> PlanLlama4Gguf(const checkpoint::Llama4Config& config, GgmlType type,
                                                      const std::set<std::string>& mxfp4_modules);

}  // namespace quark::exporter::gguf
