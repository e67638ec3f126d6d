#include "core/algorithms/gptq.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <vector>

#include <ATen/Parallel.h>

#include "core/algorithms/gptq_columns.h"
#include "core/algorithms/gptq_damping.h"
#include "core/algorithms/gptq_tensor_ops.h"
#include "core/algorithms/linalg.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/config/quant_types.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/dispatch.h"
#include "core/numerics/format_map.h"
#include "core/numerics/quant_params.h"
#include "core/numerics/quant_layout.h"
#include "core/runtime/layer_streamer.h"
#include "kernels/cpu/affine_kernels.h"
#include "kernels/cpu/nvfp4_kernels.h"
#include "kernels/cpu/reduce_kernels.h"

namespace quark::algorithms {
namespace {

// A range's parameters for its columns, with what the integer kernel reads prepared once instead of once a column.
struct ColumnParams {
  QuantParams params;   // as the result reports them (per_block: one row a tile)
  QuantParams per_row;  // what a [n, 1] column is rounded with: params, or per_block's tile parameters row by row
  at::Tensor scale, zero_point;               // float32, contiguous: the kernel's arrays
  std::vector<float> inverse;                 // 1 / scale, as the kernel computes it on every call
  std::optional<kernels::AffineArgs> affine;  // float32 weights on an integer grid: the kernel is called directly
  std::optional<float> nvfp4_global;          // NVFP4: the global scale, `scale` holding each row's group scale
};

// GPTQ never mixes rows: a row's updates read only that row's errors and the shared factor. So the column loop runs
// on ranges of rows in parallel, each with its own parameters (per-row, sliced from the whole weight's or observed
// on its rows as groups start) and its own lazy-update GEMM, and every element gets the same arithmetic as in one
// pass over all rows (the GEMM's sum over the block runs in the same order whatever rows it is given).
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
  std::vector<ColumnParams> sliced;    // params_ restricted to these rows, filled as first used
  std::vector<ColumnParams> observed;  // groups observed on these rows as they start (not static_groups)
};

// Rows below which a range is not worth a thread of its own.
constexpr int64_t kMinRowsPerRange = 256;
// The lazy update's GEMMs run on fixed blocks of this many rows of the whole weight (a range is whole blocks, the
// last one ending at the last row), each single-threaded: every row sits in the same GEMM call, at the same place,
// with the same operands whatever the range split and thread count. Which bits a GEMM gives a row can depend on the
// call's shape and the row's place in it (OpenBLAS's AVX2 kernels, Haswell and Zen, round edge tiles differently;
// its AVX-512 ones do not), so splitting rows by the thread count would change the result with it (#33 item 0).
constexpr int64_t kUpdateRows = 256;
static_assert(kMinRowsPerRange >= kUpdateRows, "every range holds at least one block of rows");

// Columns of a block whose in-block updates reach the block's later columns in one pass.
constexpr int64_t kUpdatePanel = 16;
// Elements of a column updated by all of a panel's columns while they stay in L1.
constexpr int64_t kUpdateChunk = 256;

// row[r] -= e_i[r] * h[i] for i = 0..count-1 in that order, every product rounded before its subtraction (Quark's
// arithmetic; the file is built without FMA contraction), with e_i = errors + i * n. One pass over the row in
// chunks instead of `count` passes: each element sees the same subtractions in the same order. The in-block updates
// spend their time here: compiled for AVX-512 and AVX2 too, picked at load.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void SubtractScaled(float* __restrict row, const float* __restrict errors, const float* h, int64_t count,
                    int64_t n) {
  for (int64_t r0 = 0; r0 < n; r0 += kUpdateChunk) {
    const int64_t r1 = std::min(n, r0 + kUpdateChunk);
    for (int64_t i = 0; i < count; ++i) {
      const float* __restrict e = errors + i * n;
      const float hi = h[i];
      for (int64_t r = r0; r < r1; ++r) row[r] -= e[r] * hi;
    }
  }
}

// Where a row range's current weight lives during its column loop (QuantizeRows): the block's columns transposed
// in `block` (row j is column i1 + j of the n rows, with the block's updates so far), the columns after the block in
// W's own rows (row r at rows + r * stride, with the lazy updates of the blocks before).
struct RangeWeights {
  const float* block = nullptr;
  int64_t i1 = 0;
  int64_t i2 = 0;
  const float* rows = nullptr;
  int64_t stride = 0;
  int64_t n = 0;
};

// Per-row min and max of a group that lies inside the current block, with the engine's own MinMax reduction run
// down the block buffer's rows (its columns of W): [count, n] with a channel per row of W is the layout
// {count, n, 1}, scanned in column order as the [n, count] group would be.
std::pair<at::Tensor, at::Tensor> GroupMinMax(const RangeWeights& v, int64_t begin, int64_t end) {
  at::Tensor min = at::empty({v.n, 1}, at::kFloat), max = at::empty({v.n, 1}, at::kFloat);
  kernels::ChannelMinMax<float>(v.block + (begin - v.i1) * v.n, kernels::ChannelLayout{end - begin, v.n, 1},
                                min.data_ptr<float>(), max.data_ptr<float>());
  return {std::move(min), std::move(max)};
}

// The group [n, end - begin] itself, for observers that need every value.
at::Tensor GroupOf(const RangeWeights& v, int64_t begin, int64_t end) {
  const int64_t n = v.n, width = end - begin, split = std::min(end, v.i2);
  at::Tensor group = at::empty({n, width}, at::kFloat);
  float* g = group.data_ptr<float>();
  TransposeBlock(v.block + (begin - v.i1) * n, n, split - begin, n, g, width);
  for (int64_t r = 0; r < n && end > split; ++r) {
    std::memcpy(g + r * width + (split - begin), v.rows + r * v.stride + split, sizeof(float) * (end - split));
  }
  return group;
}

// The parameters of weight rows [begin, end), a row of `p` covering `rows_per_param` weight rows (per_block's tiles;
// 1 otherwise). Per-tensor parameters are one value for every row; so are W4A8's fp8 stage scale and NVFP4's global
// scale.
QuantParams SliceRows(const QuantParams& p, int64_t begin, int64_t end, int64_t rows_per_param) {
  const auto rows = [&](const at::Tensor& t) {
    return t.dim() == 0 || t.numel() == 1 ? t : t.slice(0, begin / rows_per_param, end / rows_per_param);
  };
  return QuantParams{rows(p.scale), rows(p.zero_point), p.global_scale};
}

// U^T U = (h + damp I)^-1, with Quark's damping and retries, in h's own memory (h is consumed).
absl::StatusOr<at::Tensor> InverseHessianFactor(at::Tensor h, const GptqOptions& options, double& extra_damp) {
  const bool fast = options.fast_linalg;
  const TwoStepFactorisation steps{[fast](at::Tensor& m) { return CholeskyStep(m, fast); },
                                   [fast](at::Tensor factor) { return InverseFactorStep(std::move(factor), fast); }};
  return DampedInverseFactor(h, options.damp_percent, steps, extra_damp);
}

class GptqRun {
 public:
  GptqRun(const QuantSpec& spec, const GptqOptions& options, at::ScalarType dtype)
      : spec_(spec), column_spec_(spec), options_(options), dtype_(dtype) {}

  /// The spec and options against a weight of these sizes; Run needs it first.
  absl::Status Prepare(at::IntArrayRef sizes);
  /// w [N, K] float32; worked on in place when nobody else holds it (a float copy of a bfloat16 weight).
  absl::StatusOr<GptqResult> Run(at::Tensor w, const GptqFactor& factor);

 private:
  absl::Status SetUpParams(const at::Tensor& w);
  absl::StatusOr<const ColumnParams*> ParamsForColumn(int64_t column, const RangeWeights& weights,
                                                      RowRange& rows) const;
  ColumnParams ForColumns(QuantParams params) const;
  absl::Status QuantizeColumn(const float* column, float* quantized, const ColumnParams& params, int64_t n) const;
  absl::Status QuantizeRows(at::Tensor& w, const at::Tensor& u, RowRange& rows) const;
  absl::Status LazyUpdate(at::Tensor& w, const at::Tensor& err, const at::Tensor& hinv_block,
                          const RowRange& rows) const;
  absl::Status QuantizeColumns(at::Tensor& w, const at::Tensor& u);
  QuantParams WholeParams() const;

  QuantSpec spec_;
  QuantSpec column_spec_;  // the spec applied to one [N, 1] column with that column's parameters
  GptqOptions options_;
  at::ScalarType dtype_;
  bool grouped_ = false;    // per_group, MX or NVFP4: parameters per group of input columns
  int64_t group_size_ = 0;  // grouped only
  bool nvfp4_ = false;      // NVFP4: e4m3 group scales under one global scale (observer_'s)
  int64_t block_rows_ = 0;  // per_block (2-D tiles): weight rows a tile spans; 0 otherwise
  std::optional<GptqObserver> observer_;  // set by Prepare
  // One per group in column order (static groups), or one for the whole weight (not grouped); empty with groups
  // observed as they start, which are per row range (rows_).
  std::vector<QuantParams> params_;
  std::vector<int64_t> perm_;  // act order: permuted position -> original column
  std::vector<RowRange> rows_;  // the row ranges the column loop ran on, in row order
};

absl::Status GptqRun::SetUpParams(const at::Tensor& w) {
  observer_->SetUp(w, options_);
  if (!grouped_) {
    QUARK_ASSIGN_OR_RETURN(QuantParams p, observer_->Of(w));
    params_.push_back(std::move(p));
    return absl::OkStatus();
  }
  if (!options_.static_groups) return absl::OkStatus();  // computed as each group starts
  QUARK_ASSIGN_OR_RETURN(params_, observer_->EveryGroup(w));
  return absl::OkStatus();
}

absl::StatusOr<const ColumnParams*> GptqRun::ParamsForColumn(int64_t column, const RangeWeights& weights,
                                                             RowRange& rows) const {
  if (grouped_ && !options_.static_groups) {
    if (column % group_size_ == 0) {
      // Quark observes the group on the current weight: its columns in this block already carry the block's
      // updates, those after the block only the lazy updates of earlier blocks (IST-DASLab reads a stale copy).
      const int64_t end = std::min(column + group_size_, weights.stride);
      std::optional<QuantParams> observed;
      if (dtype_ == at::kFloat && spec_.observer == ObserverKind::kMinMax && !spec_.IsMx() && !nvfp4_ &&
          block_rows_ == 0 && end <= weights.i2) {
        auto [min, max] = GroupMinMax(weights, column, end);
        QUARK_ASSIGN_OR_RETURN(observed, ComputeQuantParams(min, max, spec_));
      } else {
        QUARK_ASSIGN_OR_RETURN(observed, observer_->Of(GroupOf(weights, column, end)));
      }
      rows.observed.push_back(ForColumns(*std::move(observed)));
    }
    return &rows.observed.back();
  }
  size_t index = 0;
  if (grouped_) {
    const int64_t original = options_.act_order ? perm_[static_cast<size_t>(column)] : column;
    index = static_cast<size_t>(original / group_size_);
  }
  if (rows.sliced.empty()) rows.sliced.resize(params_.size());
  ColumnParams& sliced = rows.sliced[index];
  if (!sliced.params.scale.defined()) {
    sliced = ForColumns(SliceRows(params_[index], rows.begin, rows.end, std::max<int64_t>(block_rows_, 1)));
  }
  return &sliced;
}

ColumnParams GptqRun::ForColumns(QuantParams params) const {
  ColumnParams column{std::move(params), {}, {}, {}, {}, std::nullopt, std::nullopt};
  column.per_row = ColumnParamsPerRow(column.params, block_rows_);
  if (nvfp4_) {  // each row's group scale (e4m3 values as float32) for the NVFP4 kernel
    column.scale = column.params.scale.to(at::kFloat).contiguous();
    column.nvfp4_global = column.params.global_scale.item<float>();
    return column;
  }
  const DType element = column_spec_.ElementType();
  // W4A8's int4 stage reads the fp8 stage's values: FakeQuantize runs both.
  if (dtype_ != at::kFloat || column_spec_.IsMx() || column_spec_.IsProgressive() || !IsIntegerType(element)) {
    return column;
  }
  // What FakeQuantize hands the affine kernel (fake_quant.cc, RunScaled), prepared once.
  column.scale = column.per_row.scale.to(at::kFloat).contiguous();
  column.zero_point = column.per_row.zero_point.to(at::kFloat).contiguous();
  column.affine = AffineArgsOf(column_spec_, column.scale, column.zero_point,
                               column.per_row.zero_point.scalar_type() != at::kInt);
  const float* scale = column.scale.data_ptr<float>();
  column.inverse.resize(static_cast<size_t>(column.scale.numel()));
  for (size_t i = 0; i < column.inverse.size(); ++i) column.inverse[i] = 1.0f / scale[i];
  return column;
}

// The engine's own fake quantization of one column (n rows) with its rows' parameters, in the weight's dtype.
absl::Status GptqRun::QuantizeColumn(const float* column, float* quantized, const ColumnParams& params,
                                     int64_t n) const {
  if (params.affine) {
    // The kernel FakeQuantize would run on this [n, 1] column: one parameter per row, or one for all of them.
    kernels::FakeQuantAffineRow(column, quantized, n, params.inverse.data(), params.scale.numel() != 1,
                                *params.affine);
    return absl::OkStatus();
  }
  if (params.nvfp4_global) {
    // NVFP4 rounds each element alone once its group's scale is known: RTN's element math, row by row.
    DispatchFloating(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::Nvfp4FakeQuantColumn<T>(column, quantized, n, *params.nvfp4_global, params.scale.data_ptr<float>());
    });
    return absl::OkStatus();
  }
  const at::Tensor x = at::from_blob(const_cast<float*>(column), {n, 1}, at::kFloat);
  at::Tensor out = at::from_blob(quantized, {n, 1}, at::kFloat);
  if (dtype_ == at::kFloat) return FakeQuantizeInto(x, column_spec_, params.per_row, out, TensorRole::kWeight);
  QUARK_ASSIGN_OR_RETURN(const at::Tensor q,
                         FakeQuantize(x.to(dtype_), column_spec_, params.per_row, TensorRole::kWeight));
  out.copy_(q);
  return absl::OkStatus();
}

// w [N, K] float32 contiguous: the working weight, updated in place on rows.begin..end and left quantized there;
// u [K, K] upper (InverseFactorStep's, any strides). A block's columns are transposed into a buffer of the range's
// own (a column of W is a contiguous row there, and the buffer stays in cache), worked on there, and their quantized
// values transposed back over them in W (nothing reads a column again once its block is done); the lazy update then
// works on W's rows. Every float operation is Quark's, element for element: the in-block update rounds the product
// and then subtracts it, and the lazy update's GEMM sums each dot product over the block in the same order
// (transposing the operands, or taking fewer of their rows, changes the tiling, not the order of the sum), so the
// columns after a block carry Quark's bits.
absl::Status GptqRun::QuantizeRows(at::Tensor& w, const at::Tensor& u, RowRange& rows) const {
  const int64_t k = w.size(1), stride = k, block = options_.block_size;
  const int64_t n = rows.end - rows.begin, width = std::min(block, k);
  // The block's columns, their quantized values and their errors (w - q) / d, a row per column.
  at::Tensor buffers = at::empty({3, width, n}, w.options());
  at::Tensor err = buffers[2];
  float* wb = buffers[0].data_ptr<float>();
  float* qb = buffers[1].data_ptr<float>();
  float* errors = err.data_ptr<float>();
  float* w_rows = w.data_ptr<float>() + rows.begin * stride;
  const float* hinv = u.data_ptr<float>();
  const int64_t hinv_row = u.stride(0), hinv_column = u.stride(1);
  for (int64_t i1 = 0; i1 < k; i1 += block) {
    const int64_t i2 = std::min(i1 + block, k), count = i2 - i1;
    TransposeBlock(w_rows + i1, stride, n, count, wb, n);
    const RangeWeights weights{wb, i1, i2, w_rows, stride, n};
    // The block's columns in panels: each column's updates reach the rest of its panel at once, and a panel's
    // updates reach the block's later columns together (the same subtractions, in the same order, per element).
    for (int64_t p1 = i1, p2 = i1; p1 < i2; p1 = p2) {
      p2 = std::min(p1 + kUpdatePanel, i2);
      // A group observed as it starts must see every earlier column's update (Quark applies each at once), and a
      // panel's updates reach the columns after it only when it ends: a panel ends where such a group starts.
      if (grouped_ && !options_.static_groups) p2 = std::min(p2, (p1 / group_size_ + 1) * group_size_);
      for (int64_t j = p1; j < p2; ++j) {
        QUARK_ASSIGN_OR_RETURN(const ColumnParams* params, ParamsForColumn(j, weights, rows));
        float* wj = wb + (j - i1) * n;
        float* qj = qb + (j - i1) * n;
        QUARK_RETURN_IF_ERROR(QuantizeColumn(wj, qj, *params, n));
        const float* hrow = hinv + j * hinv_row;  // Hinv[j, :]
        const float d = hrow[j * hinv_column];
        float* e = errors + (j - i1) * n;
        for (int64_t r = 0; r < n; ++r) e[r] = (wj[r] - qj[r]) / d;
        for (int64_t t = j + 1; t < p2; ++t) SubtractScaled(wb + (t - i1) * n, e, &hrow[t * hinv_column], 1, n);
      }
      float h[kUpdatePanel];  // Hinv[p1:p2, t]
      for (int64_t t = p2; t < i2; ++t) {
        for (int64_t i = 0; i < p2 - p1; ++i) h[i] = hinv[(p1 + i) * hinv_row + t * hinv_column];
        SubtractScaled(wb + (t - i1) * n, errors + (p1 - i1) * n, h, p2 - p1, n);
      }
    }
    TransposeBlock(qb, n, count, n, w_rows + i1, stride);
    if (i2 < k) QUARK_RETURN_IF_ERROR(LazyUpdate(w, err.slice(0, 0, count), u.slice(0, i1, i2).slice(1, i2), rows));
  }
  return absl::OkStatus();
}

// W[rows, i2:] -= Err @ Hinv[i1:i2, i2:] in blocks of kUpdateRows rows (single-threaded GEMMs, the blocks in
// parallel when this range runs alone). One GEMM accumulates C - A B as Quark's matmul-then-subtract does while the
// block of columns fits one pass over the shared dimension of the BLAS kernels; longer blocks take Quark's two steps.
// err [count, rows], hinv_block [count, K - i2].
absl::Status GptqRun::LazyUpdate(at::Tensor& w, const at::Tensor& err, const at::Tensor& hinv_block,
                                 const RowRange& rows) const {
  const int64_t n = rows.end - rows.begin, blocks = (n + kUpdateRows - 1) / kUpdateRows;
  const int64_t i2 = w.size(1) - hinv_block.size(1);
  std::vector<absl::Status> statuses(static_cast<size_t>(blocks));
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t r1 = b * kUpdateRows, r2 = std::min(r1 + kUpdateRows, n);
      try {
        at::Tensor rest = w.slice(0, rows.begin + r1, rows.begin + r2).slice(1, i2);
        SubtractProduct(rest, err.slice(1, r1, r2).t(), hinv_block, options_.fast_linalg);
      } catch (const std::exception& error) {
        statuses[static_cast<size_t>(b)] = runtime::TorchErrorToStatus(error, "gptq lazy update");
      }
    }
  });
  for (absl::Status& status : statuses) QUARK_RETURN_IF_ERROR(status);
  return absl::OkStatus();
}

absl::Status GptqRun::QuantizeColumns(at::Tensor& w, const at::Tensor& u) {
  const int64_t n = w.size(0);
  // A range is whole blocks of kUpdateRows (LazyUpdate) and whole tiles (per_block: a range observes its own tiles).
  const int64_t unit = std::lcm(kUpdateRows, std::max<int64_t>(block_rows_, 1));
  const int64_t ranges = std::clamp<int64_t>(n / std::max(kMinRowsPerRange, unit), 1, at::get_num_threads());
  const int64_t units = (n + unit - 1) / unit;  // >= ranges
  rows_.resize(static_cast<size_t>(ranges));
  for (int64_t i = 0; i < ranges; ++i) {
    rows_[static_cast<size_t>(i)].begin = units * i / ranges * unit;
    rows_[static_cast<size_t>(i)].end = std::min(units * (i + 1) / ranges * unit, n);
  }
  // Single-threaded BLAS calls, in parallel over ranges (or over a lone range's row blocks): the work is the same,
  // minus the fork and join of every GEMM, and the bits do not depend on the thread count.
  const SingleThreadedBlas blas;
  if (ranges == 1) return QuantizeRows(w, u, rows_[0]);
  std::vector<absl::Status> statuses(static_cast<size_t>(ranges));
  at::parallel_for(0, ranges, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const size_t r = static_cast<size_t>(i);
      try {
        statuses[r] = QuantizeRows(w, u, rows_[r]);
      } catch (const std::exception& error) {
        statuses[r] = runtime::TorchErrorToStatus(error, "gptq");
      }
    }
  });
  for (absl::Status& status : statuses) QUARK_RETURN_IF_ERROR(status);
  return absl::OkStatus();
}

QuantParams GptqRun::WholeParams() const {
  if (!grouped_) return params_[0];
  if (options_.static_groups) return ConcatParams(params_, 1);
  std::vector<QuantParams> ranges;  // each range's groups side by side, then the ranges stacked by rows
  for (const RowRange& rows : rows_) {
    std::vector<QuantParams> groups;
    for (const ColumnParams& group : rows.observed) groups.push_back(group.params);
    ranges.push_back(ConcatParams(groups, 1));
  }
  return ConcatParams(ranges, 0);
}

absl::Status GptqRun::Prepare(at::IntArrayRef sizes) {
  QUARK_ASSIGN_OR_RETURN(const GptqColumnPlan plan, PlanGptqColumns(spec_, sizes, options_));
  column_spec_ = plan.column_spec;
  grouped_ = plan.grouped;
  group_size_ = plan.group_size;
  nvfp4_ = plan.nvfp4;
  block_rows_ = plan.block_rows;
  observer_.emplace(spec_, plan, dtype_);
  return absl::OkStatus();
}

absl::StatusOr<GptqResult> GptqRun::Run(at::Tensor w, const GptqFactor& factor) {
  using Clock = std::chrono::steady_clock;
  const auto columns_start = Clock::now();
  if (factor.perm.defined()) {
    const int64_t* p = factor.perm.data_ptr<int64_t>();
    perm_.assign(p, p + factor.perm.numel());
  }
  // Dead inputs (no calibration token reached them): their weight columns become 0 before the parameters are taken,
  // as in Quark. The parameters come from W in its own column order (w itself when nothing is dead), before the
  // working weight, which may be w itself, is permuted or changed.
  const bool any_dead = factor.dead.any().item<bool>();
  QUARK_RETURN_IF_ERROR(SetUpParams(any_dead ? w.masked_fill(factor.dead.unsqueeze(0), 0) : w));
  // The working weight, its columns in act order when asked: w itself when it is ours alone, a copy otherwise.
  const bool owned = w.use_count() == 1 && w.storage().use_count() == 1 && w.is_contiguous();
  at::Tensor work;
  if (owned) {
    work = std::move(w);
    if (factor.perm.defined()) PermuteColumnsInPlace(work, factor.perm);
  } else {
    work = factor.perm.defined() ? GatheredColumns(w, factor.perm) : w.clone(at::MemoryFormat::Contiguous);
  }
  w = at::Tensor();  // the working weight holds it from here, if anyone
  if (any_dead) {
    const at::Tensor dead_columns = factor.perm.defined() ? factor.dead.index_select(0, factor.perm) : factor.dead;
    work.masked_fill_(dead_columns.unsqueeze(0), 0);
  }
  QUARK_RETURN_IF_ERROR(QuantizeColumns(work, factor.upper));  // work is the quantized weight from here
  if (factor.perm.defined()) PermuteColumnsInPlace(work, at::argsort(factor.perm));  // back to W's column order
  GptqResult result;
  result.weight = std::move(work).to(dtype_);
  result.params = WholeParams();
  result.extra_damp = factor.extra_damp;
  result.factor_seconds = factor.seconds;
  result.columns_seconds = std::chrono::duration<double>(Clock::now() - columns_start).count();
  return result;
}

absl::Status CheckOptions(const GptqOptions& options) {
  if (!(options.damp_percent > 0 && options.damp_percent <= 1)) {
    return absl::InvalidArgumentError(StrCat("damp_percent: must be in (0, 1], got ", options.damp_percent));
  }
  if (options.block_size <= 0) return absl::InvalidArgumentError("block_size: must be positive");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GptqFactor> GptqFactorOf(at::Tensor hessian, const GptqOptions& options) {
  if (!hessian.defined() || hessian.dim() != 2 || hessian.size(0) != hessian.size(1)) {
    return absl::InvalidArgumentError("hessian: expected a square [K, K] matrix");
  }
  QUARK_RETURN_IF_ERROR(CheckOptions(options));
  if (options.tensor_ops || !hessian.device().is_cpu()) return GptqFactorByTensorOps(std::move(hessian), options);
  try {
    const auto start = std::chrono::steady_clock::now();
    GptqFactor factor;
    QUARK_ASSIGN_OR_RETURN(at::Tensor h, WorkingHessian(std::move(hessian), factor.dead));
    if (options.act_order) {
      factor.perm = at::argsort(at::diag(h), /*dim=*/0, /*descending=*/true);  // Quark's call (ties as torch has them)
      PermuteSymmetricInPlace(h, factor.perm);
    }
    QUARK_ASSIGN_OR_RETURN(factor.upper, InverseHessianFactor(std::move(h), options, factor.extra_damp));
    factor.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return factor;
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "gptq");
  }
}

namespace {

// Everything about the weight, the spec and the options that can be checked before any work.
absl::Status CheckWeight(const at::Tensor& weight, int64_t hessian_size, const QuantSpec& spec,
                         const GptqOptions& options, GptqRun& run) {
  if (!weight.defined() || weight.dim() != 2) return absl::InvalidArgumentError("weight: expected [N, K]");
  const int64_t k = weight.size(1);
  if (hessian_size != k) {
    return absl::InvalidArgumentError(StrCat("hessian: expected [", k, ", ", k, "] for a weight ",
                                             ShapeString(weight.sizes())));
  }
  QUARK_RETURN_IF_ERROR(CheckOptions(options));
  const at::ScalarType dtype = weight.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
    return absl::InvalidArgumentError("weight: expected float32, bfloat16 or float16");
  }
  return run.Prepare(weight.sizes());
}

bool TakesTensorOps(const at::Tensor& weight, const GptqOptions& options) {
  return options.tensor_ops || !weight.device().is_cpu();
}

}  // namespace

absl::StatusOr<GptqResult> GptqQuantizeWeight(const at::Tensor& weight, const GptqFactor& factor,
                                              const QuantSpec& spec, const GptqOptions& options) {
  try {
    GptqRun run(spec, options, weight.defined() ? weight.scalar_type() : at::kFloat);
    QUARK_RETURN_IF_ERROR(
        CheckWeight(weight, factor.upper.defined() ? factor.upper.size(0) : -1, spec, options, run));
    if (options.act_order != factor.perm.defined()) {
      return absl::InvalidArgumentError("desc_act: the factor was computed with another act order");
    }
    if (TakesTensorOps(weight, options)) return GptqQuantizeByTensorOps(weight, factor, spec, options);
    return run.Run(weight.to(at::kFloat), factor);
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "gptq");
  }
}

absl::StatusOr<GptqResult> GptqQuantizeWeight(const at::Tensor& weight, at::Tensor hessian, const QuantSpec& spec,
                                              const GptqOptions& options) {
  try {
    GptqRun run(spec, options, weight.defined() ? weight.scalar_type() : at::kFloat);
    const bool square = hessian.defined() && hessian.dim() == 2 && hessian.size(0) == hessian.size(1);
    QUARK_RETURN_IF_ERROR(CheckWeight(weight, square ? hessian.size(0) : -1, spec, options, run));
    QUARK_ASSIGN_OR_RETURN(const GptqFactor factor, GptqFactorOf(std::move(hessian), options));
    if (TakesTensorOps(weight, options)) return GptqQuantizeByTensorOps(weight, factor, spec, options);
    return run.Run(weight.to(at::kFloat), factor);
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "gptq");
  }
}

}  // namespace quark::algorithms
