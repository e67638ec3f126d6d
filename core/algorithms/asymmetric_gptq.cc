#include "core/algorithms/asymmetric_gptq.h"

#include <chrono>
#include <cmath>
#include <vector>

#include "core/algorithms/gptq_column_params.h"
#include "core/algorithms/gptq_columns.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/numerics/quant_layout.h"
#include "core/runtime/layer_streamer.h"

namespace quark::algorithms {
namespace {

using Clock = std::chrono::steady_clock;

// One run's working state, after Quark's preparation: dead inputs, parameters from the original weight, act order.
struct Prepared {
  at::Tensor w;      // [N, K] float32, columns in act order
  at::Tensor h;      // [K, K] permuted, dead diagonal 1
  at::Tensor cross;  // [K, K] permuted (GPTAQ: dead columns 0)
  at::Tensor perm;   // act order only
};

absl::StatusOr<at::Tensor> Cholesky(const at::Tensor& h, const char* what, bool upper = false) {
  auto [factor, info] = at::linalg_cholesky_ex(h, upper);
  const int64_t minor = info.item<int64_t>();
  if (minor != 0) {
    return absl::FailedPreconditionError(StrCat(what, " is not positive definite (leading minor ", minor, ")"));
  }
  return factor;
}

absl::StatusOr<std::vector<int64_t>> Prepare(const at::Tensor& weight, at::Tensor h, at::Tensor cross,
                                             const AsymmetricOptions& options, Prepared& p) {
  p.w = weight.to(at::kFloat).clone(at::MemoryFormat::Contiguous);
  const at::Tensor dead = at::diag(h) == 0;
  h.diagonal().masked_fill_(dead, 1);
  p.w.masked_fill_(dead.unsqueeze(0), 0);
  if (options.method == HessianMethod::kGptaq) cross.masked_fill_(dead.unsqueeze(0), 0);
  p.h = std::move(h);
  p.cross = std::move(cross);
  std::vector<int64_t> host_perm;
  if (options.gptq.act_order) {
    p.perm = at::argsort(at::diag(p.h), /*dim=*/0, /*descending=*/true);
    const at::Tensor on_host = p.perm.to(at::kCPU).contiguous();
    host_perm.assign(on_host.data_ptr<int64_t>(), on_host.data_ptr<int64_t>() + on_host.numel());
  }
  return host_perm;
}

void Permute(Prepared& p) {
  if (!p.perm.defined()) return;
  p.w = p.w.index_select(1, p.perm);
  p.h = p.h.index_select(0, p.perm).index_select(1, p.perm);
  p.cross = p.cross.index_select(0, p.perm).index_select(1, p.perm);
}

// GPTAQ's columns (Gptaq.quantize): q [N, K] in act order.
absl::Status GptaqColumns(Prepared& p, ColumnParameters& params, const GptqColumnPlan& plan, at::ScalarType dtype,
                          const AsymmetricOptions& options, at::Tensor& q) {
  const int64_t k = p.w.size(1), block = options.gptq.block_size;
  at::Tensor h = p.h.clone();
  const at::Tensor damp = at::mean(at::diag(h)).mul(options.gptq.damp_percent);
  h.diagonal().add_(damp);
  QUARK_ASSIGN_OR_RETURN(at::Tensor lower, Cholesky(h, "Hessian"));
  QUARK_ASSIGN_OR_RETURN(const at::Tensor u, Cholesky(at::cholesky_inverse(lower), "inverse Hessian", true));
  const at::Tensor l = u.t();
  const at::Tensor pm = p.cross.matmul(l).triu_(1).mul(options.alpha).matmul(l.t());
  p.cross = at::Tensor();
  at::Tensor& w = p.w;
  for (int64_t i1 = 0; i1 < k; i1 += block) {
    const int64_t i2 = std::min(i1 + block, k), count = i2 - i1;
    at::Tensor w1 = w.slice(1, i1, i2).clone();
    at::Tensor err1 = at::zeros_like(w1);
    const at::Tensor l1t = l.t().slice(0, i1, i2).slice(1, i1, i2);
    const at::Tensor p1 = pm.slice(0, i1, i2).slice(1, i1, i2);
    for (int64_t i = 0; i < count; ++i) {
      const at::Tensor col = w1.select(1, i);
      QUARK_ASSIGN_OR_RETURN(const QuantParams* qp, params.For(i1 + i, w));
      QUARK_ASSIGN_OR_RETURN(const at::Tensor qc, QuantizeColumn(col, plan, *qp, dtype));
      q.select(1, i1 + i).copy_(qc);
      const at::Tensor d = l1t.select(0, i).select(0, i);
      const at::Tensor e = (col - qc).div(d);
      const at::Tensor update = e.unsqueeze(1).matmul(l1t.select(0, i).slice(0, i).unsqueeze(0)) -
                                col.unsqueeze(1).matmul(p1.select(0, i).slice(0, i).unsqueeze(0));
      w1.slice(1, i).sub_(update);
      err1.select(1, i).copy_(e);
    }
    if (i2 < k) {
      w.slice(1, i2).sub_(err1.matmul(l.t().slice(0, i1, i2).slice(1, i2)) - w1.matmul(pm.slice(0, i1, i2).slice(1, i2)));
    }
  }
  return absl::OkStatus();
}

// Qronos's first column and re-solve (Qronos.qronos_inner / qronos_inner_eager), then its GPTQ loop.
absl::Status QronosColumns(Prepared& p, ColumnParameters& params, const GptqColumnPlan& plan, at::ScalarType dtype,
                           const AsymmetricOptions& options, at::Tensor& q) {
  const int64_t k = p.w.size(1), block = options.gptq.block_size;
  at::Tensor& w = p.w;
  const at::Tensor& h = p.h;
  const double damp = options.alpha * QronosLargestEigenvalue(h);
  at::Tensor hinv = h.clone();
  hinv.diagonal().add_(damp);
  QUARK_ASSIGN_OR_RETURN(const at::Tensor lower, Cholesky(hinv, "damped Hessian"));
  hinv = at::cholesky_inverse(lower);
  // 1) q_0 = Q((G_{0,:} w - H_{0,>0} w_{>0}) / H_00)
  const at::Tensor h00 = h.select(0, 0).select(0, 0);
  const at::Tensor dhi = h00.item<float>() == 0 ? at::zeros_like(h00) : h00.reciprocal();
  at::Tensor h0 = h.select(0, 0).clone();
  h0.select(0, 0).fill_(0);
  const at::Tensor gw0 = w.matmul(p.cross.select(1, 0).mul(dhi));
  const at::Tensor hv0 = w.matmul(h0.mul(dhi));
  QUARK_ASSIGN_OR_RETURN(const QuantParams* first, params.For(0, w));
  QUARK_ASSIGN_OR_RETURN(const at::Tensor q0, QuantizeColumn(gw0 - hv0, plan, *first, dtype));
  q.select(1, 0).copy_(q0);
  // Sherman-Morrison downdate: (H_{>0,>0})^-1 from (H + damp I)^-1.
  at::Tensor a = hinv.slice(0, 1).slice(1, 1);
  const at::Tensor c = hinv.select(0, 0).select(0, 0);
  const at::Tensor b = hinv.slice(0, 1).slice(1, 0, 1);
  a.sub_(b.matmul(b.t()).div(c));
  // 2) w_{>0} = (H_{>0,>0})^-1 (G_{>0,:} w - H_{>0,0} q_0), G damped as H was.
  const at::Tensor g_damp = p.cross + at::diag(at::full({k}, damp, p.cross.options()));
  const at::Tensor gw = w.matmul(g_damp.slice(1, 1).matmul(a));
  const at::Tensor hq = q0.unsqueeze(1).matmul(h.slice(0, 0, 1).slice(1, 1).matmul(a));
  w.slice(1, 1).copy_(gw - hq);
  p.cross = at::Tensor();
  QUARK_ASSIGN_OR_RETURN(at::Tensor l, Cholesky(a.mul(options.beta), "downdated inverse Hessian", true));
  l = l.div(std::sqrt(options.beta));
  at::Tensor q1 = at::zeros_like(w.slice(1, 0, std::min(block, k)));
  at::Tensor err1 = at::zeros_like(q1);
  for (int64_t i1 = 1; i1 < k; i1 += block) {
    const int64_t i2 = std::min(i1 + block, k), count = i2 - i1;
    at::Tensor w1 = w.slice(1, i1, i2);  // a view, as Quark's
    if (i1 + block > k) {
      q1 = at::zeros_like(w1);
      err1 = at::zeros_like(w1);
    }
    const at::Tensor hinv1 = l.slice(0, i1 - 1, i2 - 1).slice(1, i1 - 1, i2 - 1);
    for (int64_t i = 0; i < count; ++i) {
      const at::Tensor col = w1.select(1, i);
      QUARK_ASSIGN_OR_RETURN(const QuantParams* qp, params.For(i1 + i, w));
      QUARK_ASSIGN_OR_RETURN(const at::Tensor qc, QuantizeColumn(col, plan, *qp, dtype));
      q1.select(1, i).copy_(qc);
      const at::Tensor e = (col - qc).div(hinv1.select(0, i).select(0, i));
      w1.slice(1, i).sub_(e.unsqueeze(1).matmul(hinv1.select(0, i).slice(0, i).unsqueeze(0)));
      err1.select(1, i).copy_(e);
    }
    q.slice(1, i1, i2).copy_(q1.slice(1, 0, count));
    if (i2 < k) w.slice(1, i2).sub_(err1.matmul(l.slice(0, i1 - 1, i2 - 1).slice(1, i2 - 1)));
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const AsymmetricOptions& o) {
  if (o.method != HessianMethod::kGptaq && o.method != HessianMethod::kQronos) {
    return absl::InvalidArgumentError("method: expected gptaq or qronos");
  }
  if (o.gptq.block_size <= 0) return absl::InvalidArgumentError("block_size: must be positive");
  if (o.method == HessianMethod::kGptaq && !(o.gptq.damp_percent > 0 && o.gptq.damp_percent <= 1)) {
    return absl::InvalidArgumentError(StrCat("damp_percent: must be in (0, 1], got ", o.gptq.damp_percent));
  }
  if (!std::isfinite(o.alpha) || o.alpha < 0) {
    return absl::InvalidArgumentError(StrCat("alpha: must be finite and >= 0, got ", o.alpha));
  }
  if (o.method == HessianMethod::kQronos && (!std::isfinite(o.beta) || o.beta <= 0)) {
    return absl::InvalidArgumentError(StrCat("beta: must be finite and > 0, got ", o.beta));
  }
  return absl::OkStatus();
}

}  // namespace

double QronosLargestEigenvalue(const at::Tensor& hessian, int iterations) {
  const at::Tensor c = hessian.max().abs();
  const at::Tensor hk = hessian.div(c);
  at::Tensor b = at::ones({hessian.size(1)}, hessian.options());
  for (int i = 0; i < iterations; ++i) {
    const at::Tensor next = at::mv(hk, b);
    b = next.div(at::norm(next).add(1e-12));
  }
  return at::dot(b, at::mv(hk, b)).mul(c).item<double>();
}

absl::StatusOr<GptqResult> AsymmetricQuantizeWeight(const at::Tensor& weight, at::Tensor hessian, at::Tensor cross,
                                                    const QuantSpec& spec, const AsymmetricOptions& options) {
  QUARK_RETURN_IF_ERROR(CheckOptions(options));
  if (!weight.defined() || weight.dim() != 2) return absl::InvalidArgumentError("weight: expected [N, K]");
  const int64_t k = weight.size(1);
  for (const at::Tensor* t : {&hessian, &cross}) {
    if (!t->defined() || t->dim() != 2 || t->size(0) != k || t->size(1) != k) {
      return absl::InvalidArgumentError(StrCat(t == &hessian ? "hessian" : "cross", ": expected [", k, ", ", k,
                                               "] for a weight ", ShapeString(weight.sizes())));
    }
  }
  const at::ScalarType dtype = weight.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
    return absl::InvalidArgumentError("weight: expected float32, bfloat16 or float16");
  }
  QUARK_ASSIGN_OR_RETURN(const GptqColumnPlan plan, PlanGptqColumns(spec, weight.sizes(), options.gptq));
  if (plan.grouped && !options.gptq.static_groups) {
    return absl::InvalidArgumentError(
        "static_groups: gptaq and qronos need static_groups with per-group weights (Quark 0.13's own dynamic-group "
        "paths fail: GPTAQ never records a group's parameters, Qronos rounds its first column with an unobserved "
        "quantizer)");
  }
  try {
    const auto start = Clock::now();
    Prepared p;
    const at::Tensor h = hessian.to(weight.device(), at::kFloat).clone(at::MemoryFormat::Contiguous);
    const at::Tensor x = cross.to(weight.device(), at::kFloat).clone(at::MemoryFormat::Contiguous);
    hessian = at::Tensor();
    cross = at::Tensor();
    QUARK_ASSIGN_OR_RETURN(std::vector<int64_t> host_perm, Prepare(weight, h, x, options, p));
    ColumnParameters params(spec, plan, options.gptq, dtype, std::move(host_perm));
    QUARK_RETURN_IF_ERROR(params.SetUp(p.w));
    Permute(p);
    at::Tensor q = at::zeros_like(p.w);
    if (options.method == HessianMethod::kGptaq) {
      QUARK_RETURN_IF_ERROR(GptaqColumns(p, params, plan, dtype, options, q));
    } else {
      QUARK_RETURN_IF_ERROR(QronosColumns(p, params, plan, dtype, options, q));
    }
    if (p.perm.defined()) q = q.index_select(1, at::argsort(p.perm));
    GptqResult result;
    result.weight = q.to(dtype);
    result.params = params.Whole();
    result.columns_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, options.method == HessianMethod::kGptaq ? "gptaq" : "qronos");
  }
}

}  // namespace quark::algorithms
