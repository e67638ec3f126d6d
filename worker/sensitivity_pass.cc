#include "worker/sensitivity_pass.h"

#include <chrono>
#include <exception>
#include <fstream>

#include "core/runtime/compute_device.h"
#include "core/search/auto_quantize.h"
#include "core/search/sensitivity_cache.h"
#include "worker/storage/strings.h"

namespace quark::worker {
namespace {

absl::StatusOr<search::SensitivityTable> Measure(const PipelineRequest& request) {
  const quark::v1::JobSpec& spec = request.spec;
  search::AutoQuantizeOptions options;
  options.calibration_file = request.calibration_file.string();
  if (options.calibration_file.empty()) {
    return absl::InvalidArgumentError("spec.calibration.uri: a sensitivity pass needs calibration text");
  }
  // proto3 zeros mean "unset": the search's own defaults (16 samples of 256 tokens, seed 42).
  if (spec.calibration().num_samples() > 0) options.num_samples = spec.calibration().num_samples();
  if (spec.calibration().seq_len() > 0) options.seq_len = spec.calibration().seq_len();
  if (spec.calibration().seed() != 0) options.seed = spec.calibration().seed();
  absl::StatusOr<std::vector<search::Candidate>> candidates = search::ResolveCandidates({spec.preset()}, "spec.preset");
  if (!candidates.ok()) return candidates.status();
  const std::string model = request.model_dir.string();
  absl::StatusOr<std::vector<at::Tensor>> samples = search::AutoCalibrationSamples(model, options);
  if (!samples.ok()) return samples.status();
  // The pass computes where and in what the job's quantization would (the worker's device for a GPU job, the
  // spec's compute dtype): the figures that choose a recipe come from the arithmetic that will run it.
  runtime::StreamerOptions streamer_options;
  absl::StatusOr<runtime::ComputeDevice> device = runtime::ComputeDevice::Open(request.device, "resources.gpus");
  if (!device.ok()) return device.status();
  streamer_options.device = *device;
  if (!spec.resources().compute_dtype().empty()) {
    absl::StatusOr<at::ScalarType> dtype =
        runtime::ResolveComputeDtype(spec.resources().compute_dtype(), "spec.resources.compute_dtype");
    if (!dtype.ok()) return dtype.status();
    streamer_options.compute_dtype = *dtype;
  }
  absl::StatusOr<std::unique_ptr<runtime::LayerStreamer>> streamer =
      runtime::LayerStreamer::Open(model, streamer_options);
  if (!streamer.ok()) return streamer.status();
  // #36 item 4: a split pass's layer range, checked against the model before any work.
  const int64_t layers = (*streamer)->model().config().num_hidden_layers;
  const int64_t first = spec.sensitivity_first_layer(), count = spec.sensitivity_layer_count();
  if (first < 0 || count < 0 || (count == 0 && first != 0) || first + count > layers) {
    return absl::InvalidArgumentError(str::Cat("spec.sensitivity_first_layer ", first,
                                               ", spec.sensitivity_layer_count ", count,
                                               ": not a range of the model's ", layers, " decoder layers"));
  }
  options.sensitivity.first_layer = first;
  options.sensitivity.layer_count = count;
  return search::MeasureSensitivity(**streamer, *samples, *candidates, options.sensitivity);
}

}  // namespace

absl::StatusOr<PipelineResult> RunSensitivityPass(const PipelineRequest& request, ProgressSink& progress,
                                                  const CancelToken& cancel) {
  if (cancel.IsCancelled()) return absl::CancelledError("cancelled");
  quark::v1::Progress start;
  start.set_phase("calibrate");
  start.set_message(str::Cat("sensitivity pass of ", request.spec.preset(),
                              request.spec.sensitivity_layer_count() > 0
                                  ? str::Cat(", layers ", request.spec.sensitivity_first_layer(), "..",
                                             request.spec.sensitivity_first_layer() +
                                                 request.spec.sensitivity_layer_count() - 1)
                                  : std::string()));
  progress.Report(start);
  const auto began = std::chrono::steady_clock::now();
  absl::StatusOr<search::SensitivityTable> table;
  try {
    table = Measure(request);
  } catch (const std::exception& e) {
    return absl::InternalError(str::Cat("sensitivity pass: ", e.what()));
  }
  if (!table.ok()) return table.status();
  if (cancel.IsCancelled()) return absl::CancelledError("cancelled");
  PipelineResult result;
  if (table->passes.size() != 1) return absl::InternalError("sensitivity pass: one candidate, one pass expected");
  const search::CandidatePass& pass = table->passes.front();
  for (size_t g = 0; g < table->groups.size(); ++g) {
    result.metrics["kld:" + table->groups[g].name] = pass.kld[g];
    result.metrics["nll_increase:" + table->groups[g].name] = pass.nll_increase[g];
  }
  result.metrics["sensitivity_float_nll"] = table->float_nll;
  result.metrics["sensitivity_tokens"] = static_cast<double>(table->tokens);
  result.metrics["seconds_sensitivity"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  const std::filesystem::path path = request.output_dir / "sensitivity.json";
  std::ofstream out(path);
  out << search::SensitivityToJson(*table).dump(1) << "\n";
  if (!out) return absl::InternalError(str::Cat("sensitivity pass: cannot write ", path.string()));
  return result;
}

}  // namespace quark::worker
