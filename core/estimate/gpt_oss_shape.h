// The estimator's ModelShape of a gpt-oss config without a model folder (gpt-oss-120b has no weights here): every
// tensor of checkpoint::GptOssModelTensors in `dtype` with the fused experts split into each expert's gate_up_proj and
// down_proj linears (weight and bias), as the engine quantizes and an export writes them; the quantizable modules
// (embedding, attention and expert linears, lm_head); the MoE counts the time model reads (num_experts /
// num_experts_per_tok for the k/E share of tokens an expert sees). Router and sinks count as float tensors.
#pragma once

#include "core/checkpoint/dtype.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/estimate/model_shape.h"

namespace quark::estimate {

ModelShape GptOssModelShape(const checkpoint::GptOssConfig& config, checkpoint::StDType dtype);

}  // namespace quark::estimate
