#include "core/algorithms/gptq_fused_blocks.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "core/base/status_macros.h"
#include "core/config/gptq_block_grid.h"
#include "core/config/quant_types.h"
#include "core/numerics/format_map.h"
#include "core/numerics/quant_kernels.h"
#include "kernels/cpu/format_traits.h"

namespace quark::algorithms {
namespace {

using kernels::element::GptqBlockArgs;

// The grid a fused block rounds a spec's columns on (core/config/gptq_block_grid.h): what FakeQuantize runs for the
// column (gptq_column_params.cc). nullopt where the column loop runs instead.
struct FusedGrid {
  int kind = kernels::element::kGptqIntegerGrid;
  kernels::GridArgs float_grid;  // float grids
};

std::optional<FusedGrid> FusedGridOf(const QuantSpec& spec) {
  const GptqBlockGrid grid = GptqBlockGridOf(spec);
  if (grid == GptqBlockGrid::kNone) return std::nullopt;
  FusedGrid fused;
  if (grid == GptqBlockGrid::kFloat) {
    fused.kind = kernels::element::kGptqFloatGrid;
    fused.float_grid = kernels::GridArgsOf(kernels::Traits(*ElemFormatOf(spec.ElementType())));
  }
  if (grid == GptqBlockGrid::kMxInt) fused.kind = kernels::element::kGptqMxIntGrid;
  if (grid == GptqBlockGrid::kW4A8) {
    // The first stage's grid (Fp8FirstStageSpec: fp8 e4m3 per tensor); the second stage's range is the spec's.
    fused.kind = kernels::element::kGptqW4A8Grid;
    fused.float_grid = kernels::GridArgsOf(kernels::Traits(kernels::ElemFormat::kFp8E4M3));
  }
  return fused;
}

// Parameters as the kernel reads them: [rows, groups] float32 on the device. An integer grid's also with
// 1.0f / scale in float32 (as the fake-quantization kernels compute it) and whether the zero point is a float one (as
// FakeQuantize decides it); a float grid's scale is the element scale (an MX block's power of two, an NVFP4 group's
// e4m3 value) under NVFP4's global scale; MXINT8's is the block's power of two (its exponent read from the bits);
// W4A8's are its integer stage's, under the fp8 stage's per-tensor scale.
struct ParamTable {
  at::Tensor scale, inv_scale, zero_point;
  bool float_zero_point = false;
  float global_scale = 1.0f;
};

// `block_rows` > 0 (2-D tiles): a parameter row covers that many weight rows, as the column loop repeats it.
ParamTable TableOf(const QuantParams& p, int64_t rows, int64_t block_rows, const FusedGrid& grid,
                   const at::Device& device) {
  const auto row_wise = [&](const at::Tensor& t) {
    at::Tensor f = t.to(device, at::kFloat);
    if (f.numel() == 1) return f.reshape({1, 1}).expand({rows, 1}).contiguous();
    if (block_rows <= 0) return f.reshape({rows, -1}).contiguous();
    return f.reshape({(rows + block_rows - 1) / block_rows, -1})
        .repeat_interleave(block_rows, 0)
        .slice(0, 0, rows)
        .contiguous();
  };
  ParamTable table;
  table.scale = row_wise(p.scale);
  if (p.global_scale.defined()) table.global_scale = p.global_scale.item<float>();
  if (grid.kind == kernels::element::kGptqFloatGrid || grid.kind == kernels::element::kGptqMxIntGrid) return table;
  table.inv_scale = at::full_like(table.scale, 1.0f).div_(table.scale);
  table.zero_point = row_wise(p.zero_point);
  table.float_zero_point = p.zero_point.scalar_type() != at::kInt;
  return table;
}

void Point(GptqBlockArgs& a, const ParamTable& t) {
  a.scale = t.scale.data_ptr<float>();
  // Float and MXINT8 grids read only the scale; the other pointers stay valid for the row's address arithmetic.
  a.inv_scale = t.inv_scale.defined() ? t.inv_scale.data_ptr<float>() : a.scale;
  a.zero_point = t.zero_point.defined() ? t.zero_point.data_ptr<float>() : a.scale;
  a.groups = t.scale.size(1);
  a.float_zero_point = t.float_zero_point;
  a.global_scale = t.global_scale;
}

int CastOf(at::ScalarType dtype) {
  if (dtype == at::kBFloat16) return 1;
  if (dtype == at::kHalf) return 2;
  return 0;
}

}  // namespace

absl::StatusOr<bool> QuantizeColumnsInFusedBlocks(at::Tensor& work, at::Tensor& q, const at::Tensor& u,
                                                  const QuantSpec& spec, const GptqColumnPlan& plan,
                                                  ColumnParameters& parameters, at::ScalarType dtype,
                                                  int64_t block_size, const FusedBlockVariant& variant) {
  const QuantKernels& kernels = QuantKernelsFor(work.device());
  // An empty segment asks the device whether it has the kernel, before anything is observed or changed.
  const std::optional<FusedGrid> grid = FusedGridOf(spec);
  if (!grid || !kernels.GptqBlock(GptqBlockArgs{})) return false;
  if (!work.is_contiguous() || !q.is_contiguous() || work.scalar_type() != at::kFloat) {
    return absl::InternalError("gptq: the fused blocks need contiguous float32 work and result tensors");
  }
  if (variant.column_offset != 0 && parameters.ObservesAsItGoes()) {
    return absl::InternalError("gptq: a column offset needs parameters known before the loop");
  }
  if (variant.gptaq_p.defined() && (!variant.gptaq_p.is_contiguous() || variant.gptaq_p.device() != work.device() ||
                                    variant.gptaq_p.scalar_type() != at::kFloat)) {
    return absl::InternalError("gptaq: the fused blocks need P contiguous float32 on the weight's device");
  }
  const int64_t n = work.size(0), k = work.size(1);
  const at::Device device = work.device();
  const at::Tensor upper = u.contiguous();
  at::Tensor errors = at::empty({n, std::min(block_size, k)}, work.options());

  GptqBlockArgs a;
  a.work = work.data_ptr<float>();
  a.ldw = k;
  a.q = q.data_ptr<float>();
  a.ldq = k;
  a.err = errors.data_ptr<float>();
  a.lde = errors.size(1);
  a.upper = upper.data_ptr<float>();
  a.ldu = k;
  a.rows = n;
  a.grid = grid->kind;
  if (grid->kind == kernels::element::kGptqIntegerGrid || grid->kind == kernels::element::kGptqW4A8Grid) {
    std::tie(a.qmin, a.qmax) = IntegerRange(spec.ElementType());
  }
  if (grid->kind != kernels::element::kGptqFloatGrid) a.round_mode = static_cast<int>(RoundModeOf(spec.round_method));
  a.float_grid = grid->float_grid;
  a.cast = CastOf(dtype);
  if (variant.gptaq_p.defined()) {
    a.asym = variant.gptaq_p.data_ptr<float>();
    a.ldp = variant.gptaq_p.size(1);
  }

  // Parameters known before the loop (per tensor, per channel, static groups): one table, and each column's group.
  ParamTable fixed;
  at::Tensor column_group;
  if (!parameters.ObservesAsItGoes()) {
    fixed = TableOf(parameters.Whole(), n, plan.block_rows, *grid, device);
    if (plan.grouped) {
      std::vector<int32_t> groups(static_cast<size_t>(k));
      for (int64_t c = 0; c < k; ++c) {
        groups[static_cast<size_t>(c)] = static_cast<int32_t>(parameters.FixedGroupOf(c + variant.column_offset));
      }
      column_group = at::tensor(groups, at::kInt).to(device);
    }
  }
  for (int64_t i1 = 0; i1 < k; i1 += block_size) {
    const int64_t i2 = std::min(i1 + block_size, k), count = i2 - i1;
    a.block_begin = i1;
    a.count = count;
    for (int64_t begin = 0; begin < count;) {
      int64_t end = count;
      ParamTable observed;
      if (parameters.ObservesAsItGoes()) {
        // A segment per group: its parameters are observed on the working weight as the group starts (the block's
        // earlier columns have updated it), as the column loop does.
        const int64_t column = i1 + begin;
        end = std::min(count, (column / plan.group_size + 1) * plan.group_size - i1);
        QUARK_ASSIGN_OR_RETURN(const QuantParams* p, parameters.For(column, work));
        observed = TableOf(*p, n, plan.block_rows, *grid, device);
        Point(a, observed);
        a.column_group = nullptr;
      } else {
        Point(a, fixed);
        a.column_group = column_group.defined() ? column_group.data_ptr<int32_t>() + i1 : nullptr;
      }
      a.begin = begin;
      a.end = end;
      kernels.GptqBlock(a);
      begin = end;
    }
    if (variant.after_block) {
      variant.after_block(i1, i2, errors);
    } else {
      LazyUpdate(work, errors, u, i1, i2);  // every column after the block, as the column loop does it
    }
  }
  return true;
}

}  // namespace quark::algorithms
