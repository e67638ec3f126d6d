// AWQ's clip search (Quark's awq.py _search_best_clip): per output channel and group of input columns, the max |W|
// shrunk by i / clip_grid with the lowest output MSE on sampled tokens.
#include <algorithm>
#include <limits>
#include <vector>

#include "core/algorithms/smoothing.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/token_pass_memory.h"
#include "core/config/row_groups.h"

namespace quark::algorithms {
namespace {

// The mean over tokens (dim 1) of (out - reference)^2, computed in `out`'s own memory: the bits of
// Squared(out - reference).mean(1) without two more [groups, tokens, rows] tensors per shrink factor (fresh pages
// each: on a 7B layer the error's element-wise work was 61 of the clip search's 201 s).
at::Tensor MeanSquaredErrorInPlace(at::Tensor out, const at::Tensor& reference) {
  out.sub_(reference);
  return out.mul_(out).mean(1);
}

// Memory for one kind of per-group product, reused by every block of output channels and batch of shrink factors of
// one weight's search. A fresh product of up to [groups, tokens, 10 x 256] (168 MB for a 7B MLP weight) is first
// touched by the GEMM's zeroing of its output, page by page: on a 7B layer that was 73 of the products' 93 s. The same
// kernel writes into the reused memory (at::bmm_out): the same bits.
class ProductMemory {
 public:
  // a [batch, n, k] x b [batch, k, m] -> [batch, n, m], in this memory (grown when too small); valid until the next
  // call.
  at::Tensor Bmm(const at::Tensor& a, const at::Tensor& b) {
    const int64_t elements = a.size(0) * a.size(1) * b.size(2);
    if (!memory_.defined() || memory_.numel() < elements) {
      memory_ = at::Tensor();  // the smaller one goes before the larger one comes
      memory_ = at::empty({elements}, a.options());
    }
    at::Tensor out = memory_.narrow(0, 0, elements).view({a.size(0), a.size(1), b.size(2)});
    at::bmm_out(out, a, b);
    return out;
  }

 private:
  at::Tensor memory_;
};

// One block of output channels, shrink by shrink (Quark's loop): every factor's clamp, quantization, product and
// error on its own.
absl::StatusOr<at::Tensor> ClipOneShrinkAtATime(const at::Tensor& xg, const at::Tensor& w, const at::Tensor& org_out,
                                                int shrinks, const QuantSpec& spec, const AwqOptions& options,
                                                const WeightQdq& qdq, ProductMemory& products) {
  const int64_t rows = w.size(0), in = w.size(1), groups = xg.size(0), group = xg.size(2);
  const at::Tensor wg = w.view({rows, groups, group});
  const at::Tensor org_max = std::get<0>(wg.abs().max(-1, true));  // [rows, groups, 1]
  at::Tensor best = org_max.clone();
  at::Tensor min_err = at::full_like(org_max, 1e9);
  for (int i = 0; i < shrinks; ++i) {
    const at::Tensor max_val = org_max * (1.0 - static_cast<double>(i) / options.clip_grid);
    const at::Tensor clamped = at::max(at::min(wg, max_val), -max_val);
    QUARK_ASSIGN_OR_RETURN(const at::Tensor q, PseudoQuantizeWeight(clamped.view({rows, in}), spec, qdq));
    at::Tensor cur_out = products.Bmm(xg, q.view({rows, groups, group}).permute({1, 2, 0}));
    // mean over tokens of the squared error, per (row, group): [rows, groups, 1]
    const at::Tensor err = MeanSquaredErrorInPlace(std::move(cur_out), org_out).transpose(0, 1).unsqueeze(-1);
    const at::Tensor better = err < min_err;
    min_err = at::where(better, err, min_err);
    best = at::where(better, max_val, best);
  }
  return best.squeeze(-1);
}

// One block of output channels, `per_batch` shrink factors at a time: the batch's clamped weights side by side
// [n, rows, groups, group], quantized in one call where rows quantize on their own, one product
// [groups, tokens, n * rows] and one error [n, rows, groups]. The choice is the loop's: the first factor whose error
// is below every earlier one (NaN never), the unshrunk max when none is below 1e9.
absl::StatusOr<at::Tensor> ClipShrinkBatches(const at::Tensor& xg, const at::Tensor& w, const at::Tensor& org_out,
                                             int shrinks, int per_batch, const QuantSpec& spec,
                                             const AwqOptions& options, const WeightQdq& qdq,
                                             ProductMemory& products) {
  const int64_t rows = w.size(0), in = w.size(1), groups = xg.size(0), tokens = xg.size(1), group = xg.size(2);
  const at::Tensor wg = w.view({rows, groups, group});
  const at::Tensor org_max = std::get<0>(wg.abs().max(-1, true));  // [rows, groups, 1]
  const bool stacked_quantization = RowLocalQuantization(spec, static_cast<bool>(qdq));
  at::Tensor best = org_max.clone();
  at::Tensor min_err = at::full_like(org_max, 1e9);
  for (int first = 0; first < shrinks; first += per_batch) {
    const int64_t n = std::min(per_batch, shrinks - first);
    std::vector<at::Tensor> factors;
    for (int64_t i = 0; i < n; ++i) {
      factors.push_back(org_max * (1.0 - static_cast<double>(first + i) / options.clip_grid));
    }
    const at::Tensor max_val = at::stack(factors);                                         // [n, rows, groups, 1]
    const at::Tensor clamped = at::max(at::min(wg.unsqueeze(0), max_val), -max_val);       // [n, rows, groups, group]
    at::Tensor q;
    if (stacked_quantization) {
      QUARK_ASSIGN_OR_RETURN(q, PseudoQuantizeWeight(clamped.reshape({n * rows, in}), spec));
    } else {
      std::vector<at::Tensor> each;
      for (int64_t i = 0; i < n; ++i) {
        QUARK_ASSIGN_OR_RETURN(at::Tensor qi, PseudoQuantizeWeight(clamped[i].reshape({rows, in}), spec, qdq));
        each.push_back(std::move(qi));
      }
      q = at::stack(each);
    }
    // [groups, tokens, group] x [groups, group, n * rows] -> [groups, tokens, n, rows]
    at::Tensor cur_out =
        products.Bmm(xg, q.reshape({n * rows, groups, group}).permute({1, 2, 0})).view({groups, tokens, n, rows});
    // mean over tokens of the squared error, per (factor, row, group): [n, rows, groups, 1]
    const at::Tensor err =
        MeanSquaredErrorInPlace(std::move(cur_out), org_out.unsqueeze(2)).permute({1, 2, 0}).unsqueeze(-1);
    const at::Tensor finite = at::where(at::isnan(err), at::full({}, std::numeric_limits<double>::infinity(),
                                                                  err.options()), err);
    const auto [batch_min, batch_arg] = finite.min(0);  // the first of equal errors
    const at::Tensor better = batch_min < min_err;
    min_err = at::where(better, batch_min, min_err);
    best = at::where(better, max_val.gather(0, batch_arg.unsqueeze(0)).squeeze(0), best);
  }
  return best.squeeze(-1);
}

}  // namespace

absl::StatusOr<at::Tensor> AwqBestClip(const at::Tensor& weight, const at::Tensor& input, const QuantSpec& spec,
                                       const AwqOptions& options, const WeightQdq& qdq) {
  const int64_t out = weight.size(0), in = weight.size(1);
  const int64_t group = RowGroupColumns(spec, in);
  if (in % group != 0) return absl::InvalidArgumentError(StrCat("group_size ", group, " does not divide ", in));
  const int64_t groups = in / group;
  at::Tensor x = input.reshape({-1, in});
  const int64_t tokens = x.size(0);
  x = x.slice(0, 0, tokens, checkpoint::AwqClipTokenStride(tokens, options.clip_tokens));  // Quark: 0::T // n
  // Outputs per group as batched products: [groups, tokens, group] x [groups, group, out] -> [groups, tokens, out].
  // The sampled tokens only cross to the weight's device (inputs kept in host memory).
  const at::Tensor xg =
      x.to(weight.device(), weight.scalar_type()).view({-1, groups, group}).transpose(0, 1).contiguous();
  const int64_t batch = out % 256 == 0 ? 256 : 64;  // Quark's output-channel batches
  const int shrinks = static_cast<int>(options.max_shrink * options.clip_grid);
  const int per_batch = TrialsPerBatch(
      options.search_batch_bytes,
      ClipShrinkBytes(std::min(batch, out), in, groups, xg.size(1), SearchElementBytes(weight.scalar_type())), shrinks);
  std::vector<at::Tensor> best_all;
  ProductMemory float_outputs, clipped_outputs;
  for (int64_t start = 0; start < out; start += batch) {
    const at::Tensor w = weight.slice(0, start, std::min(out, start + batch));
    // [groups, tokens, rows]
    const at::Tensor org_out = float_outputs.Bmm(xg, w.view({w.size(0), groups, group}).permute({1, 2, 0}));
    absl::StatusOr<at::Tensor> best =
        per_batch > 1 ? ClipShrinkBatches(xg, w, org_out, shrinks, per_batch, spec, options, qdq, clipped_outputs)
                      : ClipOneShrinkAtATime(xg, w, org_out, shrinks, spec, options, qdq, clipped_outputs);
    if (!best.ok()) return best.status();
    best_all.push_back(*std::move(best));
  }
  return at::cat(best_all, 0);
}

}  // namespace quark::algorithms
