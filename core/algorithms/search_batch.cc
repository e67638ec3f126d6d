#include "core/algorithms/search_batch.h"

#include <algorithm>
#include <utility>

#include "core/algorithms/moe_scaling.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/numerics/fake_quant.h"
#include "core/runtime/matmul_precision.h"

namespace quark::algorithms {

absl::StatusOr<at::Tensor> PseudoQuantizeWeight(const at::Tensor& w, const QuantSpec& spec, const WeightQdq& qdq) {
  if (qdq) return qdq(w);
  QUARK_ASSIGN_OR_RETURN(const QuantParams params, ParamsOf(w, spec, TensorRole::kWeight));
  return FakeQuantize(w, spec, params, TensorRole::kWeight);
}

bool RowLocalQuantization(const QuantSpec& spec, bool has_qdq) {
  if (has_qdq || spec.IsNvfp4() || spec.IsProgressive()) return false;
  // A weight's per-channel axis defaults to its rows (0), a group's to its columns (-1).
  if (spec.qscheme == QScheme::kPerChannel) return spec.ch_axis.value_or(0) == 0;
  if (spec.qscheme == QScheme::kPerGroup) {
    const int axis = spec.ch_axis.value_or(-1);
    return axis == -1 || axis == 1;
  }
  return false;
}

int TrialsPerBatch(int64_t batch_bytes, int64_t per_trial_bytes, int trials) {
  if (batch_bytes <= 0 || trials <= 1) return 1;
  const int64_t fit = per_trial_bytes > 0 ? batch_bytes / per_trial_bytes : trials;
  return static_cast<int>(std::clamp<int64_t>(fit, 1, trials));
}

StackedTrialLinear::StackedTrialLinear(at::Tensor weights, at::Tensor bias)
    : weights_(std::move(weights)), bias_(std::move(bias)) {}

at::Tensor StackedTrialLinear::forward(const at::Tensor& input) {
  const int64_t n = weights_.size(0), out = weights_.size(1), in = weights_.size(2);
  TORCH_CHECK(input.dim() >= 2 && input.size(0) == n && input.size(-1) == in, "StackedTrialLinear: input ",
              input.sizes(), " does not fit ", n, " trials of [", out, ", ", in, "]");
  // [n, R, in] x [n, in, out] (+ bias), in the dtype ComputeLinear would use. An input expanded over the trials
  // (stride 0 in dim 0) is read in place, not copied n times.
  const at::ScalarType compute = runtime::MatmulInFloat32(input) ? at::kFloat : input.scalar_type();
  at::Tensor x = input.reshape({n, -1, in});
  x = x.stride(0) == 0 ? x.select(0, 0).to(compute).unsqueeze(0).expand({n, -1, -1}) : x.to(compute);
  // The operands in the compute dtype, made once for the batch (a bf16 batch on a CPU without bf16 GEMMs is widened
  // for its first sample, not for every one).
  if (!weights_t_.defined() || weights_t_.scalar_type() != compute) {
    weights_t_ = weights_.to(compute).transpose(1, 2);
    if (bias_.defined()) bias_row_ = bias_.to(compute).view({1, 1, out});
  }
  at::Tensor y = bias_.defined() ? at::baddbmm(bias_row_.expand({n, x.size(1), out}), x, weights_t_)
                                 : at::bmm(x, weights_t_);
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes.back() = out;
  return y.to(input.scalar_type()).view(sizes);
}

StackedTrials::~StackedTrials() {
  for (auto& [name, linear] : originals_) (void)layer_.ReplaceLinear(name, linear);
}

absl::Status StackedTrials::Install(const std::string& relative_name, at::Tensor weights) {
  std::shared_ptr<runtime::LinearLike> original = layer_.FindLinear(relative_name);
  if (original == nullptr) {
    return absl::InvalidArgumentError(StrCat(layer_.prefix(), relative_name, ": not a linear of the layer"));
  }
  auto it = originals_.find(relative_name);
  if (it != originals_.end()) original = it->second;
  auto stacked = std::make_shared<StackedTrialLinear>(std::move(weights), original->bias());
  QUARK_RETURN_IF_ERROR(layer_.ReplaceLinear(relative_name, std::move(stacked)));
  originals_.emplace(relative_name, std::move(original));
  return absl::OkStatus();
}

bool BatchesTrials(const runtime::DecoderLayer& layer, const std::string& module,
                   const std::vector<std::string>& linears) {
  bool module_is_linear = false;
  for (const auto& name : linears) {
    if (std::dynamic_pointer_cast<runtime::FloatLinear>(layer.FindLinear(name)) == nullptr) return false;
    module_is_linear |= name == module;
  }
  if (module_is_linear) return true;
  return (module == "self_attn" || module == "mlp") && FindMoeBlock(layer, module) == nullptr;
}

int64_t SearchElementBytes(at::ScalarType dtype) {
  const int64_t size = static_cast<int64_t>(c10::elementSize(dtype));
  return size < 4 ? size + 4 : size;
}

int64_t GridTrialBytes(const runtime::DecoderLayer& layer, const std::string& module,
                       const std::vector<std::string>& linears, int64_t rows, int64_t heads, int64_t kv_heads,
                       int64_t element_bytes) {
  int64_t weights = 0, outputs = 0, reads = 0;
  for (const auto& name : linears) {
    if (auto linear = layer.FindLinear(name)) {
      weights += linear->out_features() * linear->in_features();
      outputs += linear->out_features();
      reads += linear->in_features();
    }
  }
  // The module's output: a linear's own rows, else the layer's hidden size (the width the pair's linears read).
  int64_t module_out = 0;
  if (auto linear = layer.FindLinear(module)) {
    module_out = linear->out_features();
  } else if (!linears.empty()) {
    if (auto first = layer.FindLinear(linears.front())) module_out = first->in_features();
  }
  int64_t bytes = (weights + rows * (4 * outputs + reads + 2 * module_out)) * element_bytes + rows * module_out * 8;
  if (module == "self_attn") {
    const int64_t rep = heads / std::max<int64_t>(1, kv_heads);
    bytes += rep * rows * rows * (8 + element_bytes);
  }
  return bytes;
}

int64_t ClipShrinkBytes(int64_t rows, int64_t in, int64_t groups, int64_t tokens, int64_t element_bytes) {
  return (2 * rows * in + groups * tokens * rows) * element_bytes;
}

}  // namespace quark::algorithms
