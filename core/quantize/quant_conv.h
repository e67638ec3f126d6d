// Quantized replacements for torch::nn::Conv2d and torch::nn::ConvTranspose2d (Quark's QuantConv2d /
// QuantConvTranspose2d): input -> weight and bias -> output quantizers around the same convolution, with stride,
// padding (sizes, "valid", "same"), padding_mode, dilation, groups and output_padding read from the float module.
//
// Weight layouts, and what a per-channel spec's ch_axis means on them (the axis is used as given, as Quark does):
//   Conv2d           [out_channels, in_channels / groups, kh, kw]: ch_axis 0 = one scale per output channel;
//   ConvTranspose2d  [in_channels, out_channels / groups, kh, kw]: ch_axis 0 = per *input* channel, ch_axis 1 = per
//                    output channel (within a group). A per_channel spec without ch_axis uses 0 for both.
// per_group groups along ch_axis (default the last axis, kw) and needs a group size that divides that axis.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/quantize/module_quantizers.h"

namespace quark::quantize {

class QuantConv2d : public torch::nn::Module {
 public:
  /// A quantized copy of `float_module` (options, weight and bias; the float module is left as it was).
  /// INVALID_ARGUMENT naming `<name>.<field>` for a spec that does not fit the weight or bias.
  static absl::StatusOr<std::shared_ptr<QuantConv2d>> Create(const std::string& name, const LayerQuantConfig& config,
                                                             const torch::nn::Conv2dImpl& float_module);

  /// [N, in, H, W] (or [in, H, W]) -> [N, out, H', W'], as the float Conv2d.
  /// Throws std::runtime_error naming the module on a quantization error, c10::Error on a bad input shape.
  at::Tensor forward(const at::Tensor& input);

  ModuleQuantizers& quantizers() { return *q_; }
  const ModuleQuantizers& quantizers() const { return *q_; }
  /// "QuantConv2d(<name>, in, out, kernel_size=[kh, kw], stride=[..])".
  void pretty_print(std::ostream& stream) const override;

 private:
  QuantConv2d() = default;
  torch::nn::detail::ConvNdOptions<2> options_{0, 0, 1};
  std::vector<int64_t> reversed_padding_;  // F.pad order [w_left, w_right, h_top, h_bottom] for non-zeros modes
  std::string pad_mode_;                   // "" for padding_mode zeros, else at::pad's mode name
  std::unique_ptr<ModuleQuantizers> q_;
};

class QuantConvTranspose2d : public torch::nn::Module {
 public:
  /// As QuantConv2d::Create; INVALID_ARGUMENT for a padding_mode other than zeros (torch refuses it as well).
  static absl::StatusOr<std::shared_ptr<QuantConvTranspose2d>> Create(
      const std::string& name, const LayerQuantConfig& config, const torch::nn::ConvTranspose2dImpl& float_module);

  /// [N, in, H, W] (or [in, H, W]) -> [N, out, H', W'] with the module's output_padding (the float module's optional
  /// output_size argument is not offered: a Sequential calls forward(input) alone).
  at::Tensor forward(const at::Tensor& input);

  ModuleQuantizers& quantizers() { return *q_; }
  const ModuleQuantizers& quantizers() const { return *q_; }
  /// "QuantConvTranspose2d(<name>, in, out, kernel_size=[kh, kw], stride=[..])".
  void pretty_print(std::ostream& stream) const override;

 private:
  QuantConvTranspose2d() = default;
  torch::nn::detail::ConvNdOptions<2> options_{0, 0, 1};
  std::unique_ptr<ModuleQuantizers> q_;
};

}  // namespace quark::quantize
