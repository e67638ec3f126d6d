#include "core/runtime/moe_layer.h"

#include "core/base/status_macros.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/moe_layout.h"
#include "core/runtime/module_loader.h"

namespace quark::runtime {
namespace {

// A plain holder for the experts, so that their children read "experts.3.w1" as in HF's ModuleList.
class ExpertList : public torch::nn::Module {};

}  // namespace

std::vector<ExpertCoverage> MoeDecoderLayer::FinishCalibration() {
  ExpertCoverage coverage = moe->FinishCoverage();
  coverage.block = block_name_;
  coverage.experts = expert_names_;
  return {std::move(coverage)};
}

absl::StatusOr<std::shared_ptr<MoeDecoderLayer>> MoeDecoderLayer::Load(const checkpoint::ModelConfig& config,
                                                                       int64_t index, const WeightSource& weights,
                                                                       at::ScalarType dtype) {
  const std::string prefix = checkpoint::LayerPrefix(config, index);
  std::shared_ptr<MoeDecoderLayer> layer(new MoeDecoderLayer(index, prefix));
  const std::string block = checkpoint::MoeBlockName(config);
  layer->block_name_ = prefix + block;

  auto created = NewLlamaAttention(config, index, prefix, weights, dtype);
  if (!created.ok()) return created.status();
  std::shared_ptr<LlamaAttention> attn = *std::move(created);

  auto router = LoadChecked(weights, prefix + block + ".gate.weight", {config.num_experts, config.hidden_size}, dtype);
  if (!router.ok()) return router.status();
  at::Tensor shared_gate;
  const std::string shared_name = checkpoint::MoeSharedExpertName(config);
  if (!shared_name.empty()) {
    auto gate = LoadChecked(weights, prefix + "mlp.shared_expert_gate.weight", {1, config.hidden_size}, dtype);
    if (!gate.ok()) return gate.status();
    shared_gate = *gate;
  }
  auto moe = std::make_shared<MoeBlock>(*router, config.num_experts_per_tok, config.norm_topk_prob, shared_gate);
  auto experts = std::make_shared<ExpertList>();
  for (int64_t e = 0; e < config.num_experts; ++e) {
    moe->experts.push_back(experts->register_module(std::to_string(e), std::make_shared<MoeExpert>()));
    layer->expert_names_.push_back(prefix + checkpoint::MoeExpertName(config, e));
  }
  moe->register_module("experts", experts);
  if (!shared_name.empty()) moe->shared_expert = moe->register_module("shared_expert", std::make_shared<MoeExpert>());

  // Each linear's slot and the module that owns it, in LayerLinears' order.
  std::vector<LinearSlot> slots = {{attn.get(), &attn->q_proj}, {attn.get(), &attn->k_proj},
                                   {attn.get(), &attn->v_proj}, {attn.get(), &attn->o_proj}};
  const auto add_expert = [&slots](MoeExpert& expert) {
    slots.push_back({&expert, &expert.gate});
    slots.push_back({&expert, &expert.up});
    slots.push_back({&expert, &expert.down});
  };
  if (moe->shared_expert) add_expert(*moe->shared_expert);
  for (auto& expert : moe->experts) add_expert(*expert);
  const auto specs = checkpoint::LayerLinears(config);
  QUARK_RETURN_IF_ERROR(LoadLinears(weights, prefix, specs, slots, dtype));

  auto norms = LoadPreNorms(config, prefix, weights, dtype);
  if (!norms.ok()) return norms.status();
  layer->input_layernorm = layer->register_module("input_layernorm", norms->input_layernorm);
  layer->self_attn = layer->register_module("self_attn", attn);
  layer->post_attention_layernorm = layer->register_module("post_attention_layernorm", norms->post_attention_layernorm);
  layer->moe = layer->register_module(block, moe);
  layer->AddLinears(specs, slots);
  return layer;
}

}  // namespace quark::runtime
