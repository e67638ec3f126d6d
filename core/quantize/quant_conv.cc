#include "core/quantize/quant_conv.h"

#include <ostream>
#include <variant>

#include "core/base/strings.h"

namespace quark::quantize {
namespace {

// LibTorch's nn options hold a c10::variant up to 2.1 and a std::variant from 2.2 on (the GPU build uses 2.x):
// unqualified calls find std's overloads through the using-declarations and c10's by argument-dependent lookup,
// so these compile against both.
template <typename T, typename Variant>
const T* AlternativeIf(const Variant& v) {
  using std::get_if;
  return get_if<T>(&v);
}

template <typename T, typename Variant>
const T& Alternative(const Variant& v) {
  using std::get;
  return get<T>(v);
}

absl::StatusOr<std::unique_ptr<ModuleQuantizers>> ConvQuantizers(const std::string& name, const LayerQuantConfig& config,
                                                                 const at::Tensor& weight, const at::Tensor& bias) {
  ModuleQuantizersOptions options;
  options.name = name;
  options.config = config;
  options.weight = weight.detach();
  if (bias.defined()) options.bias = bias.detach();
  return ModuleQuantizers::Create(std::move(options));
}

// at::pad's name of a non-zeros padding mode; "" for zeros.
std::string PadModeName(const torch::nn::detail::conv_padding_mode_t& mode) {
  if (AlternativeIf<torch::enumtype::kReflect>(mode)) return "reflect";
  if (AlternativeIf<torch::enumtype::kReplicate>(mode)) return "replicate";
  if (AlternativeIf<torch::enumtype::kCircular>(mode)) return "circular";
  return "";
}

// The padding Conv2dImpl applies with F.pad for a non-zeros padding_mode (its _reversed_padding_repeated_twice,
// computed the same way: "valid" pads nothing, "same" pads dilation * (k - 1) split left/right per axis).
std::vector<int64_t> ReversedPadding(const torch::nn::detail::ConvNdOptions<2>& o) {
  std::vector<int64_t> pad(4, 0);
  if (AlternativeIf<torch::enumtype::kValid>(o.padding())) return pad;
  if (AlternativeIf<torch::enumtype::kSame>(o.padding())) {
    for (int i = 0; i < 2; ++i) {
      const int64_t total = (*o.dilation())[i] * ((*o.kernel_size())[i] - 1);
      pad[2 * i] = total / 2;
      pad[2 * i + 1] = total - total / 2;
    }
    return pad;
  }
  const auto& p = Alternative<torch::ExpandingArray<2>>(o.padding());
  return {(*p)[1], (*p)[1], (*p)[0], (*p)[0]};
}

void PrintConv(std::ostream& stream, const char* type, const std::string& name,
               const torch::nn::detail::ConvNdOptions<2>& o) {
  stream << type << "(" << name << ", " << o.in_channels() << ", " << o.out_channels()
         << ", kernel_size=" << o.kernel_size() << ", stride=" << o.stride() << ")";
}

}  // namespace

absl::StatusOr<std::shared_ptr<QuantConv2d>> QuantConv2d::Create(const std::string& name, const LayerQuantConfig& config,
                                                                 const torch::nn::Conv2dImpl& float_module) {
  auto q = ConvQuantizers(name, config, float_module.weight, float_module.bias);
  if (!q.ok()) return q.status();
  std::shared_ptr<QuantConv2d> module(new QuantConv2d());
  module->options_ = float_module.options;
  module->pad_mode_ = PadModeName(float_module.options.padding_mode());
  if (!module->pad_mode_.empty()) module->reversed_padding_ = ReversedPadding(float_module.options);
  module->q_ = *std::move(q);
  return module;
}

at::Tensor QuantConv2d::forward(const at::Tensor& input) {
  const at::Tensor x = q_->Input(input);
  const at::Tensor w = q_->Weight(x.scalar_type());
  const at::Tensor b = q_->Bias(x.scalar_type());
  const auto& o = options_;
  at::Tensor y;
  if (!pad_mode_.empty()) {
    // As Conv2dImpl: pad in the padding mode first, then convolve without padding.
    const std::vector<int64_t> no_padding = {0, 0};
    y = at::conv2d(at::pad(x, reversed_padding_, pad_mode_), w, b, *o.stride(), no_padding, *o.dilation(), o.groups());
  } else if (const auto* sizes = AlternativeIf<torch::ExpandingArray<2>>(o.padding())) {
    y = at::conv2d(x, w, b, *o.stride(), **sizes, *o.dilation(), o.groups());
  } else {
    const bool valid = AlternativeIf<torch::enumtype::kValid>(o.padding()) != nullptr;
    y = at::conv2d(x, w, b, *o.stride(), valid ? "valid" : "same", *o.dilation(), o.groups());
  }
  return q_->Output(y);
}

void QuantConv2d::pretty_print(std::ostream& stream) const { PrintConv(stream, "QuantConv2d", q_->name(), options_); }

absl::StatusOr<std::shared_ptr<QuantConvTranspose2d>> QuantConvTranspose2d::Create(
    const std::string& name, const LayerQuantConfig& config, const torch::nn::ConvTranspose2dImpl& float_module) {
  if (!PadModeName(float_module.options.padding_mode()).empty()) {
    return absl::InvalidArgumentError(StrCat(name, ".padding_mode: ConvTranspose2d supports zeros only"));
  }
  if (!AlternativeIf<torch::ExpandingArray<2>>(float_module.options.padding())) {
    return absl::InvalidArgumentError(StrCat(name, ".padding: ConvTranspose2d takes explicit padding sizes"));
  }
  auto q = ConvQuantizers(name, config, float_module.weight, float_module.bias);
  if (!q.ok()) return q.status();
  std::shared_ptr<QuantConvTranspose2d> module(new QuantConvTranspose2d());
  module->options_ = float_module.options;
  module->q_ = *std::move(q);
  return module;
}

at::Tensor QuantConvTranspose2d::forward(const at::Tensor& input) {
  const at::Tensor x = q_->Input(input);
  const auto& o = options_;
  const auto& padding = Alternative<torch::ExpandingArray<2>>(o.padding());
  at::Tensor y = at::conv_transpose2d(x, q_->Weight(x.scalar_type()), q_->Bias(x.scalar_type()), *o.stride(), *padding,
                                      *o.output_padding(), o.groups(), *o.dilation());
  return q_->Output(y);
}

void QuantConvTranspose2d::pretty_print(std::ostream& stream) const {
  PrintConv(stream, "QuantConvTranspose2d", q_->name(), options_);
}

}  // namespace quark::quantize
