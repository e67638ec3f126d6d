// How a QuantSpec's granularity maps onto a concrete tensor: which axis, which groups, and the shape of the
// scale / zero-point tensors (numerics.md, "Granularity").
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/numerics/tensor_role.h"
#include "kernels/cpu/channel_loops.h"

namespace quark {

enum class Granularity {
  kPerTensor,   // one scale, shape ()
  kPerChannel,  // one scale per index of `axis`, shape (sizes[axis])
  kPerGroup,    // `axis` moved last, groups of `group_size`; shape (moved sizes without the last..., len / group)
  kPerToken,    // dynamic activations: one scale per row of [-1, sizes.back()]; shape (sizes without last..., 1)
  kMxBlock,     // `axis` moved last, blocks of 32 (tail allowed); shape (moved sizes without last..., ceil(len/32))
  kPerBlock,    // 2-D tiles [block_rows, group_size] of a [rows, cols] tensor (both divide); shape (rows/br, cols/bc)
};

struct QuantLayout {
  Granularity granularity = Granularity::kPerTensor;
  int64_t axis = -1;        // normalized to [0, dim); -1 when unused
  int64_t group_size = 0;   // per_group: resolved (-1 = the whole axis); MX: 32; per_block: tile columns
  int64_t block_rows = 0;   // per_block: tile rows
  std::vector<int64_t> param_shape;

  /// Whether the kernels work on another arrangement of x: per_group and MX on a non-last axis (`axis` moved last),
  /// per_block (tiles made contiguous: [rows/br, cols/bc, br, bc]).
  bool MovesAxisLast(int64_t dim) const;
};

/// Checks the spec against the tensor's shape and resolves the axes; INVALID_ARGUMENT names the field and value
/// ("group_size: 100 does not divide 4096 (axis 1 of [11008, 4096])").
absl::StatusOr<QuantLayout> ResolveLayout(const QuantSpec& spec, TensorRole role, at::IntArrayRef sizes);

/// Checks the spec alone (dtype / scheme / observer combinations); the fields are named in the message.
absl::Status ValidateSpecForNumerics(const QuantSpec& spec);

/// x prepared for the kernels: contiguous, with the layout's axis moved last when MovesAxisLast().
at::Tensor KernelInput(const at::Tensor& x, const QuantLayout& layout);
/// Undoes KernelInput's move on a result of the kernel shape (no-op when nothing moved).
at::Tensor FromKernelLayout(const at::Tensor& y, const QuantLayout& layout, int64_t dim);
/// [outer, channels, inner] view of KernelInput(x) for the affine / float kernels (not MX).
kernels::ChannelLayout ChannelLayoutOf(const at::Tensor& kernel_input, const QuantLayout& layout);

/// "[4096, 11008]" for messages.
std::string ShapeString(at::IntArrayRef sizes);

}  // namespace quark
