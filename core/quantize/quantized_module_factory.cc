#include "core/quantize/quantized_module_factory.h"

#include <typeinfo>

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "core/base/strings.h"
#include "core/quantize/quant_conv.h"
#include "core/quantize/quant_embedding.h"
#include "core/quantize/quant_linear.h"

namespace quark::quantize {
namespace {

// AnyModule of a freshly created quantized module, or the creation error.
template <typename Quantized>
absl::StatusOr<QuantizedModuleHandle> Handle(absl::StatusOr<std::shared_ptr<Quantized>> created) {
  if (!created.ok()) return created.status();
  QuantizedModuleHandle handle;
  handle.quantizers = &(*created)->quantizers();
  handle.module = torch::nn::AnyModule(*std::move(created));
  return handle;
}

absl::StatusOr<std::shared_ptr<QuantLinear>> MakeLinear(const std::string& name, const LayerQuantConfig& config,
                                                        const torch::nn::LinearImpl& linear) {
  QuantLinearOptions options;
  options.name = name;
  options.config = config;
  options.weight = linear.weight.detach();
  if (linear.bias.defined()) options.bias = linear.bias.detach();
  return QuantLinear::Create(std::move(options));
}

}  // namespace

std::string QuantizableModuleType(const torch::nn::Module& module) {
  const std::type_info& type = typeid(module);
  if (type == typeid(torch::nn::LinearImpl)) return "Linear";
  if (type == typeid(torch::nn::EmbeddingImpl)) return "Embedding";
  if (type == typeid(torch::nn::EmbeddingBagImpl)) return "EmbeddingBag";
  if (type == typeid(torch::nn::Conv2dImpl)) return "Conv2d";
  if (type == typeid(torch::nn::ConvTranspose2dImpl)) return "ConvTranspose2d";
  return "";
}

at::Tensor QuantizableModuleWeight(const torch::nn::Module& module) {
  if (QuantizableModuleType(module).empty()) return at::Tensor();
  // Every recognized type registers its weight as the parameter "weight".
  const auto parameters = module.named_parameters(/*recurse=*/false);
  const at::Tensor* weight = parameters.find("weight");
  return weight == nullptr ? at::Tensor() : *weight;
}

torch::nn::AnyModule AnyOfFloatModule(const std::shared_ptr<torch::nn::Module>& float_module) {
  if (auto m = std::dynamic_pointer_cast<torch::nn::LinearImpl>(float_module)) return torch::nn::AnyModule(m);
  if (auto m = std::dynamic_pointer_cast<torch::nn::EmbeddingImpl>(float_module)) return torch::nn::AnyModule(m);
  if (auto m = std::dynamic_pointer_cast<torch::nn::EmbeddingBagImpl>(float_module)) return torch::nn::AnyModule(m);
  if (auto m = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(float_module)) return torch::nn::AnyModule(m);
  if (auto m = std::dynamic_pointer_cast<torch::nn::ConvTranspose2dImpl>(float_module)) return torch::nn::AnyModule(m);
  return torch::nn::AnyModule();
}

absl::StatusOr<QuantizedModuleHandle> MakeQuantizedModule(const std::string& name, const std::string& type,
                                                          const LayerQuantConfig& config,
                                                          const torch::nn::Module& float_module) {
  if (type == "Linear") return Handle(MakeLinear(name, config, dynamic_cast<const torch::nn::LinearImpl&>(float_module)));
  if (type == "Embedding") {
    return Handle(QuantEmbedding::Create(name, config, dynamic_cast<const torch::nn::EmbeddingImpl&>(float_module)));
  }
  if (type == "EmbeddingBag") {
    return Handle(QuantEmbeddingBag::Create(name, config, dynamic_cast<const torch::nn::EmbeddingBagImpl&>(float_module)));
  }
  if (type == "Conv2d") {
    return Handle(QuantConv2d::Create(name, config, dynamic_cast<const torch::nn::Conv2dImpl&>(float_module)));
  }
  if (type == "ConvTranspose2d") {
    return Handle(
        QuantConvTranspose2d::Create(name, config, dynamic_cast<const torch::nn::ConvTranspose2dImpl&>(float_module)));
  }
  return absl::InvalidArgumentError(StrCat(name, ": module type '", type, "' has no quantized module"));
}

}  // namespace quark::quantize
