#include "core/algorithms/moe_scaling.h"

#include <algorithm>
#include <set>

#include "core/base/strings.h"
#include "core/checkpoint/moe_layout.h"
#include "core/runtime/moe_layer.h"

namespace quark::algorithms {
namespace {

const runtime::MoeDecoderLayer* AsMoeLayer(const runtime::DecoderLayer& layer) {
  return dynamic_cast<const runtime::MoeDecoderLayer*>(&layer);
}

// The relative name under which the layer registered its MoE block.
std::string BlockName(const runtime::MoeDecoderLayer& layer) {
  for (const auto& child : layer.named_children()) {
    if (child.value().get() == layer.moe.get()) return child.key();
  }
  return "";
}

std::string RouterName(const std::string& block) { return block + ".gate"; }
std::string SharedGateName(const std::string& block) { return block + ".shared_expert_gate"; }

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::optional<MoeBlockReaders> MoeReadersOf(const runtime::DecoderLayer& layer, const std::string& prev_op) {
  const runtime::MoeDecoderLayer* moe = AsMoeLayer(layer);
  if (moe == nullptr || moe->moe == nullptr || prev_op != "post_attention_layernorm") return std::nullopt;
  MoeBlockReaders readers;
  readers.block = moe->moe.get();
  readers.block_name = BlockName(*moe);
  // The gate and up slots of every expert, matched by identity: the layer names them (w1/w3 or gate_proj/up_proj).
  std::vector<const std::shared_ptr<runtime::LinearLike>*> slots;
  if (moe->moe->shared_expert) {
    slots.push_back(&moe->moe->shared_expert->gate);
    slots.push_back(&moe->moe->shared_expert->up);
  }
  for (const auto& expert : moe->moe->experts) {
    slots.push_back(&expert->gate);
    slots.push_back(&expert->up);
  }
  const std::vector<runtime::NamedLinear> linears = layer.NamedLinears();
  for (const auto* slot : slots) {
    for (const auto& linear : linears) {
      if (linear.linear == *slot) readers.linears.push_back(linear.relative_name);
    }
  }
  readers.routers.push_back(RouterName(readers.block_name));
  if (moe->moe->shared_gate().defined()) readers.routers.push_back(SharedGateName(readers.block_name));
  return readers;
}

std::optional<MoeBlockReaders> MoeReadersOf(const checkpoint::ModelConfig& model, const std::string& prev_op) {
  if (model.family != checkpoint::ArchFamily::kMoe || prev_op != "post_attention_layernorm") return std::nullopt;
  MoeBlockReaders readers;
  readers.block_name = checkpoint::MoeBlockName(model);
  const std::string shared = checkpoint::MoeSharedExpertName(model);
  if (!shared.empty()) {
    readers.linears.push_back(shared + ".gate_proj");
    readers.linears.push_back(shared + ".up_proj");
  }
  const checkpoint::ExpertProjectionNames names = checkpoint::MoeExpertProjections(model);
  for (int64_t e = 0; e < model.num_experts; ++e) {
    const std::string expert = checkpoint::MoeExpertName(model, e) + ".";
    readers.linears.push_back(expert + names.gate);
    readers.linears.push_back(expert + names.up);
  }
  readers.routers.push_back(RouterName(readers.block_name));
  if (!shared.empty()) readers.routers.push_back(SharedGateName(readers.block_name));
  return readers;
}

runtime::MoeBlock* FindMoeBlock(const runtime::DecoderLayer& layer, const std::string& name) {
  const runtime::MoeDecoderLayer* moe = AsMoeLayer(layer);
  if (moe == nullptr || name.empty() || BlockName(*moe) != name) return nullptr;
  return moe->moe.get();
}

bool IsRouter(const runtime::DecoderLayer& layer, const std::string& name) { return RouterWeight(layer, name).ok(); }

absl::StatusOr<at::Tensor> RouterWeight(const runtime::DecoderLayer& layer, const std::string& name) {
  if (const runtime::MoeDecoderLayer* moe = AsMoeLayer(layer)) {
    const std::string block = BlockName(*moe);
    if (name == RouterName(block)) return moe->moe->router();
    if (name == SharedGateName(block) && moe->moe->shared_gate().defined()) return moe->moe->shared_gate();
  }
  return absl::InvalidArgumentError(StrCat(layer.prefix(), name, ": not a router of the layer"));
}

absl::Status SetRouterWeight(runtime::DecoderLayer& layer, const std::string& name, at::Tensor weight) {
  auto current = RouterWeight(layer, name);
  if (!current.ok()) return current.status();
  if (weight.sizes() != current->sizes()) {
    return absl::InvalidArgumentError(StrCat(layer.prefix(), name, ": router shape ", weight.sizes(), " instead of ",
                                             current->sizes()));
  }
  runtime::MoeBlock& block = *AsMoeLayer(layer)->moe;
  weight = weight.to(current->scalar_type()).contiguous();
  if (name == RouterName(BlockName(*AsMoeLayer(layer)))) {
    block.set_router(std::move(weight));
  } else {
    block.set_shared_gate(std::move(weight));
  }
  return absl::OkStatus();
}

std::map<std::string, at::Tensor> RouterTensors(const runtime::DecoderLayer& layer) {
  std::map<std::string, at::Tensor> out;
  const runtime::MoeDecoderLayer* moe = AsMoeLayer(layer);
  if (moe == nullptr || moe->moe == nullptr) return out;
  const std::string block = BlockName(*moe);
  out[RouterName(block) + ".weight"] = moe->moe->router();
  if (moe->moe->shared_gate().defined()) out[SharedGateName(block) + ".weight"] = moe->moe->shared_gate();
  return out;
}

absl::Status CheckMoePair(const MoeBlockReaders& readers, const ScalingLayer& pair, const std::string& path) {
  for (const std::string& linear : readers.linears) {
    if (!Contains(pair.layers, linear)) {
      return absl::InvalidArgumentError(
          StrCat(path, ".layers: leaves out \"", linear, "\", which reads ", pair.prev_op, " too (the input of ",
                 readers.block_name, "): dividing the norm without scaling it would change the layer; list every "
                 "expert's gate and up projection"));
    }
  }
  if (!pair.inp.empty() && pair.inp != readers.block_name) {
    return absl::InvalidArgumentError(
        StrCat(path, ".inp: \"", pair.inp, "\" sees only part of ", pair.prev_op, "'s tokens; a pair in front of ",
               readers.block_name, " takes its statistic over the block's input: write \"", readers.block_name,
               "\" or leave it empty"));
  }
  if (!pair.module2inspect.empty() && pair.module2inspect != readers.block_name) {
    return absl::InvalidArgumentError(StrCat(path, ".module2inspect: \"", pair.module2inspect,
                                             "\" is not the block the pair scales; write \"", readers.block_name,
                                             "\" or leave it empty"));
  }
  return absl::OkStatus();
}

ScalingLayer CompleteMoePair(const MoeBlockReaders& readers, ScalingLayer pair) {
  for (const std::string& router : readers.routers) {
    if (!Contains(pair.layers, router)) pair.layers.push_back(router);
  }
  if (pair.inp.empty()) pair.inp = readers.block_name;
  if (pair.module2inspect.empty()) pair.module2inspect = readers.block_name;
  return pair;
}

}  // namespace quark::algorithms
