// GPTAQ's P (Gptaq.quantize: P = alpha * triu_1(dXX L) L^T, L the lower Cholesky factor of the inverse Hessian) on
// the blocks of its triangular factors that can hold a nonzero, in the cross statistic's own memory.
#pragma once

#include <ATen/ATen.h>

namespace quark::algorithms {

/// `cross` [K, K] float32 row-major (dXX, permuted as the weight) becomes P in its own memory, for L = upper^T with
/// `upper` [K, K] float32 the upper Cholesky factor of the inverse Hessian (zero below the diagonal, any strides).
/// Both products run on square blocks of kTriangularProductBlock (core/config/asymmetric_gptq_cost.h), multiplying
/// only the blocks where both factors can be nonzero: about a sixth of the flops of Quark's two full GEMMs
/// (GptaqPFlops) and no K x K temporary. The same sums up to their grouping; with K <= one block the two GEMMs are
/// Quark's calls on the same operands, bit for bit. Any device.
void GptaqPInPlace(at::Tensor& cross, const at::Tensor& upper, double alpha);

}  // namespace quark::algorithms
