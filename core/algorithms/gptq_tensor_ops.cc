#include "core/algorithms/gptq_tensor_ops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "core/algorithms/gptq_column_params.h"
#include "core/algorithms/gptq_columns.h"
#include "core/algorithms/gptq_damping.h"
#include "core/algorithms/gptq_fused_blocks.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/quant_layout.h"
#include "core/runtime/layer_streamer.h"

namespace quark::algorithms {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// L with L L^T = h (upper: U^T U = h); FAILED_PRECONDITION naming the leading minor when h is not positive definite
// (one host sync: the factorisation's info).
absl::StatusOr<at::Tensor> Cholesky(const at::Tensor& h, const char* what, bool upper = false) {
  auto [factor, info] = at::linalg_cholesky_ex(h, upper);
  const int64_t minor = info.item<int64_t>();
  if (minor != 0) return absl::FailedPreconditionError(StrCat(what, " is not positive definite (leading minor ", minor, ")"));
  return factor;
}

// The two steps of U^T U = h^-1. Quark's way: the lower factor of h, then cholesky_inverse and the upper factor of
// the inverse. The fast way (GptqOptions::fast_linalg) factors the reversed matrix and inverts that factor, as
// linalg.h describes: J h J = L L^T  =>  h^-1 = (J L^-T J)(J L^-1 J), and J L^-1 J is upper.
TwoStepFactorisation TensorOpSteps(bool fast) {
  return {[fast](at::Tensor& h) { return Cholesky(fast ? h.flip({0, 1}) : h, "Hessian"); },
          [fast](at::Tensor first) -> absl::StatusOr<at::Tensor> {
            if (fast) {
              const at::Tensor identity = at::eye(first.size(0), first.options());
              return at::linalg_solve_triangular(first, identity, /*upper=*/false).flip({0, 1});
            }
            return Cholesky(at::cholesky_inverse(first), "inverse Hessian", /*upper=*/true);
          }};
}

// work [N, K] float32 contiguous (columns in act order), quantized into q column by column; work is updated in place
// as Quark's W is. u [K, K] upper on work's device.
absl::Status QuantizeColumns(at::Tensor& work, at::Tensor& q, const at::Tensor& u, const GptqColumnPlan& plan,
                             ColumnParameters& parameters, at::ScalarType dtype, int64_t block_size) {
  const int64_t n = work.size(0), k = work.size(1);
  at::Tensor errors = at::empty({n, std::min(block_size, k)}, work.options());
  for (int64_t i1 = 0; i1 < k; i1 += block_size) {
    const int64_t i2 = std::min(i1 + block_size, k), count = i2 - i1;
    at::Tensor block = work.slice(1, i1, i2);  // a view: group observations see the block's updates (Quark)
    for (int64_t i = 0; i < count; ++i) {
      QUARK_ASSIGN_OR_RETURN(const QuantParams* params, parameters.For(i1 + i, work));
      const at::Tensor w = block.select(1, i);
      QUARK_ASSIGN_OR_RETURN(const at::Tensor quantized, QuantizeColumn(w, plan, *params, dtype));
      q.select(1, i1 + i).copy_(quantized);
      const at::Tensor h = u.select(0, i1 + i);  // Hinv[j, :]
      at::Tensor err = errors.select(1, i);
      at::div_out(err, w - quantized, h.select(0, i1 + i));
      // Each later column of the block: w_t -= err * Hinv[j, t], the product rounded before the subtraction.
      if (i + 1 < count) block.slice(1, i + 1).sub_(at::outer(err, h.slice(0, i1 + i + 1, i2)));
    }
    LazyUpdate(work, errors, u, i1, i2);  // every column after the block
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GptqFactor> GptqFactorByTensorOps(at::Tensor hessian, const GptqOptions& options) {
  if (!hessian.defined() || hessian.dim() != 2 || hessian.size(0) != hessian.size(1)) {
    return absl::InvalidArgumentError("hessian: expected a square [K, K] matrix");
  }
  try {
    const auto start = Clock::now();
    GptqFactor factor;
    QUARK_ASSIGN_OR_RETURN(at::Tensor h, WorkingHessian(std::move(hessian), factor.dead));
    if (options.act_order) {
      factor.perm = at::argsort(at::diag(h), /*dim=*/0, /*descending=*/true);
      h = h.index_select(0, factor.perm).index_select(1, factor.perm);
    }
    QUARK_ASSIGN_OR_RETURN(factor.upper,
                           DampedInverseFactor(h, options.damp_percent, TensorOpSteps(options.fast_linalg),
                                               factor.extra_damp));
    factor.seconds = SecondsSince(start);
    return factor;
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "gptq");
  }
}

absl::StatusOr<GptqResult> GptqQuantizeByTensorOps(const at::Tensor& weight, const GptqFactor& factor,
                                                   const QuantSpec& spec, const GptqOptions& options) {
  if (!weight.defined() || weight.dim() != 2) return absl::InvalidArgumentError("weight: expected [N, K]");
  if (!factor.upper.defined() || factor.upper.dim() != 2 || factor.upper.size(0) != weight.size(1)) {
    return absl::InvalidArgumentError(StrCat("hessian: expected [", weight.size(1), ", ", weight.size(1),
                                             "] for a weight ", ShapeString(weight.sizes())));
  }
  if (options.act_order != factor.perm.defined()) {
    return absl::InvalidArgumentError("desc_act: the factor was computed with another act order");
  }
  const at::ScalarType dtype = weight.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
    return absl::InvalidArgumentError("weight: expected float32, bfloat16 or float16");
  }
  QUARK_ASSIGN_OR_RETURN(const GptqColumnPlan plan, PlanGptqColumns(spec, weight.sizes(), options));
  try {
    const auto start = Clock::now();
    const at::Device device = weight.device();
    const at::Tensor u = factor.upper.to(device, at::kFloat);
    const at::Tensor dead = factor.dead.to(device);
    at::Tensor perm;
    std::vector<int64_t> host_perm;
    if (factor.perm.defined()) {
      perm = factor.perm.to(device);
      const at::Tensor on_host = factor.perm.to(at::kCPU, at::kLong).contiguous();
      host_perm.assign(on_host.data_ptr<int64_t>(), on_host.data_ptr<int64_t>() + on_host.numel());
    }
    at::Tensor w = weight.to(at::kFloat);
    const bool any_dead = dead.any().item<bool>();
    if (any_dead) w = w.masked_fill(dead.unsqueeze(0), 0);
    ColumnParameters parameters(spec, plan, options, dtype, std::move(host_perm));
    QUARK_RETURN_IF_ERROR(parameters.SetUp(w));
    at::Tensor work = perm.defined() ? w.index_select(1, perm) : w.clone(at::MemoryFormat::Contiguous);
    w = at::Tensor();
    at::Tensor q = at::empty_like(work);
    bool fused = false;
    if (options.fused_blocks) {
      QUARK_ASSIGN_OR_RETURN(fused, QuantizeColumnsInFusedBlocks(work, q, u, spec, plan, parameters, dtype,
                                                                 options.block_size));
    }
    if (!fused) QUARK_RETURN_IF_ERROR(QuantizeColumns(work, q, u, plan, parameters, dtype, options.block_size));
    work = at::Tensor();
    if (perm.defined()) q = q.index_select(1, at::argsort(perm));
    GptqResult result;
    result.weight = q.to(dtype);
    result.params = parameters.Whole();
    result.extra_damp = factor.extra_damp;
    result.factor_seconds = factor.seconds;
    result.columns_seconds = SecondsSince(start);
    result.fused_blocks = fused;
    return result;
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "gptq");
  }
}

}  // namespace quark::algorithms
