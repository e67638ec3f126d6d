#include "core/algorithms/gptq_kquant.h"

#include <ATen/Parallel.h>

#include <chrono>

#include "core/algorithms/linalg.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/export/gguf_kquant_grid.h"
#include "core/export/gguf_kquants.h"
#include "core/numerics/quant_layout.h"
#include "core/runtime/layer_streamer.h"

namespace quark::algorithms {
namespace {

using exporter::gguf::kQkK;
using exporter::gguf::KQuantGrid;

absl::Status CheckInputs(const at::Tensor& weight, const GptqFactor& factor, exporter::gguf::GgmlType type,
                         const at::Tensor& quant_weights) {
  QUARK_RETURN_IF_ERROR(KQuantGrid::Check(type));
  if (!weight.defined() || weight.dim() != 2) return absl::InvalidArgumentError("weight: expected [N, K]");
  const at::ScalarType dtype = weight.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
    return absl::InvalidArgumentError("weight: expected float32, bfloat16 or float16");
  }
  const int64_t k = weight.size(1);
  if (k % kQkK != 0) {
    return absl::InvalidArgumentError(StrCat("weight: ", ShapeString(weight.sizes()), " has ", k,
                                             " columns, not a multiple of the K-quant super-block (256)"));
  }
  if (!factor.upper.defined() || factor.upper.dim() != 2 || factor.upper.size(0) != k || factor.upper.size(1) != k) {
    return absl::InvalidArgumentError(
        StrCat("hessian: expected [", k, ", ", k, "] for a weight ", ShapeString(weight.sizes())));
  }
  if (factor.perm.defined()) {
    return absl::InvalidArgumentError(
        "desc_act: act order cannot run with a K-quant target (a super-block is 256 consecutive columns)");
  }
  if (quant_weights.defined() &&
      (quant_weights.dim() != 1 || quant_weights.size(0) != k || quant_weights.scalar_type() != at::kFloat)) {
    return absl::InvalidArgumentError(
        StrCat("quant_weights: expected [", k, "] float32, got ", ShapeString(quant_weights.sizes())));
  }
  return absl::OkStatus();
}

// One super-block of rows [begin, end): search each row's header on its current values, then round column by column
// with the in-block updates. `err` [N, 256] gets the scaled errors the lazy update spreads past the super-block.
void QuantizeSuperBlock(const KQuantGrid& grid, float* w, int64_t k, const float* u, const float* qw, uint8_t* blocks,
                        int64_t row_bytes, int64_t block_bytes, int64_t superblock, float* err, int64_t begin,
                        int64_t end) {
  const int64_t i1 = superblock * kQkK;
  for (int64_t r = begin; r < end; ++r) {
    float* row = w + r * k + i1;
    float* e_row = err + r * kQkK;
    uint8_t* block = blocks + r * row_bytes + superblock * block_bytes;
    grid.Search(row, qw ? qw + i1 : nullptr, block);
    for (int j = 0; j < kQkK; ++j) {
      const float* u_row = u + (i1 + j) * k + i1;  // U[i1 + j, i1:i2]
      const float x = row[j];
      const float q = grid.RoundInto(block, j, x);
      const float e = (x - q) / u_row[j];
      row[j] = q;
      e_row[j] = e;
      for (int t = j + 1; t < kQkK; ++t) row[t] -= e * u_row[t];
    }
  }
}

}  // namespace

absl::StatusOr<GptqKQuantResult> GptqKQuantizeWeight(const at::Tensor& weight, const GptqFactor& factor,
                                                     exporter::gguf::GgmlType type, const at::Tensor& quant_weights) {
  QUARK_RETURN_IF_ERROR(CheckInputs(weight, factor, type, quant_weights));
  try {
    const auto start = std::chrono::steady_clock::now();
    const int64_t n = weight.size(0), k = weight.size(1);
    // The working weight: a float32 copy of our own, dead inputs' columns zeroed as GPTQ does.
    at::Tensor w = weight.to(at::kFloat).clone(at::MemoryFormat::Contiguous);
    if (factor.dead.defined() && factor.dead.any().item<bool>()) w.masked_fill_(factor.dead.unsqueeze(0), 0);
    const at::Tensor u = factor.upper.to(at::kFloat).contiguous();
    const at::Tensor qw = quant_weights.defined() ? quant_weights.contiguous() : at::Tensor();
    GptqKQuantResult result;
    result.type = type;
    const int64_t row_bytes = exporter::gguf::RowBytes(type, k), block_bytes = exporter::gguf::RowBytes(type, kQkK);
    result.blocks.assign(static_cast<size_t>(n * row_bytes), 0);
    at::Tensor err = at::empty({n, kQkK}, at::kFloat);
    const KQuantGrid grid(type);
    for (int64_t s = 0; s < k / kQkK; ++s) {
      // Rows never mix inside a super-block: each thread takes a range of rows.
      at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
        QuantizeSuperBlock(grid, w.data_ptr<float>(), k, u.data_ptr<float>(),
                           qw.defined() ? qw.data_ptr<float>() : nullptr, result.blocks.data(), row_bytes, block_bytes,
                           s, err.data_ptr<float>(), begin, end);
      });
      const int64_t i2 = (s + 1) * kQkK;
      if (i2 < k) w.slice(1, i2).addmm_(err, u.slice(0, s * kQkK, i2).slice(1, i2), /*beta=*/1, /*alpha=*/-1);
    }
    result.weight = std::move(w);
    result.columns_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, "gptq");
  }
}

}  // namespace quark::algorithms
