#include "core/numerics/quant_layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/config/e8m0_tiles.h"
#include "kernels/cpu/mx_kernels.h"
#include "kernels/cpu/nvfp4_kernels.h"

namespace quark {
namespace {

absl::Status Invalid(std::string_view field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", what));
}

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, at::IntArrayRef sizes) {
  const auto dim = static_cast<int64_t>(sizes.size());
  if (axis < -dim || axis >= dim || dim == 0) {
    return Invalid("ch_axis", absl::StrCat(axis, " is out of range for a tensor of shape ", ShapeString(sizes)));
  }
  return axis < 0 ? axis + dim : axis;
}

// Shape of x with `axis` moved last, minus the last dimension, plus `last`.
std::vector<int64_t> MovedShapeWithLast(at::IntArrayRef sizes, int64_t axis, int64_t last) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d != axis) shape.push_back(sizes[d]);
  }
  shape.push_back(last);
  return shape;
}

absl::StatusOr<QuantLayout> ResolveGroups(const QuantSpec& spec, at::IntArrayRef sizes) {
  QuantLayout layout;
  layout.granularity = Granularity::kPerGroup;
  auto axis = NormalizeAxis(spec.ch_axis.value_or(-1), sizes);
  if (!axis.ok()) return axis.status();
  layout.axis = *axis;
  const int64_t len = sizes[layout.axis];
  if (!spec.group_size) return Invalid("group_size", "required for per_group");
  int64_t g = *spec.group_size == -1 ? len : *spec.group_size;
  if (g <= 0) return Invalid("group_size", absl::StrCat(*spec.group_size, " must be positive or -1"));
  if (len % g != 0) {
    return Invalid("group_size", absl::StrCat(g, " does not divide ", len, " (axis ", layout.axis, " of ",
                                              ShapeString(sizes), ")"));
  }
  layout.group_size = g;
  layout.param_shape = MovedShapeWithLast(sizes, layout.axis, len / g);
  return layout;
}

absl::StatusOr<QuantLayout> ResolveMx(const QuantSpec& spec, at::IntArrayRef sizes) {
  QuantLayout layout;
  layout.granularity = Granularity::kMxBlock;
  auto axis = NormalizeAxis(spec.ch_axis.value_or(-1), sizes);
  if (!axis.ok()) return axis.status();
  layout.axis = *axis;
  if (spec.group_size && *spec.group_size != 32) {
    return Invalid("group_size", absl::StrCat(*spec.group_size, " is not the OCP MX block size 32"));
  }
  layout.group_size = kernels::kMxBlock;
  layout.param_shape = MovedShapeWithLast(sizes, layout.axis, kernels::MxBlocksPerRow(sizes[layout.axis]));
  return layout;
}

// NVFP4: groups of 16 along the last axis, which must divide (vLLM's QuarkNVFP4 and CT's W4A4 need K % 16 == 0).
absl::StatusOr<QuantLayout> ResolveNvfp4(const QuantSpec& spec, at::IntArrayRef sizes) {
  if (sizes.empty()) return Invalid("qscheme", "NVFP4 needs a tensor with at least one dimension");
  auto axis = NormalizeAxis(spec.ch_axis.value_or(-1), sizes);
  if (!axis.ok()) return axis.status();
  const auto last = static_cast<int64_t>(sizes.size()) - 1;
  if (*axis != last) return Invalid("ch_axis", absl::StrCat(*spec.ch_axis, " is not the last axis (NVFP4 groups run along it)"));
  if (sizes[last] % kernels::kNvfp4Group != 0) {
    return Invalid("group_size", absl::StrCat("NVFP4 needs the last dimension to be a multiple of 16 (K % 16 == 0): ",
                                              sizes[last], " is not (shape ", ShapeString(sizes), ")"));
  }
  QuantLayout layout;
  layout.granularity = Granularity::kPerGroup;
  layout.axis = last;
  layout.group_size = kernels::kNvfp4Group;
  layout.param_shape = MovedShapeWithLast(sizes, last, sizes[last] / kernels::kNvfp4Group);
  return layout;
}

// 2-D tiles of a weight; both dimensions must divide (vLLM's FP8 block loader needs it, so nothing is padded).
absl::StatusOr<QuantLayout> ResolveBlocks(const QuantSpec& spec, at::IntArrayRef sizes) {
  if (spec.block_size.size() != 2 || spec.block_size[0] <= 0 || spec.block_size[1] <= 0) {
    return Invalid("block_size", "per_block needs [rows, cols] of two positive integers");
  }
  if (sizes.size() != 2) return Invalid("qscheme", absl::StrCat("per_block needs a 2-D weight, got ", ShapeString(sizes)));
  const int64_t br = spec.block_size[0], bc = spec.block_size[1];
  if (sizes[0] % br != 0 || sizes[1] % bc != 0) {
    return Invalid("block_size", absl::StrCat("[", br, ", ", bc, "] does not tile the weight ", ShapeString(sizes),
                                              " (rule: out_features % ", br, " == 0 and in_features % ", bc, " == 0)"));
  }
  QuantLayout layout;
  layout.granularity = Granularity::kPerBlock;
  layout.block_rows = br;
  layout.group_size = bc;
  layout.param_shape = {sizes[0] / br, sizes[1] / bc};
  return layout;
}

absl::StatusOr<QuantLayout> ResolveChannels(const QuantSpec& spec, TensorRole role, at::IntArrayRef sizes) {
  QuantLayout layout;
  if (role == TensorRole::kActivation && spec.is_dynamic) {
    if (sizes.empty()) return Invalid("qscheme", "per token needs a tensor with at least one dimension");
    layout.granularity = Granularity::kPerToken;
    layout.axis = static_cast<int64_t>(sizes.size()) - 1;
    layout.param_shape = std::vector<int64_t>(sizes.begin(), sizes.end());
    layout.param_shape.back() = 1;
    return layout;
  }
  layout.granularity = Granularity::kPerChannel;
  auto axis = NormalizeAxis(spec.ch_axis.value_or(role == TensorRole::kWeight ? 0 : -1), sizes);
  if (!axis.ok()) return axis.status();
  layout.axis = *axis;
  layout.param_shape = {sizes[layout.axis]};
  return layout;
}

}  // namespace

std::string ShapeString(at::IntArrayRef sizes) { return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]"); }

bool QuantLayout::MovesAxisLast(int64_t dim) const {
  if (granularity == Granularity::kPerBlock) return true;
  return (granularity == Granularity::kPerGroup || granularity == Granularity::kMxBlock) && axis != dim - 1;
}

absl::Status ValidateSpecForNumerics(const QuantSpec& spec) {
  const DType el = spec.ElementType();
  if (spec.dtype == DType::kMx && !spec.mx_element_dtype) return Invalid("mx_element_dtype", "required for dtype mx");
  if (IsE8m0Tiles(spec) && spec.dtype != DType::kFp8E4M3) {  // #30
    return Invalid("dtype", absl::StrCat("E8M0 tiles (per_block, scale_format e8m0) are fp8_e4m3, got ",
                                         std::string(Name(spec.dtype))));
  }
  if (spec.IsMx() && !IsFloatFormat(el) && el != DType::kInt8) {
    return Invalid("mx_element_dtype", absl::StrCat(std::string(Name(el)), " is not an OCP MX element type"));
  }
  if (IsFloatFormat(el) && !spec.symmetric) {
    return Invalid("symmetric", absl::StrCat("false is not supported for ", std::string(Name(el))));
  }
  if (spec.scale_type == ScaleType::kPof2 && el != DType::kInt8 && el != DType::kUInt8) {
    return Invalid("scale_type", absl::StrCat("pof2 is supported for int8 and uint8 only, not ", std::string(Name(el))));
  }
  if (spec.zero_point_type == ZeroPointType::kFloat32 && (!IsIntegerType(el) || spec.symmetric || spec.IsMx())) {
    return Invalid("zero_point_type", "float32 needs an asymmetric integer dtype");
  }
  if (spec.IsNvfp4()) {
    if (spec.dtype != DType::kFp4) return Invalid("dtype", absl::StrCat(std::string(Name(spec.dtype)), " with scale_format e4m3 (NVFP4) must be fp4"));
    if (spec.qscheme != QScheme::kPerGroup) return Invalid("qscheme", "NVFP4 (scale_format e4m3) is per_group");
    if (spec.group_size && *spec.group_size != 16) {
      return Invalid("group_size", absl::StrCat(*spec.group_size, " is not NVFP4's group size 16"));
    }
    if (spec.observer != ObserverKind::kMinMax) return Invalid("observer", "NVFP4 (scale_format e4m3) uses min_max");
  }
  if (spec.IsProgressive() && (spec.dtype != DType::kInt4 || spec.qscheme != QScheme::kPerChannel || !spec.symmetric ||
                                spec.is_dynamic || spec.observer != ObserverKind::kMinMax)) {
    return Invalid("fp8_first_stage", "W4A8's fp8 first stage runs before static symmetric int4 per_channel min_max only");
  }
  const bool histogram = spec.observer == ObserverKind::kPercentile || spec.observer == ObserverKind::kMse;
  if (histogram && (spec.qscheme != QScheme::kPerTensor || spec.IsMx())) {
    return Invalid("observer", absl::StrCat(std::string(Name(spec.observer)), " supports per_tensor only, not ",
                                            spec.IsMx() ? std::string("mx") : std::string(Name(spec.qscheme))));
  }
  if (histogram && spec.is_dynamic) {
    return Invalid("observer", absl::StrCat(std::string(Name(spec.observer)), " needs static calibration (is_dynamic is true)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<QuantLayout> ResolveLayout(const QuantSpec& spec, TensorRole role, at::IntArrayRef sizes) {
  if (auto st = ValidateSpecForNumerics(spec); !st.ok()) return st;
  if (IsCastType(spec.dtype)) return QuantLayout{};
  if (IsE8m0Tiles(spec)) return ResolveBlocks(spec, sizes);  // #30: 2-D tiles, not MX's blocks of 32
  if (spec.IsMx()) return ResolveMx(spec, sizes);
  if (spec.IsNvfp4()) return ResolveNvfp4(spec, sizes);
  switch (spec.qscheme) {
    case QScheme::kPerTensor:
      return QuantLayout{};
    case QScheme::kPerChannel:
      return ResolveChannels(spec, role, sizes);
    case QScheme::kPerGroup:
      return ResolveGroups(spec, sizes);
    case QScheme::kPerBlock:
      return ResolveBlocks(spec, sizes);
  }
  return Invalid("qscheme", "unknown value");
}

at::Tensor KernelInput(const at::Tensor& x, const QuantLayout& layout) {
  if (layout.granularity == Granularity::kPerBlock) {
    return x.reshape({x.size(0) / layout.block_rows, layout.block_rows, x.size(1) / layout.group_size, layout.group_size})
        .permute({0, 2, 1, 3})
        .contiguous();
  }
  if (layout.MovesAxisLast(x.dim())) return x.movedim(layout.axis, -1).contiguous();
  return x.contiguous();
}

at::Tensor FromKernelLayout(const at::Tensor& y, const QuantLayout& layout, int64_t dim) {
  if (layout.granularity == Granularity::kPerBlock) {
    return y.permute({0, 2, 1, 3}).reshape({y.size(0) * y.size(2), y.size(1) * y.size(3)}).contiguous();
  }
  if (layout.MovesAxisLast(dim)) return y.movedim(-1, layout.axis).contiguous();
  return y;
}

kernels::ChannelLayout ChannelLayoutOf(const at::Tensor& kernel_input, const QuantLayout& layout) {
  const int64_t n = kernel_input.numel();
  switch (layout.granularity) {
    case Granularity::kPerTensor:
      return {1, 1, n};
    case Granularity::kPerChannel: {
      int64_t outer = 1;
      int64_t inner = 1;
      for (int64_t d = 0; d < layout.axis; ++d) outer *= kernel_input.size(d);
      for (int64_t d = layout.axis + 1; d < kernel_input.dim(); ++d) inner *= kernel_input.size(d);
      return {outer, kernel_input.size(layout.axis), inner};
    }
    case Granularity::kPerGroup:
      return {1, layout.group_size == 0 ? 0 : n / layout.group_size, layout.group_size};
    case Granularity::kPerToken: {
      const int64_t hidden = kernel_input.size(-1);
      return {1, hidden == 0 ? 0 : n / hidden, hidden};
    }
    case Granularity::kPerBlock:
      return {1, n / (layout.block_rows * layout.group_size), layout.block_rows * layout.group_size};
    case Granularity::kMxBlock:
      break;
  }
  return {1, 1, n};
}

}  // namespace quark
