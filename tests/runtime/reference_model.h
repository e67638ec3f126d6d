// A straightforward float64 reference of the Llama-family and OPT forward passes, written independently of
// the runtime's modules (explicit per-head loops, RoPE by its formula, sliding windows query by query), for
// tests of the runtime.
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace quark::runtime::testing {

/// Logits [T, vocab] float64 of the model in `model_dir` for `ids`.
at::Tensor ReferenceLogits(const std::string& model_dir, const std::vector<int64_t>& ids);

}  // namespace quark::runtime::testing
