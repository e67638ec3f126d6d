// The engine-backed QuantizePipeline: the only part of quark-worker that links LibTorch (quark_engine).
#pragma once

#include <memory>

#include "worker/quantize_pipeline.h"

namespace quark::worker {

/// The pipeline quark-worker runs for real jobs: resolve the Config (spec.config or spec.preset, then
/// kv_cache_dtype and exclude), ModelQuantizer with layer-streamed calibration over request.model_dir, the
/// HF-quark export into request.output_dir, and perplexity before/after when request.evaluation_file is set.
std::shared_ptr<QuantizePipeline> MakeEnginePipeline();

}  // namespace quark::worker
