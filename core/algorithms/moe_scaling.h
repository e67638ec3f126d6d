// The scaling pair in front of an MoE block (post_attention_layernorm -> the experts' gate/up): what reads the norm's
// output there, and the block's routers as readers a scale can be moved into.
//
// Dividing the norm's channels by s is exact only if every reader of its output takes s in its input columns: each
// expert's gate and up (the quantized linears), qwen2_moe's shared expert gate/up, and the routers, "<block>.gate"
// [E, hidden] and qwen2_moe's "mlp.shared_expert_gate" [1, hidden]. The routers are never quantized: they take s
// exactly, so routing is unchanged. A pair may list them (as HF and AutoAWQ name them) or leave them out (as Quark's
// MoE templates do): CompleteMoePair adds the ones it leaves out, so no pair ever changes routing. A pair that leaves a
// quantized reader out is refused (CheckMoePair).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/model_config.h"
#include "core/config/quant_spec.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/moe_block.h"

namespace quark::algorithms {

/// Everything that reads the output of the norm in front of a layer's MoE block.
struct MoeBlockReaders {
  runtime::MoeBlock* block = nullptr;
  std::string block_name;            // "mlp" (qwen) / "block_sparse_moe" (mixtral)
  std::vector<std::string> linears;  // relative names: the shared expert's gate, up, then each expert's gate, up
  std::vector<std::string> routers;  // "<block>.gate", then "mlp.shared_expert_gate" where there is one
};

/// The readers when `prev_op` is the norm whose output is the input of the layer's MoE block; nullopt for any other
/// prev_op and for layers without a block.
std::optional<MoeBlockReaders> MoeReadersOf(const runtime::DecoderLayer& layer, const std::string& prev_op);

/// The same from the model's config, before any layer is loaded (the job's up-front checks); `block` is null.
std::optional<MoeBlockReaders> MoeReadersOf(const checkpoint::ModelConfig& model, const std::string& prev_op);

/// The layer's MoE block when `name` is its relative name ("mlp", "block_sparse_moe"), else null.
runtime::MoeBlock* FindMoeBlock(const runtime::DecoderLayer& layer, const std::string& name);

/// True when `name` is a router of the layer ("mlp.gate", "block_sparse_moe.gate", "mlp.shared_expert_gate").
bool IsRouter(const runtime::DecoderLayer& layer, const std::string& name);

/// A router's weight [rows, hidden]; INVALID_ARGUMENT naming it when `name` is not a router of the layer.
absl::StatusOr<at::Tensor> RouterWeight(const runtime::DecoderLayer& layer, const std::string& name);
/// Replaces a router's weight (same shape); INVALID_ARGUMENT naming it otherwise.
absl::Status SetRouterWeight(runtime::DecoderLayer& layer, const std::string& name, at::Tensor weight);

/// The routers' tensors by relative HF name ("mlp.gate.weight", "mlp.shared_expert_gate.weight"): what LayerTensors
/// adds for an MoE layer, since a scaling pair in front of the block edits them.
std::map<std::string, at::Tensor> RouterTensors(const runtime::DecoderLayer& layer);

/// The checks of a pair in front of an MoE block, INVALID_ARGUMENT naming `path`'s field: every quantized reader
/// listed in `layers` (a left-out one would compute something else); `inp` empty or the block (the statistic is over
/// every token of the block's input, not the tokens routed to one expert); module2inspect empty or the block.
absl::Status CheckMoePair(const MoeBlockReaders& readers, const ScalingLayer& pair, const std::string& path);

/// `pair` with the routers it leaves out appended, and inp / module2inspect set to the block where empty.
ScalingLayer CompleteMoePair(const MoeBlockReaders& readers, ScalingLayer pair);

}  // namespace quark::algorithms
