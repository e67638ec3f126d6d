#include "core/quantize/grid_weights.h"

#include <iterator>

#include "core/base/strings.h"
#include "core/numerics/real_quant.h"
#include "core/quantize/bit_identical.h"

namespace quark::quantize {
namespace {

constexpr std::string_view kWeightSuffix = ".weight";

// The module's weight spec, or nullptr when the plan leaves its weight unquantized.
const QuantSpec* WeightSpecOf(const LayerPlan& plan, const std::string& module) {
  const LayerAssignment* assignment = plan.Find(module);
  if (assignment == nullptr || !assignment->config.weight) return nullptr;
  return &*assignment->config.weight;
}

bool IsDequantizableDtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

}  // namespace

absl::StatusOr<std::optional<RealQuantized>> ExactGridCodes(const at::Tensor& weight, const QuantSpec& spec,
                                                            const QuantParams& params) {
  if (spec.IsMx() || !IsDequantizableDtype(weight.scalar_type())) return std::nullopt;
  auto real = QuantizeReal(weight, spec, params);
  if (!real.ok()) return real.status();
  auto back = Dequantize(*real, spec, weight.scalar_type());
  if (!back.ok()) return back.status();
  if (!BitIdentical(*back, weight)) return std::nullopt;
  return std::optional<RealQuantized>(*std::move(real));
}

absl::Status CompactGridWeights(const LayerPlan& plan, LayerCheckpointData& data) {
  for (auto it = data.tensors.begin(); it != data.tensors.end();) {
    const std::string& name = it->first;
    const at::Tensor& weight = it->second;
    const bool is_weight = name.size() > kWeightSuffix.size() &&
                           name.compare(name.size() - kWeightSuffix.size(), kWeightSuffix.size(), kWeightSuffix) == 0;
    const std::string module = is_weight ? name.substr(0, name.size() - kWeightSuffix.size()) : "";
    const QuantSpec* spec = is_weight ? WeightSpecOf(plan, module) : nullptr;
    const auto params = data.params.find(module);
    if (spec == nullptr || params == data.params.end() || !params->second.weight) {
      ++it;
      continue;
    }
    auto real = ExactGridCodes(weight, *spec, *params->second.weight);
    if (!real.ok()) return real.status();
    if (!real->has_value()) {
      ++it;
      continue;
    }
    data.grid_weights[name] = GridWeight{**std::move(real), weight.scalar_type()};
    it = data.tensors.erase(it);
  }
  return absl::OkStatus();
}

absl::Status ExpandGridWeights(const LayerPlan& plan, LayerCheckpointData& data) {
  for (auto& [name, grid] : data.grid_weights) {
    const std::string module = name.substr(0, name.size() - kWeightSuffix.size());
    const QuantSpec* spec = WeightSpecOf(plan, module);
    if (spec == nullptr) {
      return absl::DataLossError(StrCat("checkpoint: ", name, " is stored as codes but the config does not quantize ",
                                        module, "'s weight"));
    }
    auto weight = Dequantize(grid.real, *spec, grid.dtype);
    if (!weight.ok()) return absl::DataLossError(StrCat("checkpoint: ", name, ": ", std::string(weight.status().message())));
    data.tensors[name] = *std::move(weight);
  }
  data.grid_weights.clear();
  return absl::OkStatus();
}

}  // namespace quark::quantize
