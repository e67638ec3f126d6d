// A float64 reference of the Gemma 2 / Gemma 3 (text) forward pass, written from HF transformers' modeling_gemma2.py /
// modeling_gemma3.py independently of the runtime's modules: explicit per-head loops, RoPE by its formula, sliding
// windows query by query, GELU-tanh by its formula.
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace quark::runtime::testing {

/// Logits [T, vocab] float64 of the Gemma model in `model_dir` for `ids`.
at::Tensor GemmaReferenceLogits(const std::string& model_dir, const std::vector<int64_t>& ids);

}  // namespace quark::runtime::testing
