#include "core/algorithms/asymmetric_gptq.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/algorithms/gptaq_products.h"
#include "core/algorithms/gptq_column_params.h"
#include "core/algorithms/gptq_columns.h"
#include "core/algorithms/gptq_fused_blocks.h"
#include "core/algorithms/linalg.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/config/asymmetric_gptq_cost.h"
#include "core/numerics/quant_layout.h"
#include "core/runtime/layer_streamer.h"

namespace quark::algorithms {
namespace {

using Clock = std::chrono::steady_clock;

// Memory: at K = 11008 (a 7B down_proj's input) each K x K matrix is 485 MB, so the run holds as few as it can: the
// statistics come in owned (AsymmetricStats::Release) and are worked on in their own memory, each matrix is released as
// soon as its last use is past, and on the host (without GptqOptions::tensor_ops) the permutation and the
// factorisations run in place (linalg.h: LAPACK on the same array, LibTorch's bits and strides). Every float operation
// is the one the code had when it cloned, in the same order, so the weights are the same bits
// (tests/algorithms/asymmetric_gptq_test.cc checks the two ways against each other). Three products are not Quark's
// calls: GPTAQ's P is formed on the blocks of its triangles (the same sums grouped by block, Quark's two GEMMs when K
// fits one block), Qronos's re-solve takes the weight's rows first when it has fewer rows than inputs
// (asymmetric_gptq_cost.h), and GPTAQ's lazy update runs on slabs of rows (the same dot products). While a weight is
// quantized at most two K x K matrices are alive at once in GPTAQ (H or its factor U, and dXX or P); three in Qronos
// (H, G and the inverse, and H / max|H| in the power iteration).

// K x K work in place on the host (linalg.h), or in LibTorch's calls on any device (GptqOptions::tensor_ops, a GPU).
struct SquareOps {
  bool in_place = false;

  // m = m[perm][:, perm]. In place: no second matrix; otherwise one row-permuted copy at a time.
  void Permute(at::Tensor& m, const at::Tensor& perm) const {
    if (in_place) {
      PermuteSymmetricInPlace(m, perm);  // any square matrix: columns then rows (the name says where GPTQ uses it)
      return;
    }
    m = m.index_select(0, perm);
    m = m.index_select(1, perm);
  }

  // Lower L with L L^T = h, h consumed (in place: L is h's array).
  absl::StatusOr<at::Tensor> Cholesky(at::Tensor& h, const char* what) const {
    if (in_place) {
      absl::StatusOr<at::Tensor> lower = CholeskyStep(h, /*fast=*/false);
      if (!lower.ok()) return Renamed(lower.status(), what);
      return lower;
    }
    auto [lower, info] = at::linalg_cholesky_ex(h);
    const int64_t minor = info.item<int64_t>();
    if (minor != 0) return NotPositiveDefinite(what, minor);
    h = at::Tensor();
    return lower;
  }

  // (L L^T)^-1 from L (consumed), as LibTorch's cholesky_inverse.
  absl::StatusOr<at::Tensor> CholeskyInverse(at::Tensor lower) const {
    if (in_place) return CholeskyInverseStep(std::move(lower));
    return at::cholesky_inverse(lower);
  }

  // w = w[:, perm] for a working weight or result [N, K] float32: in its own memory on the host, a gathered copy
  // elsewhere (the same values).
  void PermuteColumns(at::Tensor& w, const at::Tensor& perm) const {
    if (in_place) {
      PermuteColumnsInPlace(w, perm);
      return;
    }
    w = w.index_select(1, perm);
  }

  // m made row-major (as the fused blocks read a factor): in its own memory on the host, a copy elsewhere.
  void RowMajor(at::Tensor& m) const {
    if (in_place) {
      RowMajorInPlace(m);
      return;
    }
    m = m.contiguous();
  }

  // Upper U with U^T U = m, m consumed.
  absl::StatusOr<at::Tensor> UpperCholesky(at::Tensor m, const char* what) const {
    if (in_place) return UpperCholeskyStep(std::move(m), what);
    auto [upper, info] = at::linalg_cholesky_ex(m, /*upper=*/true);
    const int64_t minor = info.item<int64_t>();
    if (minor != 0) return NotPositiveDefinite(what, minor);
    return upper;
  }

 private:
  static absl::Status NotPositiveDefinite(const char* what, int64_t minor) {
    return absl::FailedPreconditionError(StrCat(what, " is not positive definite (leading minor ", minor, ")"));
  }
  // CholeskyStep names the matrix "Hessian"; here it may be the damped one.
  static absl::Status Renamed(const absl::Status& status, const char* what) {
    std::string message(status.message());
    const std::string from = "Hessian";
    if (message.compare(0, from.size(), from) == 0) message.replace(0, from.size(), what);
    return absl::Status(status.code(), message);
  }
};

// Rows of GPTAQ's lazy update formed at a time (GptaqColumns).
constexpr int64_t kLazyUpdateRows = 512;

// One run's working state, after Quark's preparation: dead inputs, parameters from the original weight, act order.
struct Prepared {
  at::Tensor w;      // [N, K] float32, columns in act order
  at::Tensor h;      // [K, K] permuted, dead diagonal 1
  at::Tensor cross;  // [K, K] permuted (GPTAQ: dead columns 0)
  at::Tensor perm;   // act order only
};

// `t` itself when nothing else holds its memory and it is float32, contiguous and on `device` (the run may then write
// over it), else a float32 copy there. FAILED_PRECONDITION when an entry is NaN or infinite (LAPACK does not reliably
// report them: gptq_damping.cc); the extremes take no K x K temporary.
absl::StatusOr<at::Tensor> Working(at::Tensor t, at::Device device, const char* name) {
  const bool owned = t.use_count() == 1 && t.storage().use_count() == 1 && t.scalar_type() == at::kFloat &&
                     t.is_contiguous() && t.device() == device;
  if (!owned) t = t.to(device, at::kFloat, /*non_blocking=*/false, /*copy=*/true, at::MemoryFormat::Contiguous);
  const auto [lowest, highest] = at::aminmax(t);
  if (!std::isfinite(lowest.item<float>()) || !std::isfinite(highest.item<float>())) {
    return absl::FailedPreconditionError(StrCat(name, ": has NaN or infinite entries"));
  }
  return t;
}

// The working float32 copy of a weight, its dead inputs' columns 0.
at::Tensor WorkingWeight(const at::Tensor& weight, const at::Tensor& dead) {
  at::Tensor w = weight.to(at::kFloat).clone(at::MemoryFormat::Contiguous);
  w.masked_fill_(dead.unsqueeze(0), 0);
  return w;
}

// Dead inputs get H_jj = 1 (returned: [K] bool); with act order the column order by diag(H) descending, on the device
// and the host.
at::Tensor MarkDead(at::Tensor& h) {
  const at::Tensor dead = at::diag(h) == 0;
  h.diagonal().masked_fill_(dead, 1);
  return dead;
}
std::vector<int64_t> ActOrder(const at::Tensor& h, const AsymmetricOptions& options, at::Tensor& perm) {
  std::vector<int64_t> host_perm;
  if (options.gptq.act_order) {
    perm = at::argsort(at::diag(h), /*dim=*/0, /*descending=*/true);
    const at::Tensor on_host = perm.to(at::kCPU).contiguous();
    host_perm.assign(on_host.data_ptr<int64_t>(), on_host.data_ptr<int64_t>() + on_host.numel());
  }
  return host_perm;
}

std::vector<int64_t> Prepare(const at::Tensor& weight, at::Tensor h, at::Tensor cross,
                             const AsymmetricOptions& options, Prepared& p) {
  const at::Tensor dead = MarkDead(h);
  p.w = WorkingWeight(weight, dead);
  p.h = std::move(h);
  p.cross = std::move(cross);
  return ActOrder(p.h, options, p.perm);
}

void Permute(Prepared& p, const SquareOps& ops) {
  if (!p.perm.defined()) return;
  ops.PermuteColumns(p.w, p.perm);
  ops.Permute(p.h, p.perm);
  ops.Permute(p.cross, p.perm);
}

// How the asymmetric column loops round: the spec and its column plan, the parameters, the weight's dtype.
struct Rounding {
  const QuantSpec& spec;
  const GptqColumnPlan& plan;
  ColumnParameters& params;
  at::ScalarType dtype;
};

// GPTAQ's columns (Gptaq.quantize) of w [N, K] (working float32, in act order) on its input's factor: q [N, K] in
// act order. In fused blocks (GptqOptions::fused_blocks, where the device has the block kernel:
// kernels/element/gptq_row.h with P) or column by column, the same float operations: true when fused.
absl::StatusOr<bool> GptaqColumns(at::Tensor& w, const GptaqFactor& factor, const Rounding& rounding,
                                  const AsymmetricOptions& options, at::Tensor& q) {
  const GptqColumnPlan& plan = rounding.plan;
  ColumnParameters& params = rounding.params;
  const at::ScalarType dtype = rounding.dtype;
  const int64_t k = w.size(1), block = options.gptq.block_size;
  const at::Tensor& u = factor.upper;
  const at::Tensor l = u.t();
  const at::Tensor& pm = factor.p;
  // W[:, i2:] -= Err1 U[i1:i2, i2:] - W1 P[i1:i2, i2:], on kLazyUpdateRows rows at a time: rows never mix (each
  // element the same two dot products), and the two products are slabs rather than two N x (K - i2) temporaries (360 MB
  // each at a 7B down_proj's first block). The difference is formed in one slab kept for the whole loop: the first
  // product written into it, the second subtracted inside its GEMM (SubtractProduct: matmul-then-subtract's bits). Two
  // fresh slabs a block made every product's output a first touch of new pages (on a Llama-2-7B layer at 2,048
  // tokens, 32 s of GPTAQ's 98 went to these updates against 12 s of GEMM work).
  at::Tensor slab;
  const auto lazy_update = [&](const at::Tensor& err1, const at::Tensor& w1, int64_t i1, int64_t i2) {
    const at::Tensor u_rest = l.t().slice(0, i1, i2).slice(1, i2), p_rest = pm.slice(0, i1, i2).slice(1, i2);
    const int64_t rows = w.size(0), rest = k - i2;
    if (!slab.defined()) slab = at::empty({std::min(kLazyUpdateRows, rows) * k}, w.options());
    for (int64_t r = 0; r < rows; r += kLazyUpdateRows) {
      const int64_t end = std::min(r + kLazyUpdateRows, rows);
      at::Tensor lazy = slab.narrow(0, 0, (end - r) * rest).view({end - r, rest});
      at::mm_out(lazy, err1.slice(0, r, end), u_rest);
      SubtractProduct(lazy, w1.slice(0, r, end), p_rest);
      w.slice(0, r, end).slice(1, i2).sub_(lazy);
    }
  };
  if (options.gptq.fused_blocks) {
    // The block's columns are updated in w itself (no column is read again once its block is done), so W1 is w's.
    FusedBlockVariant gptaq;
    gptaq.gptaq_p = pm;
    gptaq.after_block = [&](int64_t i1, int64_t i2, const at::Tensor& errors) {
      if (i2 < k) lazy_update(errors.slice(1, 0, i2 - i1), w.slice(1, i1, i2), i1, i2);
    };
    QUARK_ASSIGN_OR_RETURN(const bool fused, QuantizeColumnsInFusedBlocks(w, q, u, rounding.spec, plan, params, dtype,
                                                                          block, gptaq));
    if (fused) return true;
  }
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
    if (i2 < k) lazy_update(err1, w1, i1, i2);
  }
  return false;
}

// Rows of the Sherman-Morrison update a -= b b^T / c at a time: each product b_i b_j is one rounding whatever the
// GEMM's shape, so the update is the whole-matrix one bit for bit without its two (K - 1)^2 temporaries.
constexpr int64_t kDowndateRows = 256;

// Qronos's first column and re-solve (Qronos.qronos_inner / qronos_inner_eager), then its GPTQ loop (in fused blocks
// where GPTQ's would be: true then).
absl::StatusOr<bool> QronosColumns(Prepared& p, const Rounding& rounding, const AsymmetricOptions& options,
                                   const SquareOps& ops, at::Tensor& q) {
  const GptqColumnPlan& plan = rounding.plan;
  ColumnParameters& params = rounding.params;
  const at::ScalarType dtype = rounding.dtype;
  const int64_t k = p.w.size(1), block = options.gptq.block_size;
  at::Tensor& w = p.w;
  at::Tensor& h = p.h;
  const double damp = options.alpha * QronosLargestEigenvalue(h);
  at::Tensor hinv = h.clone();
  hinv.diagonal().add_(damp);
  QUARK_ASSIGN_OR_RETURN(at::Tensor lower, ops.Cholesky(hinv, "damped Hessian"));
  QUARK_ASSIGN_OR_RETURN(hinv, ops.CholeskyInverse(std::move(lower)));
  // 1) q_0 = Q((G_{0,:} w - H_{0,>0} w_{>0}) / H_00)
  at::Tensor q0;
  {
    const at::Tensor h00 = h.select(0, 0).select(0, 0);
    const at::Tensor dhi = h00.item<float>() == 0 ? at::zeros_like(h00) : h00.reciprocal();
    at::Tensor h0 = h.select(0, 0).clone();
    h0.select(0, 0).fill_(0);
    const at::Tensor gw0 = w.matmul(p.cross.select(1, 0).mul(dhi));
    const at::Tensor hv0 = w.matmul(h0.mul(dhi));
    QUARK_ASSIGN_OR_RETURN(const QuantParams* first, params.For(0, w));
    QUARK_ASSIGN_OR_RETURN(q0, QuantizeColumn(gw0 - hv0, plan, *first, dtype));
  }
  q.select(1, 0).copy_(q0);
  // Sherman-Morrison downdate: (H_{>0,>0})^-1 from (H + damp I)^-1, in the inverse's memory. (Views of it live only in
  // this scope, so that the inverse is released as soon as its scaled copy exists.)
  at::Tensor scaled;
  {
    at::Tensor a = hinv.slice(0, 1).slice(1, 1);
    {
      const at::Tensor c = hinv.select(0, 0).select(0, 0);
      const at::Tensor b = hinv.slice(0, 1).slice(1, 0, 1);
      for (int64_t r = 0; r < k - 1; r += kDowndateRows) {
        const int64_t end = std::min(r + kDowndateRows, k - 1);
        a.slice(0, r, end).sub_(b.slice(0, r, end).matmul(b.t()).div(c));
      }
    }
    // 2) w_{>0} = (H_{>0,>0})^-1 (G_{>0,:} w - H_{>0,0} q_0), G damped as H was. H's last use comes first (the two
    // products are independent), so that H is released before G's product is formed.
    const at::Tensor hq = q0.unsqueeze(1).matmul(h.slice(0, 0, 1).slice(1, 1).matmul(a));
    h = at::Tensor();
    // G + diag(damp) in G's memory: the diagonal as that sum adds it, and off it the sum's + 0 (which makes -0 +0).
    at::Tensor& g_damp = p.cross;
    g_damp.add_(0.0);
    g_damp.diagonal().add_(at::full({k}, damp, g_damp.options()));
    // Quark's grouping G_{:, >0} A first, or the rows first where that is fewer flops and a smaller temporary.
    at::Tensor gw = QronosResolvesRowsFirst(w.size(0), k) ? w.matmul(g_damp.slice(1, 1)).matmul(a)
                                                          : w.matmul(g_damp.slice(1, 1).matmul(a));
    p.cross = at::Tensor();
    gw.sub_(hq);
    w.slice(1, 1).copy_(gw);
    gw = at::Tensor();
    scaled = a.mul(options.beta);
  }
  hinv = at::Tensor();
  QUARK_ASSIGN_OR_RETURN(at::Tensor l, ops.UpperCholesky(std::move(scaled), "downdated inverse Hessian"));
  l.div_(std::sqrt(options.beta));
  if (options.gptq.fused_blocks && k > 1) {
    // GPTQ's loop on columns 1.. with the downdated factor (row-major, its column-major original released): a copy
    // of the columns, worked on in place, Quark's lazy update (matmul, then subtract) after each block.
    ops.RowMajor(l);
    at::Tensor rest = w.slice(1, 1).contiguous();
    at::Tensor rest_q = at::empty_like(rest);
    FusedBlockVariant qronos;
    qronos.column_offset = 1;
    qronos.after_block = [&](int64_t i1, int64_t i2, const at::Tensor& errors) {
      if (i2 < k - 1) rest.slice(1, i2).sub_(errors.slice(1, 0, i2 - i1).matmul(l.slice(0, i1, i2).slice(1, i2)));
    };
    QUARK_ASSIGN_OR_RETURN(const bool fused, QuantizeColumnsInFusedBlocks(rest, rest_q, l, rounding.spec, plan, params,
                                                                          dtype, block, qronos));
    if (fused) {
      q.slice(1, 1).copy_(rest_q);
      return true;
    }
  }
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
  return false;
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

namespace {

// The weight's checks, shared by both methods' entry points: its plan of columns.
absl::StatusOr<GptqColumnPlan> CheckWeight(const at::Tensor& weight, const QuantSpec& spec,
                                           const AsymmetricOptions& options) {
  if (!weight.defined() || weight.dim() != 2) return absl::InvalidArgumentError("weight: expected [N, K]");
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
  return plan;
}

// The quantized weight in its dtype and original column order, from q [N, K] in act order.
GptqResult Finished(at::Tensor q, const at::Tensor& perm, const SquareOps& ops, at::ScalarType dtype,
                    const ColumnParameters& params, bool fused, Clock::time_point start) {
  if (perm.defined()) ops.PermuteColumns(q, at::argsort(perm));
  GptqResult result;
  result.weight = q.to(dtype);
  result.params = params.Whole();
  result.columns_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.fused_blocks = fused;
  return result;
}

}  // namespace

absl::StatusOr<GptaqFactor> GptaqFactorOf(at::Tensor hessian, at::Tensor cross, const AsymmetricOptions& options,
                                          at::Device device) {
  QUARK_RETURN_IF_ERROR(CheckOptions(options));
  if (options.method != HessianMethod::kGptaq) return absl::InvalidArgumentError("method: expected gptaq");
  if (!hessian.defined() || hessian.dim() != 2 || hessian.size(0) != hessian.size(1)) {
    return absl::InvalidArgumentError("hessian: expected [K, K]");
  }
  if (!cross.defined() || cross.sizes() != hessian.sizes()) {
    return absl::InvalidArgumentError(StrCat("cross: expected ", ShapeString(hessian.sizes()), " as the hessian"));
  }
  try {
    const auto start = Clock::now();
    SquareOps ops;
    ops.in_place = device.is_cpu() && !options.gptq.tensor_ops;
    QUARK_ASSIGN_OR_RETURN(at::Tensor h, Working(std::move(hessian), device, "hessian"));
    QUARK_ASSIGN_OR_RETURN(at::Tensor x, Working(std::move(cross), device, "cross"));
    GptaqFactor factor;
    factor.dead = MarkDead(h);
    x.masked_fill_(factor.dead.unsqueeze(0), 0);
    factor.host_perm = ActOrder(h, options, factor.perm);
    if (factor.perm.defined()) {
      ops.Permute(h, factor.perm);
      ops.Permute(x, factor.perm);
    }
    // Quark damps H itself (it has no later use) and keeps the factors only.
    const at::Tensor damp = at::mean(at::diag(h)).mul(options.gptq.damp_percent);
    h.diagonal().add_(damp);
    QUARK_ASSIGN_OR_RETURN(at::Tensor lower, ops.Cholesky(h, "Hessian"));
    QUARK_ASSIGN_OR_RETURN(at::Tensor inverse, ops.CholeskyInverse(std::move(lower)));
    QUARK_ASSIGN_OR_RETURN(at::Tensor u, ops.UpperCholesky(std::move(inverse), "inverse Hessian"));
    // Row-major, as the fused blocks read it (the in-place factor is LAPACK's column-major array).
    ops.RowMajor(u);
    // P = alpha * triu_1(dXX L) L^T in dXX's memory, on the blocks where the triangles can be nonzero.
    GptaqPInPlace(x, u, options.alpha);
    factor.upper = std::move(u);
    factor.p = std::move(x);
    factor.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return factor;
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "gptaq");
  }
}

absl::StatusOr<GptqResult> GptaqQuantizeWeight(const at::Tensor& weight, const GptaqFactor& factor,
                                               const QuantSpec& spec, const AsymmetricOptions& options) {
  QUARK_RETURN_IF_ERROR(CheckOptions(options));
  QUARK_ASSIGN_OR_RETURN(const GptqColumnPlan plan, CheckWeight(weight, spec, options));
  const int64_t k = weight.size(1);
  for (const at::Tensor* t : {&factor.upper, &factor.p}) {
    if (!t->defined() || t->dim() != 2 || t->size(0) != k || t->size(1) != k || t->device() != weight.device()) {
      return absl::InvalidArgumentError(StrCat("factor: expected [", k, ", ", k, "] on ", weight.device().str(),
                                               " for a weight ", ShapeString(weight.sizes())));
    }
  }
  try {
    const auto start = Clock::now();
    const at::ScalarType dtype = weight.scalar_type();
    SquareOps ops;
    ops.in_place = weight.device().is_cpu() && !options.gptq.tensor_ops;
    at::Tensor w = WorkingWeight(weight, factor.dead);
    ColumnParameters params(spec, plan, options.gptq, dtype, factor.host_perm);
    QUARK_RETURN_IF_ERROR(params.SetUp(w));
    if (factor.perm.defined()) ops.PermuteColumns(w, factor.perm);
    at::Tensor q = at::zeros_like(w);
    const Rounding rounding{spec, plan, params, dtype};
    QUARK_ASSIGN_OR_RETURN(const bool fused, GptaqColumns(w, factor, rounding, options, q));
    w = at::Tensor();  // past its last use: the result is q
    return Finished(std::move(q), factor.perm, ops, dtype, params, fused, start);
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "gptaq");
  }
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
  QUARK_ASSIGN_OR_RETURN(const GptqColumnPlan plan, CheckWeight(weight, spec, options));
  if (options.method == HessianMethod::kGptaq) {
    QUARK_ASSIGN_OR_RETURN(const GptaqFactor factor,
                           GptaqFactorOf(std::move(hessian), std::move(cross), options, weight.device()));
    QUARK_ASSIGN_OR_RETURN(GptqResult result, GptaqQuantizeWeight(weight, factor, spec, options));
    result.columns_seconds += factor.seconds;
    return result;
  }
  try {
    const auto start = Clock::now();
    const at::ScalarType dtype = weight.scalar_type();
    SquareOps ops;
    ops.in_place = weight.device().is_cpu() && !options.gptq.tensor_ops;
    Prepared p;
    QUARK_ASSIGN_OR_RETURN(at::Tensor h, Working(std::move(hessian), weight.device(), "hessian"));
    QUARK_ASSIGN_OR_RETURN(at::Tensor x, Working(std::move(cross), weight.device(), "cross"));
    std::vector<int64_t> host_perm = Prepare(weight, std::move(h), std::move(x), options, p);
    ColumnParameters params(spec, plan, options.gptq, dtype, std::move(host_perm));
    QUARK_RETURN_IF_ERROR(params.SetUp(p.w));
    Permute(p, ops);
    at::Tensor q = at::zeros_like(p.w);
    const Rounding rounding{spec, plan, params, dtype};
    QUARK_ASSIGN_OR_RETURN(const bool fused, QronosColumns(p, rounding, options, ops, q));
    p.w = at::Tensor();  // past its last use: the result is q
    return Finished(std::move(q), p.perm, ops, dtype, params, fused, start);
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "qronos");
  }
}

}  // namespace quark::algorithms
