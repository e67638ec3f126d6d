// What the Hessian-based algorithms' captures cost (GPTQ, GPTAQ, Qronos: core/algorithms/gptq_layer.h,
// asymmetric_layer.h): each input their quantized linears read is captured once a layer, by running the layer up to
// that input's first reader and stopping there. From the model's shapes alone (no LibTorch: quarkd's estimator).
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "core/checkpoint/model_config.h"

namespace quark::estimate {

/// GEMM FLOPs of one stream's captures over every decoder layer of `config`, `samples` x `seq_len` tokens: for each
/// input that a linear of `quantized` (full names) reads, the linears before its first reader (routed experts at their
/// top-k share) and, once the forward is past the attention (an input read after "self_attn"), its scores. The first
/// input (the attention's) costs no GEMM; a Llama layer's four add up to about 1.5 forwards. Routed experts are
/// captured a projection of all experts at a time, the forward going on through the block: one capture per routed
/// input kind (the experts' shared input, their act_fn), each charged every routed linear. `routed_recorded`: experts
/// streamed in groups record their inputs from one forward stopped at the routed block, and each expert runs alone on
/// its recorded calls for its act_fn input (its first projections: the routed linears reading the experts' input);
/// the recording passes themselves (the router over the tokens a group) the estimator charges beside this.
double CaptureFlops(const checkpoint::ModelConfig& config, int64_t num_layers, const std::set<std::string>& quantized,
                    int64_t samples, int64_t seq_len, bool routed_recorded);

}  // namespace quark::estimate
