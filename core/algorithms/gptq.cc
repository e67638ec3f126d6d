#include "core/algorithms/gptq.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "core/algorithms/linalg.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/quant_layout.h"
#include "core/runtime/layer_streamer.h"

namespace quark::algorithms {
namespace {

// The longest block whose lazy update one fused GEMM (C - A B) rounds as Quark's matmul-then-subtract: OpenBLAS
// sums a shared dimension up to its kernel depth (>= 256 for single precision) in one pass.
constexpr int64_t kFusedUpdateMaxBlock = 256;
// Quark retries the Cholesky factorisation five times, ten times more damping each time.
constexpr int kCholeskyRetries = 5;

class GptqRun {
 public:
  GptqRun(const QuantSpec& spec, const GptqOptions& options, at::ScalarType dtype)
      : spec_(spec), column_spec_(spec), options_(options), dtype_(dtype) {}

  absl::StatusOr<GptqResult> Run(at::Tensor w, at::Tensor h);

 private:
  absl::Status ResolveGranularity(at::IntArrayRef sizes);
  absl::Status SetUpParams(const at::Tensor& w);
  absl::StatusOr<at::Tensor> InverseHessianFactor(at::Tensor h, double& extra_damp) const;
  absl::StatusOr<const QuantParams*> ParamsForColumn(int64_t column, const at::Tensor& wt);
  absl::StatusOr<QuantParams> ParamsOfColumns(const at::Tensor& columns) const;  // [N, c] float32
  absl::StatusOr<at::Tensor> QuantizeColumn(const at::Tensor& column, const QuantParams& params) const;
  absl::Status QuantizeColumns(at::Tensor& wt, const at::Tensor& u, at::Tensor& qt);
  QuantParams WholeParams() const;

  QuantSpec spec_;
  QuantSpec column_spec_;  // the spec applied to one [N, 1] column with that column's parameters
  GptqOptions options_;
  at::ScalarType dtype_;
  bool grouped_ = false;    // per_group or MX: parameters per group of input columns
  int64_t group_size_ = 0;  // grouped only
  std::vector<QuantParams> params_;  // one per group in column order (grouped), else one for the whole weight
  std::vector<int64_t> perm_;        // act order: permuted position -> original column
};

absl::Status GptqRun::ResolveGranularity(at::IntArrayRef sizes) {
  if (spec_.is_dynamic) return absl::InvalidArgumentError("weight.is_dynamic: GPTQ needs a static weight spec");
  if (IsCastType(spec_.dtype)) {
    return absl::InvalidArgumentError(StrCat("weight.dtype: ", Name(spec_.dtype), " is a cast, nothing to round"));
  }
  QUARK_ASSIGN_OR_RETURN(const QuantLayout layout, ResolveLayout(spec_, TensorRole::kWeight, sizes));
  switch (layout.granularity) {
    case Granularity::kPerTensor: return absl::OkStatus();
    case Granularity::kPerChannel:
      if (layout.axis != 0) {
        return absl::InvalidArgumentError(
            StrCat("weight.ch_axis: GPTQ quantizes per output channel (axis 0), got axis ", layout.axis));
      }
      return absl::OkStatus();
    case Granularity::kPerGroup:
    case Granularity::kMxBlock:
      if (layout.axis != 1) {
        return absl::InvalidArgumentError(
            StrCat("weight.ch_axis: GPTQ groups run along the input axis (1), got axis ", layout.axis));
      }
      grouped_ = true;
      group_size_ = layout.group_size > 0 ? layout.group_size : sizes[1];
      // A column is a group of one element per row; MX keeps its block spec (a one-element tail block).
      if (layout.granularity == Granularity::kPerGroup) column_spec_.group_size = 1;
      return absl::OkStatus();
    case Granularity::kPerToken: break;
  }
  return absl::InvalidArgumentError("weight.qscheme: per_token is for dynamic activations, not GPTQ weights");
}

absl::StatusOr<QuantParams> GptqRun::ParamsOfColumns(const at::Tensor& columns) const {
  return ParamsOf(columns.to(dtype_).contiguous(), spec_, TensorRole::kWeight);
}

absl::Status GptqRun::SetUpParams(const at::Tensor& w) {
  if (!grouped_) {
    QUARK_ASSIGN_OR_RETURN(QuantParams p, ParamsOfColumns(w));
    params_.push_back(std::move(p));
    return absl::OkStatus();
  }
  if (!options_.static_groups) return absl::OkStatus();  // computed as each group starts
  for (int64_t start = 0; start < w.size(1); start += group_size_) {
    QUARK_ASSIGN_OR_RETURN(QuantParams p, ParamsOfColumns(w.slice(1, start, start + group_size_)));
    params_.push_back(std::move(p));
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> GptqRun::InverseHessianFactor(at::Tensor h, double& extra_damp) const {
  // As Quark: a float32 product of the float32 mean, added as a tensor (a double product would round differently).
  // at::diag copies the diagonal (contiguous), as torch.diag in Quark: a mean over the strided view sums in
  // another order.
  const at::Tensor damp = at::diag(h).mean() * options_.damp_percent;
  h.diagonal().add_(damp);
  const bool fast = options_.fast_linalg;
  auto factor = CholeskyStep(h, fast);
  if (factor.ok()) {
    h = at::Tensor();  // released before the inverse: two K x K matrices at the peak, not three
    return InverseFactorStep(*std::move(factor), fast);  // Quark does not retry past its first factorisation
  }
  // Quark's retry: more diagonal regularisation, ten times more each time.
  double extra = std::max({std::abs(damp.item<double>()), at::diag(h).abs().mean().item<double>() * 1e-6,
                           static_cast<double>(std::numeric_limits<float>::epsilon())});
  for (int attempt = 0; attempt < kCholeskyRetries; ++attempt, extra *= 10) {
    at::Tensor damped = h.clone();
    damped.diagonal().add_(extra);
    factor = CholeskyStep(damped, fast);
    if (factor.ok()) {
      extra_damp = extra;
      return InverseFactorStep(*std::move(factor), fast);
    }
  }
  return absl::FailedPreconditionError(StrCat(std::string(factor.status().message()), " after ", kCholeskyRetries,
                                              " retries with extra damping up to ", extra / 10));
}

absl::StatusOr<const QuantParams*> GptqRun::ParamsForColumn(int64_t column, const at::Tensor& wt) {
  if (!grouped_) return &params_[0];
  if (options_.static_groups) {
    const int64_t original = options_.act_order ? perm_[static_cast<size_t>(column)] : column;
    return &params_[static_cast<size_t>(original / group_size_)];
  }
  if (column % group_size_ == 0) {
    // Quark observes the group on the current weight: its columns in this block already carry the block's updates,
    // those after the block only the lazy updates of earlier blocks (IST-DASLab reads a stale copy instead).
    QUARK_ASSIGN_OR_RETURN(QuantParams p, ParamsOfColumns(wt.slice(0, column, column + group_size_).t()));
    params_.push_back(std::move(p));
  }
  return &params_.back();
}

absl::StatusOr<at::Tensor> GptqRun::QuantizeColumn(const at::Tensor& column, const QuantParams& params) const {
  const at::Tensor x = column.view({column.size(0), 1}).to(dtype_);
  QUARK_ASSIGN_OR_RETURN(at::Tensor q, FakeQuantize(x, column_spec_, params, TensorRole::kWeight));
  return q.to(at::kFloat).contiguous();
}

// wt [K, N]: row j is column j of W (contiguous), updated in place. u [K, K] upper with contiguous rows
// (InverseFactorStep); qt [K, N] receives the quantized
// columns. Every float operation is Quark's, element for element: the in-block update rounds the product and then
// subtracts it, and the lazy update's GEMM sums each dot product over the block in the same order (transposing both
// operands changes the tiling, not the order of the sum), so the columns after a block carry Quark's bits.
absl::Status GptqRun::QuantizeColumns(at::Tensor& wt, const at::Tensor& u, at::Tensor& qt) {
  const int64_t k = wt.size(0), n = wt.size(1), block = options_.block_size;
  at::Tensor err = at::empty({std::min(block, k), n}, wt.options());  // (w - q) / d of the block's columns
  float* w = wt.data_ptr<float>();
  float* q = qt.data_ptr<float>();
  const float* hinv = u.data_ptr<float>();
  for (int64_t i1 = 0; i1 < k; i1 += block) {
    const int64_t i2 = std::min(i1 + block, k);
    for (int64_t j = i1; j < i2; ++j) {
      QUARK_ASSIGN_OR_RETURN(const QuantParams* params, ParamsForColumn(j, wt));
      QUARK_ASSIGN_OR_RETURN(const at::Tensor quantized, QuantizeColumn(wt[j], *params));
      const float* qc = quantized.data_ptr<float>();
      const float* hrow = hinv + j * k;  // Hinv[j, :]
      const float d = hrow[j];
      float* e = err.data_ptr<float>() + (j - i1) * n;
      float* wj = w + j * n;
      float* qj = q + j * n;
      // One thread: these loops stream a block that sits in cache, and OpenBLAS's worker threads, still spinning
      // after the last GEMM, would take the second core from an OpenMP team (measured: slower with two).
      for (int64_t r = 0; r < n; ++r) {
        qj[r] = qc[r];
        e[r] = (wj[r] - qc[r]) / d;
      }
      for (int64_t t = j + 1; t < i2; ++t) {
        const float h = hrow[t];
        float* row = w + t * n;
        for (int64_t r = 0; r < n; ++r) row[r] -= e[r] * h;
      }
    }
    if (i2 < k) {
      // Lazy update of the columns after the block: W[:, i2:] -= Err @ Hinv[i1:i2, i2:], transposed. One GEMM
      // accumulates C - A B as Quark's matmul-then-subtract does while the block fits one pass over the shared
      // dimension of the BLAS kernels; longer blocks take Quark's two steps.
      at::Tensor rest = wt.slice(0, i2);
      const at::Tensor hinv_block = u.slice(0, i1, i2).slice(1, i2).t();
      const at::Tensor err_block = err.slice(0, 0, i2 - i1);
      if (options_.fast_linalg || i2 - i1 <= kFusedUpdateMaxBlock) {
        rest.addmm_(hinv_block, err_block, /*beta=*/1, /*alpha=*/-1);
      } else {
        rest -= hinv_block.matmul(err_block);
      }
    }
  }
  return absl::OkStatus();
}

QuantParams GptqRun::WholeParams() const {
  if (!grouped_) return params_[0];
  std::vector<at::Tensor> scales, zero_points;
  for (const QuantParams& p : params_) {
    scales.push_back(p.scale);
    zero_points.push_back(p.zero_point);
  }
  return QuantParams{at::cat(scales, 1), at::cat(zero_points, 1)};
}

absl::StatusOr<GptqResult> GptqRun::Run(at::Tensor w, at::Tensor h) {
  QUARK_RETURN_IF_ERROR(ResolveGranularity(w.sizes()));
  if (options_.act_order && grouped_ && !options_.static_groups) {
    return absl::InvalidArgumentError("desc_act: act order with groups needs static_groups");
  }
  const at::Tensor dead = h.diagonal() == 0;
  h.diagonal().masked_fill_(dead, 1);
  w.masked_fill_(dead.unsqueeze(0), 0);
  QUARK_RETURN_IF_ERROR(SetUpParams(w));
  at::Tensor perm;
  if (options_.act_order) {
    perm = at::argsort(at::diag(h), /*dim=*/0, /*descending=*/true);  // Quark's call (ties as torch orders them)
    const int64_t* p = perm.data_ptr<int64_t>();
    perm_.assign(p, p + perm.numel());
    w = w.index_select(1, perm);
    h = h.index_select(0, perm).index_select(1, perm);
  }
  GptqResult result;
  using Clock = std::chrono::steady_clock;
  const auto factor_start = Clock::now();
  QUARK_ASSIGN_OR_RETURN(const at::Tensor u, InverseHessianFactor(std::move(h), result.extra_damp));
  const auto columns_start = Clock::now();
  result.factor_seconds = std::chrono::duration<double>(columns_start - factor_start).count();
  at::Tensor wt = w.t().contiguous();
  w = at::Tensor();  // copies of the weight alive at once: the transposed working copy and the result
  at::Tensor qt = at::empty_like(wt);
  QUARK_RETURN_IF_ERROR(QuantizeColumns(wt, u, qt));
  result.columns_seconds = std::chrono::duration<double>(Clock::now() - columns_start).count();
  wt = at::Tensor();
  at::Tensor q = qt.t();
  if (options_.act_order) q = q.index_select(1, at::argsort(perm));
  result.weight = q.to(dtype_).contiguous();
  result.params = WholeParams();
  return result;
}

}  // namespace

absl::StatusOr<GptqResult> GptqQuantizeWeight(const at::Tensor& weight, at::Tensor hessian, const QuantSpec& spec,
                                              const GptqOptions& options) {
  if (!weight.defined() || weight.dim() != 2) return absl::InvalidArgumentError("weight: expected [N, K]");
  const int64_t k = weight.size(1);
  if (!hessian.defined() || hessian.dim() != 2 || hessian.size(0) != k || hessian.size(1) != k) {
    return absl::InvalidArgumentError(StrCat("hessian: expected [", k, ", ", k, "] for a weight ",
                                             ShapeString(weight.sizes())));
  }
  if (!(options.damp_percent > 0 && options.damp_percent <= 1)) {
    return absl::InvalidArgumentError(StrCat("damp_percent: must be in (0, 1], got ", options.damp_percent));
  }
  if (options.block_size <= 0) return absl::InvalidArgumentError("block_size: must be positive");
  const at::ScalarType dtype = weight.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
    return absl::InvalidArgumentError("weight: expected float32, bfloat16 or float16");
  }
  try {
    GptqRun run(spec, options, dtype);
    // A Hessian nobody else holds is worked on in place (it is K x K: 0.5 GB for an 11008-wide input).
    const bool owned = hessian.use_count() == 1 && hessian.scalar_type() == at::kFloat && hessian.is_contiguous();
    at::Tensor h = owned ? std::move(hessian) : hessian.to(at::kFloat).clone().contiguous();
    return run.Run(weight.to(at::kFloat).clone().contiguous(), std::move(h));
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "gptq");
  }
}

}  // namespace quark::algorithms
