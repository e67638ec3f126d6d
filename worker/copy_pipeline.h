// `quark-worker --test-mode copy`: the real job runner (lease storage, the model cache's fetch, the worker's disk,
// publish with manifest.json and its signature) around a pipeline that copies instead of quantizing, so chaos tests
// and benchmarks can run hundreds of jobs through every storage and disk path without the engine's cost.
#pragma once

#include <memory>

#include "worker/quantize_pipeline.h"

namespace quark::worker {

/// The job label that selects the copy: "test-copy-ms" = N (0..3,600,000).
inline constexpr char kTestCopyLabel[] = "test-copy-ms";

/// For a job labelled test-copy-ms = N: copies every file of request.model_dir into request.output_dir (same
/// relative paths) in 10 steps spread over N ms, reporting progress after each and returning CANCELLED promptly
/// when `cancel` fires. A write that fails (ENOSPC on a full disk, ...) is RESOURCE_EXHAUSTED or INTERNAL naming the
/// file and the OS error, so the attempt fails and may be retried. Any other job goes to `engine`
/// (FAILED_PRECONDITION "no engine pipeline" when it is null). A bad label value is INVALID_ARGUMENT naming it.
/// Thread-safe when `engine` is.
class CopyPipeline : public QuantizePipeline {
 public:
  explicit CopyPipeline(std::shared_ptr<QuantizePipeline> engine) : engine_(std::move(engine)) {}
  absl::StatusOr<PipelineResult> Run(const PipelineRequest& request, ProgressSink& progress,
                                     const CancelToken& cancel) override;

 private:
  std::shared_ptr<QuantizePipeline> engine_;
};

}  // namespace quark::worker
