#include "core/runtime/online_hadamard_linear.h"

#include <cmath>

#include "core/base/strings.h"

namespace quark::runtime {

OnlineHadamardLinear::OnlineHadamardLinear(std::shared_ptr<LinearLike> inner, at::Tensor hadamard)
    : inner_(std::move(inner)), hadamard_(hadamard.to(at::kDouble).contiguous()) {
  TORCH_CHECK(hadamard_.dim() == 2 && hadamard_.size(0) == inner_->in_features() &&
                  hadamard_.size(1) == inner_->in_features(),
              "online Hadamard: the matrix is [", hadamard_.sizes(), "], the linear's input is ", inner_->in_features());
}

at::Tensor OnlineHadamardLinear::Transform(const at::Tensor& input) {
  if (!normalised_.defined() || normalised_.device() != input.device()) {
    // float64 division, then one rounding to float32: the matrix compressed-tensors' transform multiplies by.
    normalised_ = (hadamard_ / std::sqrt(static_cast<double>(hadamard_.size(0)))).to(input.device(), at::kFloat);
  }
  return at::matmul(input.to(at::kFloat), normalised_).to(input.scalar_type());
}

at::Tensor OnlineHadamardLinear::forward(const at::Tensor& input) { return inner_->forward(Transform(input)); }

namespace {

std::shared_ptr<OnlineHadamardLinear> WrapperAt(const DecoderLayer& layer, const std::string& relative_name) {
  for (const auto& item : layer.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (item.key() == relative_name) return std::dynamic_pointer_cast<OnlineHadamardLinear>(item.value());
  }
  return nullptr;
}

}  // namespace

absl::Status InstallOnlineHadamard(DecoderLayer& layer, const std::string& relative_name, const at::Tensor& hadamard) {
  const std::shared_ptr<LinearLike> inner = layer.FindLinear(relative_name);
  if (inner == nullptr) {
    return absl::InvalidArgumentError(StrCat(layer.prefix(), relative_name, ": no such linear for the online Hadamard"));
  }
  if (hadamard.dim() != 2 || hadamard.size(0) != inner->in_features() || hadamard.size(1) != inner->in_features()) {
    return absl::InvalidArgumentError(StrCat(layer.prefix(), relative_name, ": the online Hadamard is [",
                                             StrJoin(hadamard.sizes(), ", "), "], in_features is ",
                                             inner->in_features()));
  }
  if (const auto existing = WrapperAt(layer, relative_name)) {
    if (at::equal(existing->hadamard(), hadamard.to(at::kDouble))) return absl::OkStatus();
    return absl::FailedPreconditionError(StrCat(layer.prefix(), relative_name,
                                                ": already behind a different online Hadamard"));
  }
  return layer.ReplaceLinear(relative_name, std::make_shared<OnlineHadamardLinear>(inner, hadamard));
}

at::Tensor OnlineHadamardOf(const DecoderLayer& layer, const std::string& relative_name) {
  const auto wrapper = WrapperAt(layer, relative_name);
  return wrapper ? wrapper->hadamard() : at::Tensor();
}

}  // namespace quark::runtime
