// The engine's float arithmetic where ONNX can spell it out, so that ONNX Runtime computes the same values rather
// than merely close ones. Close is not enough once activations are quantized: a last-bit difference that moves a
// value across a rounding boundary changes a code by one step, and every later layer amplifies it (docs/results.md,
// "ONNX export").
//
// The sum of squares of RMSNorm is the one reduction whose order ONNX can prescribe: LibTorch 1.13's CPU sum kernel
// (ATen/native/cpu/SumKernel.cpp: vectorized_inner_sum -> row_sum -> multi_row_sum) adds a contiguous row in a fixed
// order that depends only on the row length and the width of its vectors, and that order is written here as Slice and
// Add nodes. ReduceMean leaves the order to ONNX Runtime (about one norm output in seven then differs in the last
// bit). GEMM accumulation order and exp have no such spelling (docs/results.md).
#pragma once

#include <string>

#include <ATen/ATen.h>

#include "core/export/onnx_graph.h"

namespace quark::exporter::onnx_export {

/// The sum over the last axis of `x` ([B, T, n] float32, values >= 0: the order's leading zeros are dropped, which
/// changes nothing for them) in LibTorch's order for vectors of `lanes` floats; returns the [B, T, 1] value's name.
std::string TorchOrderSum(OnnxGraph& g, const std::string& x, int64_t n, int64_t lanes, const std::string& name);

/// The same order evaluated with LibTorch float additions: the reference TorchOrderSum is tested against, and the
/// probe EngineSumLanes uses. `x` [..., n] float32, values >= 0; returns [..., 1].
at::Tensor TorchOrderSumRef(const at::Tensor& x, int64_t lanes);

/// The vector width (floats) whose order reproduces this process's at::sum bit for bit: 8 for LibTorch's default
/// and AVX2 kernels, 16 for AVX512. 0 when neither does (another LibTorch): the norm then falls back to ReduceMean.
/// Probed once, on rows of 1, 17, 300 and 5,000 elements.
int64_t EngineSumLanes();

/// RMSNorm as the engine's runtime computes it (runtime::RmsNorm): w * (x * (1 / sqrt(sum(x * x) / n + eps))), the
/// sum in the engine's order (ReduceMean when EngineSumLanes() is 0). `x` [B, T, n]; `weight` an [n] initializer.
std::string RmsNormNodes(OnnxGraph& g, const std::string& x, const std::string& weight, int64_t n, float eps,
                         const std::string& name);

/// SiLU as LibTorch computes it (at::silu): x / (1 + exp(-x)). Sigmoid(x) * x is another rounding (about two
/// values in five differ; with Exp about one in twenty-five, ONNX Runtime's exp against LibTorch's).
std::string SiluNodes(OnnxGraph& g, const std::string& x, const std::string& name);

}  // namespace quark::exporter::onnx_export
