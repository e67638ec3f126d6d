#pragma once

#include <ATen/ATen.h>

namespace quark::quantize {

// Bitwise, not numeric, equality of two float tensors: -0.0 and 0.0 stay apart, so a weight restored from a spill or
// a grid equals the first run's bit for bit.
inline bool BitIdentical(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::ScalarType bits = a.element_size() == 4 ? at::kInt : at::kShort;
  return at::equal(a.contiguous().view(bits), b.contiguous().view(bits));
}

}  // namespace quark::quantize
