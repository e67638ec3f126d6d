// gpt-oss's GGUF tensors (gguf_gpt_oss.h) from the config alone, without weights or LibTorch: what llama.cpp's gpt-oss
// cannot express (refused naming the field), and every tensor's name, ggml shape and type in file order. The writer
// checks its file against this plan; the estimator (core/estimate/artifact_size.cc) sizes the artifact by it.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/export/gguf_file.h"

namespace quark::exporter::gguf {

/// INVALID_ARGUMENT naming the config field when llama.cpp's gpt-oss cannot express `config` (see above): layer_types
/// other than even-sliding / odd-full, no sliding_window, swiglu_alpha / swiglu_limit other than 1.702 / 7,
/// attention_bias false, rope_scaling with mscale, mscale_all_dim or attention_factor.
absl::Status CheckGptOssGguf(const checkpoint::GptOssConfig& config);

/// Every tensor of the gpt-oss GGUF of `config` with its float weights in `type` (F32 or Q8_0) and the experts of the
/// projections in `mxfp4_modules` in MXFP4 (offsets unset). INVALID_ARGUMENT for another type, CheckGptOssGguf's
/// refusals and experts partly MXFP4 (naming the expert).
absl::StatusOr<std::vector<TensorInfo>> PlanGptOssGguf(const checkpoint::GptOssConfig& config, GgmlType type,
                                                      const std::set<std::string>& mxfp4_modules);

}  // namespace quark::exporter::gguf
