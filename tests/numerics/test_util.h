// Helpers shared by the numerics tests.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "core/config/quant_spec.h"

namespace quark::testing {

inline at::Tensor F32(const std::vector<float>& v) {
  return at::tensor(at::ArrayRef<float>(v), at::kFloat).clone();
}

inline std::vector<float> ToVector(const at::Tensor& t) {
  const at::Tensor f = t.to(at::kFloat).contiguous();
  return std::vector<float>(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
}

/// Bitwise equality of two tensors (NaNs with the same bits compare equal).
inline bool BitEqual(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor ca = a.contiguous();
  const at::Tensor cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

inline QuantSpec Spec(DType dtype, QScheme scheme = QScheme::kPerTensor, bool symmetric = true) {
  QuantSpec s;
  s.dtype = dtype;
  s.qscheme = scheme;
  s.symmetric = symmetric;
  return s;
}

/// Reproducible values with a spread of magnitudes and signs.
inline at::Tensor RandomTensor(std::vector<int64_t> shape, uint64_t seed, at::ScalarType dtype = at::kFloat) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return (at::randn(shape, gen, at::kFloat) * 3.0).to(dtype);
}

}  // namespace quark::testing
