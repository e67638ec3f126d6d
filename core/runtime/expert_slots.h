// The slots of a decoder layer's MLP and MoE linears by relative name, shared by the layers that build their MoE block
// by hand (DeepSeek-V3, Llama 4): each layer maps a LinearSpec's name to the module that owns the linear and the
// pointer it fills, then loads every spec of its layout into its slot.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include "core/runtime/linear.h"
#include "core/runtime/moe_block.h"

namespace quark::runtime {

/// relative name ("mlp.experts.3.up_proj") -> (owner module, the slot the loaded linear goes into).
using LinearSlots = std::map<std::string, std::pair<torch::nn::Module*, std::shared_ptr<LinearLike>*>>;

/// `base`.gate_proj / up_proj / down_proj of a SwiGLU owned by `owner`.
void AddSwigluSlots(LinearSlots& slots, const std::string& base, torch::nn::Module& owner, std::shared_ptr<LinearLike>* gate,
                    std::shared_ptr<LinearLike>* up, std::shared_ptr<LinearLike>* down);

/// The shared expert (`block`.`shared_name`) and every routed expert (`block`.experts.E) of `moe`.
void AddMoeSlots(LinearSlots& slots, const std::string& block, const std::string& shared_name, MoeBlock& moe);

/// Fills `moe` with `count` empty experts registered as its child "experts" (children "0", "1", ..., as HF's
/// ModuleList names them) and a shared expert registered as `shared_name`; returns the experts' full names
/// `name_prefix`.experts.E (what the calibration coverage reports).
std::vector<std::string> AddExperts(MoeBlock& moe, int64_t count, const std::string& shared_name, const std::string& name_prefix);

}  // namespace quark::runtime
