#include "worker/engine_pipeline.h"

#include "worker/storage/strings.h"

namespace quark::worker {
namespace {

// The engine's quantize-and-export entry point (ModelQuantizer + HF exporter, issue 5) is not in the tree yet,
// so this pipeline refuses real jobs with a clear error instead of pretending. Wiring it means replacing the body
// of Run() below with: resolve the Config from request.spec (core/config: PresetConfig / ConfigFromProtoJson,
// ApplyKvCacheDtype, exclude), run the quantizer over request.model_dir reporting one Progress per layer to
// `progress` and polling `cancel` between layers, export into request.output_dir, and return the metrics.
class EnginePipeline : public QuantizePipeline {
 public:
  absl::StatusOr<PipelineResult> Run(const PipelineRequest& request, ProgressSink& progress,
                                     const CancelToken& cancel) override {
    (void)progress;
    (void)cancel;
    return absl::UnimplementedError(str::Cat(
        "job ", request.job_id, ": this quark-worker was built without the engine pipeline (ModelQuantizer + "
        "HF export); run it with --test-mode for protocol tests"));
  }
};

}  // namespace

std::shared_ptr<QuantizePipeline> MakeEnginePipeline() { return std::make_shared<EnginePipeline>(); }

}  // namespace quark::worker
