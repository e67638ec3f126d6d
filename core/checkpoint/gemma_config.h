// Gemma 2 and Gemma 3 (text) config.json fields, as HF transformers' Gemma2Config / Gemma3TextConfig read them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/checkpoint/model_config.h"

namespace quark::checkpoint {

/// True for the Gemma model_type values this runtime builds ("gemma2", "gemma3_text").
bool IsGemmaModelType(const std::string& model_type);

/// The error for a model_type of the Gemma line that is not built here ("gemma": Gemma 1; "gemma3": the multimodal
/// Gemma3ForConditionalGeneration, whose text weights live under language_model.*), or OK when `model_type` is none.
absl::Status RefuseOtherGemma(const std::string& model_type, const std::string& label);

/// Fills the Gemma fields of `config` (family kGemma, sizes already parsed) from `root`: hidden_activation
/// (gelu_pytorch_tanh only), rms_norm_eps, rope_theta, rope_local_base_freq, query_pre_attn_scalar, the two
/// soft-caps, sliding_window and which layers use it (layer_types, else Gemma 2: even layers; Gemma 3: all but
/// every sliding_window_pattern-th), q/k norms (Gemma 3). Errors name the field: an unsupported activation, a
/// non-positive query_pre_attn_scalar or window, a layer_types list of the wrong length or with unknown entries,
/// untied embeddings, attention biases.
absl::Status ParseGemmaFields(const nlohmann::json& root, const std::string& label, ModelConfig& config);

/// Writes the Gemma fields above under their HF names (what `quark make-model` writes).
void WriteGemmaFields(const ModelConfig& config, nlohmann::json& root);

}  // namespace quark::checkpoint
