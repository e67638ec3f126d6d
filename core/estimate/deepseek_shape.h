// The estimator's ModelShape of a config without a model folder (the 671B DeepSeek-V3 and the 109B Llama 4 Scout have
// no weights here): every tensor of the family's full checkpoint in `dtype`, the quantizable modules (embedding, each
// layer's linears, lm_head), the MoE counts the time model reads (num_experts / num_experts_per_tok for the k/E share
// of tokens an expert sees). DeepSeek's MTP layers count in the bytes (an export copies them) but not as a decoder
// layer: the engine never loads one.
#pragma once

#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/dtype.h"
#include "core/checkpoint/llama4_config.h"
#include "core/estimate/model_shape.h"

namespace quark::estimate {

ModelShape DeepseekModelShape(const checkpoint::DeepseekConfig& config, checkpoint::StDType dtype);

/// Llama 4 text (#32): checkpoint::Llama4ModelTensors; family kMoe for the time model (the dense layers' MLP counts
/// whole, the routed experts' linears by their k/E share).
ModelShape Llama4ModelShape(const checkpoint::Llama4Config& config, checkpoint::StDType dtype);

}  // namespace quark::estimate
