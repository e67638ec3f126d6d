// The scaling searches' trials evaluated side by side (#27 item 2). AWQ tries 20 ratios per scaling pair and 10 clip
// shrink factors per block of output channels, each a handful of small device operations; on a GPU every operation
// is a kernel launch, so the searches are launch-bound where the compute is small. With a memory allowance
// (AwqOptions::search_batch_bytes: what the device budget adds for it, quantize/pass_memory.h) the trials run in
// batches: one forward of the inspected module for several ratios, one product and one error for several shrink
// factors. The CPU gains too where trials are small (LibTorch's per-operation cost; AWQ on tinyllama-a 1.6x faster),
// with a smaller default allowance that leaves a large model's trials one at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/linear.h"

namespace quark::algorithms {

/// Q(w) of a whole weight [out, in] by another quantizer than a QuantSpec's fake quantization (a GGUF K-quant's
/// quantize + dequantize, quantize/gguf_fake_quant.h); the result has w's shape and dtype.
using WeightQdq = std::function<absl::StatusOr<at::Tensor>(const at::Tensor& w)>;

/// Q(w) with the weight spec: the observer's parameters of w itself, then fake quantization (what the weight
/// quantizer does to a weight it sees once); `qdq`, if set, instead of the spec.
absl::StatusOr<at::Tensor> PseudoQuantizeWeight(const at::Tensor& w, const QuantSpec& spec, const WeightQdq& qdq = {});

/// Whether quantizing rows stacked from several weights gives each row what quantizing its own weight gives: the
/// parameters are per output channel or per group of input columns, with no per-tensor stage (NVFP4's global scale,
/// W4A8's fp8 first stage) and no other quantizer (`qdq`).
bool RowLocalQuantization(const QuantSpec& spec, bool has_qdq);

/// How many of `trials` one batch holds: as many as `batch_bytes` pays for at `per_trial_bytes` each, at least one;
/// 1 when `batch_bytes` is 0 (no batching).
int TrialsPerBatch(int64_t batch_bytes, int64_t per_trial_bytes, int trials);

/// A linear computing n trial weights at once: input [n, ..., in] -> [n, ..., out], batch row g with weights[g] and
/// the shared bias, in one batched product (an input that is one tensor expanded over the trials, what a batched
/// search feeds the inspected module, is not copied). Each batch row is the GEMM of the trial's own FloatLinear, in
/// the dtype it would use (runtime::ComputeLinear: bf16 in float32 where the CPU has no native bf16 GEMMs): on the
/// CPU, whose batched product runs one GEMM a batch, the same bits. (One GEMM of the trials' weights side by side,
/// [n * out, in], differed from them in ~75% of the elements by OpenBLAS's blocking.) Only for the searches:
/// weight() is the first trial's. Not thread-safe (forward keeps its operands).
class StackedTrialLinear : public runtime::LinearLike {
 public:
  /// `weights` [n, out, in] in the compute dtype; `bias` [out] or undefined.
  StackedTrialLinear(at::Tensor weights, at::Tensor bias);
  at::Tensor forward(const at::Tensor& input) override;
  int64_t in_features() const override { return weights_.size(2); }
  int64_t out_features() const override { return weights_.size(1); }
  at::Tensor weight() const override { return weights_.select(0, 0); }
  at::Tensor bias() const override { return bias_; }

 private:
  at::Tensor weights_;  // [n, out, in]
  at::Tensor bias_;     // [out] or undefined
  at::Tensor weights_t_;  // [n, in, out] in the compute dtype, made on the first forward
  at::Tensor bias_row_;   // [1, 1, out] in the compute dtype
};

/// Installs StackedTrialLinears in place of a layer's float linears for one batch of trials and puts the originals
/// back however the batch ends.
class StackedTrials {
 public:
  explicit StackedTrials(runtime::DecoderLayer& layer) : layer_(layer) {}
  ~StackedTrials();
  StackedTrials(const StackedTrials&) = delete;
  StackedTrials& operator=(const StackedTrials&) = delete;
  /// `weights` [n, out, in] for the linear `relative_name` (its bias kept).
  absl::Status Install(const std::string& relative_name, at::Tensor weights);

 private:
  runtime::DecoderLayer& layer_;
  std::map<std::string, std::shared_ptr<runtime::LinearLike>> originals_;
};

/// Whether a pair's trials can run batched through `module`: every linear of `linears` a plain FloatLinear (not a
/// rotation's online Hadamard or another wrapper) and the module one of them, "self_attn" or "mlp" (dense; an MoE
/// block routes its tokens, and a batch row's tokens would reach the experts mixed with the other trials').
bool BatchesTrials(const runtime::DecoderLayer& layer, const std::string& module,
                   const std::vector<std::string>& linears);

/// The bytes a batched search counts for an element of `dtype`: its size, and for a type narrower than float32 also
/// a float32 copy (bf16 products widened on a CPU without bf16 GEMMs; reductions and fake quantization that compute
/// in float32). A bf16 AWQ layer held 1.3x GridTrialBytes + ClipShrinkBytes at the bf16 size alone
/// (tests/quantize/pass_memory_test.cc, when the clip search's error still took two more outputs a factor).
int64_t SearchElementBytes(at::ScalarType dtype);

/// Device bytes one ratio of a batched grid adds for the pair `linears` read through `module` over inputs of up to
/// `rows` tokens: the trial's weights ([out, in] each, `element_bytes`), the module's forward over its batch row
/// (4 x the pair's outputs, its linears' inputs, where a batched product copies an expanded input, and 2 x the
/// module's output a token, `element_bytes`; its loss's float32 difference and power, 8 bytes a token and output),
/// and for "self_attn" its scores (rep x rows^2 x (8 + e)). An upper bound: tests/quantize/pass_memory_test.cc holds
/// a batched AWQ's layer under the budget with it.
int64_t GridTrialBytes(const runtime::DecoderLayer& layer, const std::string& module,
                       const std::vector<std::string>& linears, int64_t rows, int64_t heads, int64_t kv_heads,
                       int64_t element_bytes);

/// Device bytes one shrink factor of a batched clip search adds for `rows` output channels of a weight with `in`
/// columns in `groups` groups over `tokens` sampled tokens: its clamped and quantized rows (2 x rows x in) and its
/// outputs (groups x tokens x rows; their error against the float outputs is computed in that memory), `element_bytes`
/// each.
int64_t ClipShrinkBytes(int64_t rows, int64_t in, int64_t groups, int64_t tokens, int64_t element_bytes);

}  // namespace quark::algorithms
