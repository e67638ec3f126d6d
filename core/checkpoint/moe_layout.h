// HF tensor and module names of the Mixture-of-Experts architectures (mixtral, qwen2_moe, qwen3_moe):
//   mixtral:   block_sparse_moe.gate (router [E, hidden]), block_sparse_moe.experts.E.{w1 (gate), w3 (up), w2 (down)}
//   qwen*_moe: mlp.gate (router), mlp.experts.E.{gate,up,down}_proj; qwen2_moe also mlp.shared_expert.{gate,up,down}_proj
//              and mlp.shared_expert_gate ([1, hidden], a sigmoid gate on the shared expert's output).
// The routers are not linears of the layer: they are never quantized (vLLM builds them unquantized), so they are
// plain tensors of the checkpoint (MoeRouterTensors) and the exports copy them in float.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/model_layout.h"

namespace quark::checkpoint {

/// "block_sparse_moe" (mixtral) or "mlp" (qwen).
std::string MoeBlockName(const ModelConfig& config);
/// The relative module name of expert `expert`: "block_sparse_moe.experts.3" / "mlp.experts.3".
std::string MoeExpertName(const ModelConfig& config, int64_t expert);
/// "mlp.shared_expert" (qwen2_moe); empty when the model has no shared expert.
std::string MoeSharedExpertName(const ModelConfig& config);

/// One expert's projections as the checkpoint names them, in forward order: gate, up, down
/// (mixtral: "w1", "w3", "w2"; qwen: "gate_proj", "up_proj", "down_proj").
struct ExpertProjectionNames {
  std::string gate, up, down;
};
ExpertProjectionNames MoeExpertProjections(const ModelConfig& config);

/// The MLP part of LayerLinears for an MoE layer: the shared expert's gate/up/down first (it reads the whole
/// post-attention hidden state), then each expert's gate, up, down. An expert's gate/up read the tokens routed to it
/// (input "<expert name>", distinct per expert, and LinearSpec::routed set), its down that expert's activation
/// ("<expert name>.act_fn").
std::vector<LinearSpec> MoeMlpLinears(const ModelConfig& config);

/// The routers of layer `layer` with full names: "<block>.gate.weight" [E, hidden] and, for qwen2_moe,
/// "mlp.shared_expert_gate.weight" [1, hidden].
std::vector<TensorSpec> MoeRouterTensors(const ModelConfig& config, int64_t layer);

}  // namespace quark::checkpoint
