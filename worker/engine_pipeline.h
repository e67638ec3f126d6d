// The engine-backed QuantizePipeline: the only part of quark-worker that links LibTorch (quark_engine).
#pragma once

#include <memory>

#include "worker/quantize_pipeline.h"

namespace quark::worker {

/// The pipeline quark-worker runs for real jobs: resolve the Config (spec.config or spec.preset, then
/// kv_cache_dtype and exclude; core/config/config_choice.h), then quark::QuantizeModel
/// (core/quantize/quantize_model.h): layer-streamed calibration over request.model_dir, the HF-quark export into
/// request.output_dir, perplexity before/after when request.evaluation_file is set. Progress phases are the
/// engine's (prepare, evaluate_float, quantize i/N, finish, evaluate_quantized, evaluate_reloaded, done); cancel is
/// polled between layers. Export formats other than HF-quark are UNIMPLEMENTED; the manifest's "config" is the
/// quantization_config written into the export's config.json.
std::shared_ptr<QuantizePipeline> MakeEnginePipeline();

}  // namespace quark::worker
