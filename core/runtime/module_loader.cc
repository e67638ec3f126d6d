#include "core/runtime/module_loader.h"

#include "core/base/strings.h"
#include "core/runtime/expert_streaming.h"

namespace quark::runtime {

absl::StatusOr<at::Tensor> LoadChecked(const WeightSource& weights, const std::string& name,
                                       const std::vector<int64_t>& shape, at::ScalarType dtype) {
  auto tensor = weights.Get(name, dtype);
  if (!tensor.ok()) return tensor.status();
  if (tensor->sizes() != at::IntArrayRef(shape)) {
    return absl::InvalidArgumentError(StrCat("tensor \"", name, "\" has shape [", StrJoin(tensor->sizes(), ", "),
                                             "] but config.json implies [", StrJoin(shape, ", "), "]"));
  }
  return tensor;
}

absl::StatusOr<std::shared_ptr<LinearLike>> LoadLinear(const WeightSource& weights, const std::string& prefix,
                                                       const checkpoint::LinearSpec& spec, at::ScalarType dtype) {
  if (spec.routed) {
    // #32 item 5: a routed expert of a model streamed with experts in groups loads when its expert is acquired.
    if (auto streaming = ExpertStreamingOf(weights)) {
      auto streamed = StreamedLinear::Create(std::move(streaming), prefix, spec, dtype);
      if (!streamed.ok()) return streamed.status();
      return std::shared_ptr<LinearLike>(*std::move(streamed));
    }
  }
  const std::string name = prefix + spec.relative_name;
  auto weight = LoadChecked(weights, name + ".weight", {spec.out_features, spec.in_features}, dtype);
  if (!weight.ok()) return weight.status();
  at::Tensor bias;
  if (spec.has_bias) {
    auto loaded = LoadChecked(weights, name + ".bias", {spec.out_features}, dtype);
    if (!loaded.ok()) return loaded.status();
    bias = *loaded;
  }
  return std::shared_ptr<LinearLike>(std::make_shared<FloatLinear>(*weight, bias));
}

absl::Status LoadLinears(const WeightSource& weights, const std::string& prefix,
                         const std::vector<checkpoint::LinearSpec>& specs, const std::vector<LinearSlot>& slots,
                         at::ScalarType dtype) {
  if (specs.size() != slots.size()) {
    return absl::InternalError(StrCat(prefix, ": the layout lists ", specs.size(), " linears, the layer builds ",
                                      slots.size()));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    auto linear = LoadLinear(weights, prefix, specs[i], dtype);
    if (!linear.ok()) return linear.status();
    *slots[i].member = *std::move(linear);
  }
  return absl::OkStatus();
}

}  // namespace quark::runtime
