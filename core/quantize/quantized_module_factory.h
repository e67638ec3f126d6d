// Which torch::nn modules ModelQuantizer replaces, and the quantized module for each: the one table that maps
// LibTorch's Impl types to Quark's module type names and to QuantLinear / QuantEmbedding / QuantEmbeddingBag /
// QuantConv2d / QuantConvTranspose2d.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include <string>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/quantize/module_quantizers.h"

namespace quark::quantize {

/// "Linear", "Embedding", "EmbeddingBag", "Conv2d" or "ConvTranspose2d" when `module` is exactly that torch::nn Impl
/// type (a subclass may have its own forward, so it is not matched, as in Quark); "" otherwise.
std::string QuantizableModuleType(const torch::nn::Module& module);

/// The weight of a module QuantizableModuleType recognizes (undefined otherwise).
at::Tensor QuantizableModuleWeight(const torch::nn::Module& module);

/// A quantized module, type-erased for its parent's forward, and its quantizers (owned by the module).
struct QuantizedModuleHandle {
  torch::nn::AnyModule module;
  ModuleQuantizers* quantizers = nullptr;
};

/// The float module itself, type-erased the same way (to put it back when a later replacement fails).
torch::nn::AnyModule AnyOfFloatModule(const std::shared_ptr<torch::nn::Module>& float_module);

/// The quantized copy of `float_module` (of QuantizableModuleType `type`) with `config`; `name` for messages.
/// Errors as the modules' Create (INVALID_ARGUMENT naming `<name>.<field>`).
absl::StatusOr<QuantizedModuleHandle> MakeQuantizedModule(const std::string& name, const std::string& type,
                                                          const LayerQuantConfig& config,
                                                          const torch::nn::Module& float_module);

}  // namespace quark::quantize
