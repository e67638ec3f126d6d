// The estimator's ModelShape of a DeepSeek-V3 config without a model folder (the 671B shape has no weights here):
// every tensor of checkpoint::DeepseekModelTensors in `dtype`, the quantizable modules (embedding, each layer's
// linears, lm_head), the MoE counts the time model reads (num_experts / num_experts_per_tok for the k/E share of
// tokens an expert sees). The MTP layers' tensors count in the bytes (an export copies them) but not as a decoder
// layer: the engine never loads one.
#pragma once

#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/dtype.h"
#include "core/estimate/model_shape.h"

namespace quark::estimate {

ModelShape DeepseekModelShape(const checkpoint::DeepseekConfig& config, checkpoint::StDType dtype);

}  // namespace quark::estimate
