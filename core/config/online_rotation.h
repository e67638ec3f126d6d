// #35 item 4: which exports can carry an online rotation. R4 (the rotation entry's `r4`: an online Hadamard on each
// down_proj's input) reaches vLLM only through compressed-tensors' transform_config (vLLM's
// CompressedTensorsLinearTransformMethod); the other exports have no place for an online transform, so a job with r4
// and one of them is refused before any work, by the engine (export_formats[i]) and at submit (spec.export_formats[i]).
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "core/config/quant_spec.h"

namespace quark {

/// Whether `config`'s algo_config has a rotation entry with r4.
bool HasOnlineR4(const Config& config);

/// OK for "compressed_tensors"; INVALID_ARGUMENT saying why for "hf_quark", "gguf", "onnx" (the caller prefixes the
/// field); OK for another name (the callers refuse unknown formats themselves).
absl::Status CheckR4ExportFormat(std::string_view format);

}  // namespace quark
